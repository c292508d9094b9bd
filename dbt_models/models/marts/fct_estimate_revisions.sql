-- How estimates moved: per shipment and milestone with at least one estimate in freight_history
-- (int_milestone_estimate_versions), the number of times the estimate moved, the first and the last
-- estimate the pipeline saw, and the total slip between them.
--
-- The versions with an estimated instant, in valid_from order, form the estimate's sequence (a
-- deleted version, or one without an instant, is no estimate and is left out); it moved where an
-- estimate differs from the one before it: revisions = the number of such changes (the versions
-- with a different estimate than the previous, minus the first). A version that changed something
-- else (the location, the leg's actual) is no revision; A -> B -> A is two.
-- total_slip_hours = last - first estimate in hours: positive when the milestone slipped later.
-- Shipments of fct_shipments only: a shipment deleted at the service leaves the mart, as it leaves the
-- other marts (its versions stay in freight_history).
-- Incremental: rebuilds only the shipments changed since the last complete build
-- (macros/changed_shipments.sql).

{{
    config(
        materialized='incremental',
        incremental_strategy='append',
        on_schema_change='fail',
        pre_hook="{{ delete_changed_shipments() }}",
        meta={'changed_rows_column': 'shipment_id'},
    )
}}

with

estimates as (

    select * from {{ ref('int_milestone_estimate_versions') }}
    where {{ changed_shipments_filter() }}
        and estimated_at is not null

),

actuals as (

    select * from {{ ref('int_milestone_actuals') }}
    where {{ changed_shipments_filter() }}

),

shipments as (

    select * from {{ ref('fct_shipments') }}
    where {{ changed_shipments_filter() }}

),

sequenced as (

    select
        *,
        lag(estimated_at) over (partition by milestone_key order by valid_from, estimated_at) as previous_estimated_at
    from estimates

),

moves as (

    select
        *,
        previous_estimated_at is not null and estimated_at <> previous_estimated_at as is_revision
    from sequenced

),

summary as (

    select
        milestone_key,
        min(shipment_id) as shipment_id,
        min(milestone) as milestone,
        min(event_code) as event_code,
        min(leg_mode) as leg_mode,
        min(leg_position) as leg_position,
        count(*) as estimate_versions,
        count(*) filter (where is_revision) as revisions,
        {{ first_by('estimated_at', 'valid_from') }} as first_estimated_at,
        {{ last_by('estimated_at', 'valid_from') }} as last_estimated_at,
        min(valid_from) as first_estimate_seen_at,
        max(valid_from) filter (where is_revision) as last_revised_at
    from moves
    group by milestone_key

),

final as (

    select
        ---------- keys
        summary.shipment_id,
        summary.milestone_key,
        summary.milestone,
        summary.event_code,
        summary.leg_mode,
        summary.leg_position,

        ---------- revisions
        summary.estimate_versions,
        summary.revisions,
        summary.first_estimated_at,
        summary.last_estimated_at,
        {{ hours_between('summary.first_estimated_at', 'summary.last_estimated_at') }} as total_slip_hours,
        summary.first_estimate_seen_at,
        summary.last_revised_at,
        actuals.actual_at,

        ---------- the shipment (fct_shipments)
        shipments.mode_of_transport,
        shipments.origin_unloc,
        shipments.destination_unloc,
        shipments.lane,
        shipments.carrier_name

    from summary
    inner join shipments
        on summary.shipment_id = shipments.shipment_id
    left join actuals
        on summary.milestone_key = actuals.milestone_key

)

select * from final
