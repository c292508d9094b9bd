-- One row per shipment and document type it has: how many E-File documents of that type are
-- linked to the shipment, and when the first and the last was stored. A shipment without any
-- document has no row (see the README query "shipments without a document of a given type").
-- Incremental: rebuilds only the shipments changed since the last complete build
-- (macros/changed_shipments.sql; the documents stream logs a shipment whose documents changed).

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

documents as (

    select * from {{ ref('stg_shipment_documents') }}
    where {{ changed_shipments_filter() }}

),

typed as (

    select
        shipment_id,
        efile_id,
        {{ document_type('description', 'file_name') }} as document_type,
        created_at
    from documents

),

final as (

    select
        shipment_id,
        document_type,
        document_type in ({{ "'" ~ transport_document_types() | join("', '") ~ "'" }}) as is_transport_document,
        count(*) as document_count,
        min(created_at) as first_created_at,
        max(created_at) as last_created_at
    from typed
    group by shipment_id, document_type

)

select * from final
