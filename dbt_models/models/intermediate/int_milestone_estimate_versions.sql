-- One row per version of the estimate of a milestone the ETA marts score, from freight_history
-- (macros/eta.sql declares the milestones):
--   * arrival / delivery: the versions of the shipment's ESTIMATED POD_ARRIVAL / DELIVERY_DATE
--     event (estimated_at = its event_at);
--   * leg_arrival: the versions of each main-carriage leg of the air/sea endpoints, per mode and
--     position (estimated_at = destination_estimated_at).
-- A version is valid from valid_from until valid_to (null while current). estimated_at is null for a
-- deleted version (the event or leg vanished, or the shipment was deleted) and for a version that
-- had no estimated instant (sent without a time of day, or a leg without an estimate).
-- Only the versions of the shipment the id names now: a version valid from before the shipment's
-- created_at was an earlier shipment's of the same id (a service whose data went back, the test
-- server's nightly reset or a restore, reuses the ids of the shipments it lost), whose estimates
-- are no revision of this one's and were never in force for it. A shipment deleted at the service
-- (no created_at held) keeps its versions.

with

event_versions as (

    select * from {{ ref('stg_event_versions') }}
    where event_type = 'ESTIMATED'
        and {{ is_eta_event('event_code') }}

),

leg_versions as (

    select * from {{ ref('stg_leg_versions') }}

),

shipments as (

    select shipment_id, created_at from {{ ref('stg_shipments') }}

),

estimate_versions as (

    select
        shipment_id,
        {{ eta_event_milestone('event_code') }} as milestone,
        event_code,
        cast(null as varchar) as leg_mode,
        cast(null as bigint) as leg_position,
        case when not is_deleted then event_at end as estimated_at,
        valid_from,
        valid_to,
        is_deleted
    from event_versions

    union all

    select
        shipment_id,
        'leg_arrival' as milestone,
        cast(null as varchar) as event_code,
        mode as leg_mode,
        position as leg_position,
        case when not is_deleted then destination_estimated_at end as estimated_at,
        valid_from,
        valid_to,
        is_deleted
    from leg_versions

),

final as (

    select
        shipment_id,
        {{ surrogate_key(['shipment_id', 'milestone', 'leg_mode', 'leg_position']) }} as milestone_key,
        milestone,
        event_code,
        leg_mode,
        leg_position,
        estimated_at,
        valid_from,
        valid_to,
        is_deleted
    from estimate_versions
    left join shipments using (shipment_id)
    where shipments.created_at is null or estimate_versions.valid_from >= shipments.created_at

)

select * from final
