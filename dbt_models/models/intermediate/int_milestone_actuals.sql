-- One row per milestone the ETA marts score (macros/eta.sql) that has happened: the actual instant
-- of its current version in freight_history (not deleted, valid_to null):
--   * arrival / delivery: the ACTUAL POD_ARRIVAL / DELIVERY_DATE event's event_at;
--   * leg_arrival: the destination_actual_at of the main-carriage leg (per mode and position).
-- A milestone whose actual vanished (a deleted current version) or has no instant has no row.
-- Two current ACTUAL events of one milestone (case variants of the code or type the service sent,
-- which staging upper-cases into one) give the one of the latest version.

with

event_actuals as (

    select
        shipment_id,
        {{ eta_event_milestone('event_code') }} as milestone,
        event_code,
        cast(null as varchar) as leg_mode,
        cast(null as bigint) as leg_position,
        event_at as actual_at,
        valid_from
    from {{ ref('stg_event_versions') }}
    where event_type = 'ACTUAL'
        and {{ is_eta_event('event_code') }}
        and valid_to is null
        and not is_deleted
        and event_at is not null

),

leg_actuals as (

    select
        shipment_id,
        'leg_arrival' as milestone,
        cast(null as varchar) as event_code,
        mode as leg_mode,
        position as leg_position,
        destination_actual_at as actual_at,
        valid_from
    from {{ ref('stg_leg_versions') }}
    where valid_to is null
        and not is_deleted
        and destination_actual_at is not null

),

actuals as (

    select * from event_actuals
    union all
    select * from leg_actuals

),

keyed as (

    select
        shipment_id,
        {{ surrogate_key(['shipment_id', 'milestone', 'leg_mode', 'leg_position']) }} as milestone_key,
        milestone,
        event_code,
        leg_mode,
        leg_position,
        actual_at,
        row_number() over (
            partition by shipment_id, milestone, leg_mode, leg_position
            order by valid_from desc, actual_at desc
        ) as latest
    from actuals

),

final as (

    select
        shipment_id,
        milestone_key,
        milestone,
        event_code,
        leg_mode,
        leg_position,
        actual_at
    from keyed
    where latest = 1

)

select * from final
