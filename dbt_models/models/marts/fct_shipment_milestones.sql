-- One row per shipment and event code: the planned (ESTIMATED) and actual (ACTUAL) instants of
-- the milestone and the delay between them.

with

events as (

    select * from {{ ref('stg_shipment_events') }}

),

pivoted as (

    -- (shipment_id, event_code, event_type) is unique in the source: max() picks the one row
    select
        shipment_id,
        event_code,
        max(event_at) filter (where event_type = 'ESTIMATED') as planned_at,
        max(event_until) filter (where event_type = 'ESTIMATED') as planned_until,
        max(event_at) filter (where event_type = 'ACTUAL') as actual_at,
        max(location_unloc) filter (where event_type = 'ESTIMATED') as planned_location_unloc,
        max(location_unloc) filter (where event_type = 'ACTUAL') as actual_location_unloc,
        max(location_name) filter (where event_type = 'ESTIMATED') as planned_location_name,
        max(location_name) filter (where event_type = 'ACTUAL') as actual_location_name
    from events
    where event_type in ('ESTIMATED', 'ACTUAL')
    group by shipment_id, event_code

),

final as (

    select
        shipment_id,
        event_code,
        planned_at,
        planned_until,
        actual_at,
        {{ minutes_between('planned_at', 'actual_at') }} as delay_minutes,
        planned_at is not null as has_planned,
        actual_at is not null as has_actual,
        coalesce(actual_location_unloc, planned_location_unloc) as location_unloc,
        coalesce(actual_location_name, planned_location_name) as location_name
    from pivoted

)

select * from final
