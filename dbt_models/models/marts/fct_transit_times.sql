-- One row per shipment with an actual departure from the port of loading (POL_DEPARTURE, ACTUAL)
-- and an actual arrival at the port of discharge (POD_ARRIVAL, ACTUAL): the transit time in hours,
-- with the planned transit time where both estimates exist.
-- Incremental: rebuilds only the shipments changed since the last complete build
-- (macros/changed_shipments.sql); a full refresh rebuilds all.

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

milestones as (

    select * from {{ ref('fct_shipment_milestones') }}
    where {{ changed_shipments_filter() }}

),

shipments as (

    select * from {{ ref('fct_shipments') }}
    where {{ changed_shipments_filter() }}

),

departures as (

    select shipment_id, planned_at, actual_at
    from milestones
    where event_code = 'POL_DEPARTURE'

),

arrivals as (

    select shipment_id, planned_at, actual_at
    from milestones
    where event_code = 'POD_ARRIVAL'

),

final as (

    select
        departures.shipment_id,
        shipments.mode_of_transport,
        shipments.origin_unloc,
        shipments.destination_unloc,
        shipments.lane,
        shipments.carrier_name,
        departures.actual_at as departed_at,
        arrivals.actual_at as arrived_at,
        {{ hours_between('departures.actual_at', 'arrivals.actual_at') }} as transit_hours,
        departures.planned_at as planned_departure_at,
        arrivals.planned_at as planned_arrival_at,
        {{ hours_between('departures.planned_at', 'arrivals.planned_at') }} as planned_transit_hours,
        {{ is_in_code_list('shipments.mode_of_transport', freight_modes_of_transport()) }} as is_known_mode_of_transport
    from departures
    inner join arrivals
        on departures.shipment_id = arrivals.shipment_id
    inner join shipments
        on departures.shipment_id = shipments.shipment_id
    where departures.actual_at is not null
        and arrivals.actual_at is not null

)

select * from final
