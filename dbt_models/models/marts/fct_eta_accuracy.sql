-- How good the ETAs were: per shipment and milestone that has happened (int_milestone_actuals),
-- one row per horizon h of var('eta_horizons_days'): the estimate in force h days before the
-- actual A, and its error.
--
-- The estimate in force at horizon h is the estimate of the milestone's version (in freight_history,
-- int_milestone_estimate_versions) with valid_from <= A - h < coalesce(valid_to, +infinity): what the
-- pipeline had seen as the milestone's estimate at that instant. When that version is deleted or has
-- no estimated instant, or no version was valid then (the estimate appeared later, or before the
-- pipeline's first sync), the milestone is not scored at h: the row stays, is_scored false, without
-- an estimate or an error. h days are elapsed time (h * 24 hours).
--
-- error_hours = estimate - actual in hours, signed: positive when the estimate was later than what
-- happened (the shipment came early), negative when it came late. Lane, carrier and mode are the
-- shipment's, from fct_shipments: a shipment gone from it (deleted at the service) has no row, as in
-- fct_estimate_revisions, even while the history that would mark its milestones deleted is off.
-- Incremental: rebuilds only the shipments changed since the last complete build
-- (macros/changed_shipments.sql: every shipment whose history grew was written or deleted then).

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

actuals as (

    select * from {{ ref('int_milestone_actuals') }}
    where {{ changed_shipments_filter() }}

),

estimates as (

    select * from {{ ref('int_milestone_estimate_versions') }}
    where {{ changed_shipments_filter() }}

),

shipments as (

    select * from {{ ref('fct_shipments') }}
    where {{ changed_shipments_filter() }}

),

horizons as (

    {% for days in eta_horizons() -%}
    select {{ days }} as horizon_days
    {% if not loop.last %}union all
    {% endif %}
    {%- endfor %}

),

horizon_points as (

    select
        actuals.*,
        horizons.horizon_days,
        {{ days_before('actuals.actual_at', 'horizons.horizon_days') }} as horizon_at
    from actuals
    cross join horizons

),

-- the version valid at the horizon (versions of one milestone do not overlap; should two valid
-- ones meet, from case variants of an event the service sent, the later one counts)
in_force as (

    select
        horizon_points.milestone_key,
        horizon_points.horizon_days,
        estimates.estimated_at,
        estimates.valid_from,
        row_number() over (
            partition by horizon_points.milestone_key, horizon_points.horizon_days
            order by estimates.valid_from desc
        ) as latest
    from horizon_points
    inner join estimates
        on horizon_points.milestone_key = estimates.milestone_key
        and estimates.valid_from <= horizon_points.horizon_at
        and (estimates.valid_to is null or estimates.valid_to > horizon_points.horizon_at)

),

final as (

    select
        ---------- keys
        horizon_points.shipment_id,
        {{ surrogate_key(['horizon_points.milestone_key', 'horizon_points.horizon_days']) }} as eta_accuracy_key,
        horizon_points.milestone_key,
        horizon_points.milestone,
        horizon_points.event_code,
        horizon_points.leg_mode,
        horizon_points.leg_position,
        horizon_points.horizon_days,

        ---------- the estimate in force at the horizon, and what happened
        horizon_points.actual_at,
        horizon_points.horizon_at,
        in_force.estimated_at,
        in_force.valid_from as estimate_valid_from,
        in_force.estimated_at is not null as is_scored,
        {{ hours_between('horizon_points.actual_at', 'in_force.estimated_at') }} as error_hours,
        abs({{ hours_between('horizon_points.actual_at', 'in_force.estimated_at') }}) as abs_error_hours,

        ---------- the shipment (fct_shipments)
        shipments.mode_of_transport,
        shipments.origin_unloc,
        shipments.destination_unloc,
        shipments.lane,
        shipments.carrier_name,
        {{ is_in_code_list('shipments.mode_of_transport', freight_modes_of_transport()) }} as is_known_mode_of_transport

    from horizon_points
    left join in_force
        on horizon_points.milestone_key = in_force.milestone_key
        and horizon_points.horizon_days = in_force.horizon_days
        and in_force.latest = 1
    inner join shipments
        on horizon_points.shipment_id = shipments.shipment_id

)

select * from final
