-- Share of shipments arriving on time, by month of planned arrival, mode, lane and carrier.
-- A shipment counts when it has a planned (ESTIMATED) POD_ARRIVAL; it arrived on time when its
-- actual POD_ARRIVAL is no later than the planned one plus var('on_time_tolerance_minutes').

{% set tolerance_minutes = var('on_time_tolerance_minutes', 60) %}

with

arrivals as (

    select * from {{ ref('fct_shipment_milestones') }}
    where event_code = 'POD_ARRIVAL'
        and planned_at is not null

),

shipments as (

    select * from {{ ref('fct_shipments') }}

),

classified as (

    select
        arrivals.shipment_id,
        {{ utc_month('arrivals.planned_at') }} as arrival_month,
        shipments.mode_of_transport,
        shipments.lane,
        shipments.origin_unloc,
        shipments.destination_unloc,
        shipments.carrier_name,
        arrivals.actual_at is not null as has_arrived,
        -- compared in seconds, unrounded: exactly planned + tolerance is still on time
        epoch(arrivals.actual_at) - epoch(arrivals.planned_at) <= {{ tolerance_minutes }} * 60 as is_on_time,
        arrivals.delay_minutes
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
        count(*) filter (where is_on_time) as shipments_on_time,
        count(*) filter (where has_arrived and not is_on_time) as shipments_late,
        round(avg(delay_minutes), 2) as avg_arrival_delay_minutes
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
        round(shipments_on_time / nullif(shipments_arrived, 0), 4) as on_time_share,
        avg_arrival_delay_minutes,
        {{ tolerance_minutes }} as on_time_tolerance_minutes
    from aggregated

)

select * from final
