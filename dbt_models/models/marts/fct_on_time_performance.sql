-- Share of shipments arriving on time, by month of planned arrival, mode, lane and carrier.
-- A shipment counts when it has a planned (ESTIMATED) POD_ARRIVAL, with or without a time of day.
-- It arrived on time when:
--   * both the planned and the actual POD_ARRIVAL are instants: actual <= planned +
--     var('on_time_tolerance_minutes');
--   * otherwise (fallback, an instant missing on either side, e.g. an estimate sent as a date
--     only): by day, actual local date <= planned local date (the tolerance does not apply).
-- Modes outside SEA/AIR/RD/RL (or none) are bucketed as mode_of_transport 'UNKNOWN', their values
-- as sent listed in unknown_modes_of_transport; arrivals that also have events of an unknown type
-- are counted in shipments_with_unknown_type_arrivals.

{% set tolerance_minutes = var('on_time_tolerance_minutes') %}

with

arrivals as (

    select * from {{ ref('fct_shipment_milestones') }}
    where event_code = 'POD_ARRIVAL'
        and (planned_at is not null or planned_date is not null)

),

shipments as (

    select * from {{ ref('fct_shipments') }}

),

classified as (

    select
        arrivals.shipment_id,
        -- the UTC month of the planned instant; for a date-only estimate the month of its date
        case
            when arrivals.planned_at is not null then {{ utc_month('arrivals.planned_at') }}
            else {{ date_month('arrivals.planned_date') }}
        end as arrival_month,
        case
            when {{ is_in_code_list('shipments.mode_of_transport', freight_modes_of_transport()) }}
                then shipments.mode_of_transport
            else 'UNKNOWN'
        end as mode_of_transport,
        shipments.mode_of_transport as mode_of_transport_as_sent,
        shipments.lane,
        shipments.origin_unloc,
        shipments.destination_unloc,
        shipments.carrier_name,
        arrivals.actual_at is not null or arrivals.actual_date is not null as has_arrived,
        arrivals.planned_at is not null and arrivals.actual_at is not null as is_judged_exactly,
        case
            when arrivals.planned_at is not null and arrivals.actual_at is not null
                -- compared in seconds, unrounded: exactly planned + tolerance is still on time
                then {{ epoch_seconds('arrivals.actual_at') }} - {{ epoch_seconds('arrivals.planned_at') }}
                    <= cast({{ tolerance_minutes }} as bigint) * 60  -- any tolerance a setting takes: no INT32 overflow
            when arrivals.planned_date is not null and arrivals.actual_date is not null
                then arrivals.actual_date <= arrivals.planned_date
        end as is_on_time,
        arrivals.delay_minutes,
        coalesce(arrivals.unknown_type_events, 0) > 0 as has_unknown_type_events
    from arrivals
    inner join shipments
        on arrivals.shipment_id = shipments.shipment_id

),

aggregated as (

    select
        arrival_month,
        mode_of_transport,
        lane,
        origin_unloc,
        destination_unloc,
        carrier_name,
        count(*) as shipments_planned,
        count(*) filter (where has_arrived) as shipments_arrived,
        count(*) filter (where has_arrived and is_on_time) as shipments_on_time,
        count(*) filter (where has_arrived and not is_on_time) as shipments_late,
        count(*) filter (where has_arrived and not is_judged_exactly) as shipments_judged_by_date,
        round(avg(delay_minutes), 2) as avg_arrival_delay_minutes,
        count(*) filter (where has_unknown_type_events) as shipments_with_unknown_type_arrivals,
        string_agg(distinct mode_of_transport_as_sent, ', ' order by mode_of_transport_as_sent)
            filter (where mode_of_transport = 'UNKNOWN') as unknown_modes_of_transport
    from classified
    group by arrival_month, mode_of_transport, lane, origin_unloc, destination_unloc, carrier_name

),

final as (

    select
        {{ surrogate_key(['arrival_month', 'mode_of_transport', 'lane', 'origin_unloc',
                          'destination_unloc', 'carrier_name']) }} as performance_key,
        arrival_month,
        mode_of_transport,
        lane,
        origin_unloc,
        destination_unloc,
        carrier_name,
        shipments_planned,
        shipments_arrived,
        shipments_on_time,
        shipments_late,
        shipments_judged_by_date,
        -- 1.0 *: a fraction on engines where integer / integer truncates
        round(1.0 * shipments_on_time / nullif(shipments_arrived, 0), 4) as on_time_share,
        avg_arrival_delay_minutes,
        {{ tolerance_minutes }} as on_time_tolerance_minutes,
        shipments_with_unknown_type_arrivals,
        unknown_modes_of_transport
    from aggregated

)

select * from final
