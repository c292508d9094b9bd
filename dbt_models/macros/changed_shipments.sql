{#
  Incremental marts rebuild only the shipments that changed since the last complete build.

  The sync records every shipment it writes or deletes in freight_meta.changed_shipments, in the
  same transaction as its rows; the pipeline empties that table after a complete, successful dbt
  build (freight_pipeline/defs/dbt.py). An incremental mart deletes the rows of those shipments
  (pre-hook) and inserts them again from the current sources (a deleted shipment's rows just go).
  Without the table (a database the pipeline did not write), or on a first or full-refresh build,
  the filter is `true`: every shipment.
#}

{% macro changed_shipments_filter(column='shipment_id') -%}
    {%- set changes = none -%}
    {%- if this is not none and this.database is not none and is_incremental() -%}
        {%- set changes = adapter.get_relation(
            database=this.database, schema='freight_meta', identifier='changed_shipments') -%}
    {%- endif -%}
    {%- if changes is not none -%}
        {{ column }} in (select shipment_id from {{ changes }})
    {%- else -%}
        true
    {%- endif -%}
{%- endmacro %}


{% macro delete_changed_shipments() -%}
    {%- if is_incremental() -%}
        delete from {{ this }} where {{ changed_shipments_filter() }}
    {%- endif -%}
{%- endmacro %}
