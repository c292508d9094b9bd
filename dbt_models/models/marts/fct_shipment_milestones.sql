-- One row per shipment and event code: the planned (ESTIMATED) and actual (ACTUAL) instants of
-- the milestone, their local dates, and the delay between them.
--
-- An event's instant (event_at) is its date and time at the UTC offset sent, or, when the service
-- sends none, in the service's time zone (FREIGHT_SERVICE_TIMEZONE, default UTC; docs/real-services.md,
-- "A clock without a UTC offset"). An event sent without a time of day (or with an offset that cannot
-- be read) has no instant (event_at null) but keeps its local date (event_date, as sent):
-- planned_date / actual_date carry it, so a date-only milestone is still a milestone (has_planned /
-- has_actual) and can be judged by day.
--
-- Values the service controls are carried, never dropped: an event code outside the spec's list
-- is a milestone like any other (is_known_event_code false); an event of a type other than
-- ESTIMATED / ACTUAL gives neither a plan nor an actual, but keeps its milestone row and is
-- counted in unknown_type_events (its types listed in unknown_event_types).
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

events as (

    select
        *,
        {{ is_in_code_list('event_type', freight_event_types()) }} as is_known_type
    from {{ ref('stg_shipment_events') }}
    where {{ changed_shipments_filter() }}

),

pivoted as (

    -- (shipment_id, event_code, event_type) is unique in the source: max() picks the one row
    select
        shipment_id,
        event_code,
        max(event_at) filter (where event_type = 'ESTIMATED') as planned_at,
        max(event_until) filter (where event_type = 'ESTIMATED') as planned_until,
        max(event_date) filter (where event_type = 'ESTIMATED') as planned_date,
        max(event_at) filter (where event_type = 'ACTUAL') as actual_at,
        max(event_date) filter (where event_type = 'ACTUAL') as actual_date,
        max(location_unloc) filter (where event_type = 'ESTIMATED') as planned_location_unloc,
        max(location_unloc) filter (where event_type = 'ACTUAL') as actual_location_unloc,
        max(location_name) filter (where event_type = 'ESTIMATED') as planned_location_name,
        max(location_name) filter (where event_type = 'ACTUAL') as actual_location_name,
        count(*) filter (where not is_known_type) as unknown_type_events,
        string_agg(distinct event_type, ', ' order by event_type) filter (where not is_known_type)
            as unknown_event_types
    from events
    group by shipment_id, event_code

),

final as (

    select
        shipment_id,
        event_code,
        planned_at,
        planned_until,
        planned_date,
        actual_at,
        actual_date,
        {{ minutes_between('planned_at', 'actual_at') }} as delay_minutes,
        planned_at is not null or planned_date is not null as has_planned,
        actual_at is not null or actual_date is not null as has_actual,
        coalesce(actual_location_unloc, planned_location_unloc) as location_unloc,
        coalesce(actual_location_name, planned_location_name) as location_name,
        {{ is_in_code_list('event_code', freight_event_codes()) }} as is_known_event_code,
        unknown_type_events = 0 as is_known_event_type,
        unknown_type_events,
        unknown_event_types
    from pivoted

)

select * from final
