-- The main-carriage legs of each shipment, from one source per shipment:
--   1. the air/sea main-carriage endpoints (GET .../airmaincarriage, .../seamaincarriage), when
--      they returned legs for the shipment (they answer [] when the mode does not match);
--   2. otherwise the main_carriage legs embedded in the shipment document.
-- Legs are ordered by leg_no (the service's order of legs), then by array position.

with

air_legs as (

    select
        shipment_id,
        'airmaincarriage' as leg_source,
        position,
        leg_no,
        mot,
        airline_name,
        airline_awb_code,
        flight_no,
        cast(null as varchar) as vessel_name,
        cast(null as varchar) as imo_code,
        cast(null as varchar) as voyage_no,
        origin_unloc,
        origin_location_name,
        destination_unloc,
        destination_location_name,
        origin_estimated_at,
        origin_actual_at,
        destination_estimated_at,
        destination_actual_at
    from {{ ref('stg_air_main_carriage_legs') }}

),

sea_legs as (

    select
        shipment_id,
        'seamaincarriage' as leg_source,
        position,
        leg_no,
        mot,
        cast(null as varchar) as airline_name,
        cast(null as varchar) as airline_awb_code,
        cast(null as varchar) as flight_no,
        vessel_name,
        imo_code,
        voyage_no,
        origin_unloc,
        origin_location_name,
        destination_unloc,
        destination_location_name,
        origin_estimated_at,
        origin_actual_at,
        destination_estimated_at,
        destination_actual_at
    from {{ ref('stg_sea_main_carriage_legs') }}

),

embedded_legs as (

    select
        shipment_id,
        'shipment' as leg_source,
        leg_position as position,
        leg_no,
        mot,
        airline_name,
        airline_awb_code,
        flight_no,
        vessel_name,
        imo_code,
        voyage_no,
        origin_unloc,
        origin_location_name,
        destination_unloc,
        destination_location_name,
        origin_estimated_at,
        origin_actual_at,
        destination_estimated_at,
        destination_actual_at
    from {{ ref('stg_carriage_legs') }}
    where carriage = 'main'

),

endpoint_legs as (

    select * from air_legs
    union all
    select * from sea_legs

),

all_legs as (

    select * from endpoint_legs

    union all

    select embedded_legs.*
    from embedded_legs
    where not exists (
        select 1 from endpoint_legs
        where endpoint_legs.shipment_id = embedded_legs.shipment_id
    )

),

-- a shipment could in theory have both air and sea endpoint legs: keep the kind with the first leg
chosen_source as (

    select
        shipment_id,
        {{ first_by('leg_source', 'coalesce(leg_no, position)') }} as leg_source
    from all_legs
    group by shipment_id

),

final as (

    select
        all_legs.shipment_id,
        row_number() over (
            partition by all_legs.shipment_id
            order by all_legs.leg_no nulls last, all_legs.position
        ) as leg_sequence,
        all_legs.leg_source,
        all_legs.position as source_position,
        all_legs.leg_no,
        all_legs.mot,
        all_legs.airline_name,
        all_legs.airline_awb_code,
        all_legs.flight_no,
        all_legs.vessel_name,
        all_legs.imo_code,
        all_legs.voyage_no,
        all_legs.origin_unloc,
        all_legs.origin_location_name,
        all_legs.destination_unloc,
        all_legs.destination_location_name,
        all_legs.origin_estimated_at,
        all_legs.origin_actual_at,
        all_legs.destination_estimated_at,
        all_legs.destination_actual_at
    from all_legs
    inner join chosen_source
        on all_legs.shipment_id = chosen_source.shipment_id
        and all_legs.leg_source = chosen_source.leg_source

)

select
    *,
    leg_sequence = 1 as is_first_leg,
    leg_sequence = count(*) over (partition by shipment_id) as is_last_leg
from final
