-- One row per shipment: its attributes, main-carriage lane and carrier, and goods/container
-- aggregates.
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

shipments as (

    select * from {{ ref('stg_shipments') }}
    where {{ changed_shipments_filter() }}

),

main_legs as (

    select * from {{ ref('int_main_carriage_legs') }}

),

goods as (

    select * from {{ ref('stg_shipment_goods') }}

),

dangerous_goods as (

    select * from {{ ref('stg_good_dangerous_goods') }}

),

containers as (

    select * from {{ ref('stg_shipment_containers') }}

),

-- lane: first origin and last destination of the main carriage
lanes as (

    select
        shipment_id,
        count(*) as main_carriage_leg_count,
        -- one source per shipment (int_main_carriage_legs): min() is that source
        min(leg_source) as main_carriage_source,
        max(origin_unloc) filter (where is_first_leg) as origin_unloc,
        max(origin_location_name) filter (where is_first_leg) as origin_name,
        max(destination_unloc) filter (where is_last_leg) as destination_unloc,
        max(destination_location_name) filter (where is_last_leg) as destination_name,
        -- the carrier of the first main-carriage leg that names one
        {{ first_by('airline_name', 'leg_sequence') }} as airline_name,
        {{ first_by('vessel_name', 'leg_sequence') }} as vessel_name,
        count(distinct coalesce(airline_name, vessel_name)) as carrier_count
    from main_legs
    group by shipment_id

),

goods_summary as (

    select
        shipment_id,
        count(*) as goods_line_count
    from goods
    group by shipment_id

),

-- good_dangerous_goods holds the records of goods lines at every depth (good_path '1', '1.2', ...)
dangerous_goods_summary as (

    select
        shipment_id,
        count(*) as dangerous_goods_record_count
    from dangerous_goods
    group by shipment_id

),

container_summary as (

    select
        shipment_id,
        count(*) as container_count
    from containers
    group by shipment_id

),

final as (

    select
        ---------- keys
        shipments.shipment_id,
        shipments.client,
        shipments.shipment_number,

        ---------- attributes
        shipments.office,
        shipments.direction,
        shipments.mode_of_transport,
        shipments.month_of_service,
        shipments.master_reference,
        shipments.house_reference,
        shipments.terms_of_delivery_matchcode,

        ---------- lane (main carriage)
        lanes.origin_unloc,
        lanes.origin_name,
        lanes.destination_unloc,
        lanes.destination_name,
        lanes.origin_unloc || '-' || lanes.destination_unloc as lane,
        coalesce(lanes.main_carriage_leg_count, 0) as main_carriage_leg_count,
        lanes.main_carriage_source,

        ---------- carrier (main carriage)
        case shipments.mode_of_transport
            when 'AIR' then lanes.airline_name
            when 'SEA' then lanes.vessel_name
        end as carrier_name,
        coalesce(lanes.carrier_count, 0) as carrier_count,

        ---------- measures
        shipments.total_gross_weight,
        shipments.chargeable_weight,
        shipments.total_volume,
        shipments.total_packages,
        coalesce(container_summary.container_count, 0) as container_count,
        coalesce(goods_summary.goods_line_count, 0) as goods_line_count,
        coalesce(dangerous_goods_summary.dangerous_goods_record_count, 0) > 0 as has_dangerous_goods,

        ---------- status and timestamps
        coalesce(shipments.is_closed, false) as is_closed,
        shipments.created_at,
        shipments.last_modified_at,
        shipments._synced_at,

        ---------- values the service controls, carried as sent: are they in the spec's lists?
        {{ is_in_code_list('shipments.mode_of_transport', freight_modes_of_transport()) }} as is_known_mode_of_transport,
        {{ is_in_code_list('shipments.direction', freight_shipment_directions()) }} as is_known_direction

    from shipments
    left join lanes
        on shipments.shipment_id = lanes.shipment_id
    left join goods_summary
        on shipments.shipment_id = goods_summary.shipment_id
    left join dangerous_goods_summary
        on shipments.shipment_id = dangerous_goods_summary.shipment_id
    left join container_summary
        on shipments.shipment_id = container_summary.shipment_id

)

select * from final
