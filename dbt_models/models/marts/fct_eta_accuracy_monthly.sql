-- ETA accuracy by month of the actual, milestone, horizon, mode, lane and carrier, from
-- fct_eta_accuracy: how far off the estimate in force h days before the milestone was, on average,
-- and how often it was within 24 hours of what happened.
-- Counted: the milestones that happened in the month (UTC month of the actual); scored: those with an
-- estimate in force at the horizon. The errors and the share are over the scored ones; within 24 h
-- compares the unrounded instants (|estimate - actual| <= 24 hours exactly).
-- Modes outside SEA/AIR/RD/RL (or none) are bucketed as mode_of_transport 'UNKNOWN', their values
-- as sent listed in unknown_modes_of_transport (as in fct_on_time_performance).
-- Rebuilt whole on every build (small: one row per group).

{% set within_seconds = 24 * 3600 %}
{#- the grain: one row per combination of these, declared once -#}
{% set grain = ['actual_month', 'milestone', 'horizon_days', 'mode_of_transport', 'lane', 'origin_unloc',
                'destination_unloc', 'carrier_name'] %}

with

accuracy as (

    select * from {{ ref('fct_eta_accuracy') }}

),

classified as (

    select
        {{ utc_month('actual_at') }} as actual_month,
        milestone,
        horizon_days,
        case
            when is_known_mode_of_transport then mode_of_transport
            else 'UNKNOWN'
        end as mode_of_transport,
        mode_of_transport as mode_of_transport_as_sent,
        lane,
        origin_unloc,
        destination_unloc,
        carrier_name,
        shipment_id,
        is_scored,
        error_hours,
        abs_error_hours,
        is_scored
            and abs({{ epoch_seconds('estimated_at') }} - {{ epoch_seconds('actual_at') }}) <= {{ within_seconds }}
            as is_within_24h
    from accuracy

),

aggregated as (

    select
        {{ grain | join(',\n        ') }},
        count(*) as milestones_happened,
        count(*) filter (where is_scored) as milestones_scored,
        count(distinct shipment_id) filter (where is_scored) as shipments_scored,
        count(*) filter (where is_within_24h) as milestones_within_24h,
        round(avg(abs_error_hours), 2) as mean_abs_error_hours,
        round(avg(error_hours), 2) as mean_error_hours,
        string_agg(distinct mode_of_transport_as_sent, ', ' order by mode_of_transport_as_sent)
            filter (where mode_of_transport = 'UNKNOWN') as unknown_modes_of_transport
    from classified
    group by {{ grain | join(', ') }}

),

final as (

    select
        {{ surrogate_key(grain) }} as accuracy_key,
        {{ grain | join(',\n        ') }},
        milestones_happened,
        milestones_scored,
        shipments_scored,
        milestones_within_24h,
        -- 1.0 *: a fraction on engines where integer / integer truncates
        round(1.0 * milestones_within_24h / nullif(milestones_scored, 0), 4) as within_24h_share,
        mean_abs_error_hours,
        mean_error_hours,
        unknown_modes_of_transport
    from aggregated

)

select * from final
