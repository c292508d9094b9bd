{#
  Data tests on the changed rows only, in an incremental build.

  dbt hands every generic test its model through get_where_subquery (the test's `where` config);
  this project's version adds one more filter: when the build runs with FREIGHT_DBT_TEST_ROWS=changed
  (the pipeline's incremental builds between two full checks: freight_pipeline/marts/plan.py) and the
  test's model declares `meta: {changed_rows_column: <column>}` (its rows change only with their
  shipment: the per-shipment staging and intermediate views, dbt_project.yml, and the marts
  incremental by changed shipment), the test reads only the rows of the shipments changed since the
  last complete build (freight_meta.changed_shipments, what the incremental marts rebuild). Every
  other build (a full refresh, a full check, dbt run by hand) tests every row.
  Parsing never reads the variable (`execute` is false then), so the partial parse stays valid.
#}

{% macro get_where_subquery(relation) -%}
    {%- set where = config.get('where', '') -%}
    {%- set changed = changed_rows_filter(relation) -%}
    {%- if where and changed -%}
        {%- set where = '(' ~ where ~ ') and ' ~ changed -%}
    {%- elif changed -%}
        {%- set where = changed -%}
    {%- endif -%}
    {%- if where -%}
        {%- set filtered -%}
            (select * from {{ relation }} where {{ where }}) dbt_subquery
        {%- endset -%}
        {%- do return(filtered) -%}
    {%- else -%}
        {%- do return(relation) -%}
    {%- endif -%}
{%- endmacro %}


{% macro changed_rows_filter(relation) -%}
    {#- the filter to the changed shipments' rows of the test's model, or none (every row) -#}
    {%- if not execute or env_var('FREIGHT_DBT_TEST_ROWS', 'all') != 'changed' -%}
        {%- do return(none) -%}
    {%- endif -%}
    {%- set attached = graph.nodes.get(model.attached_node) if model.attached_node else none -%}
    {%- set column = (attached.config.meta or {}).get('changed_rows_column') if attached else none -%}
    {%- if not column -%}
        {%- do return(none) -%}
    {%- endif -%}
    {%- set changes = api.Relation.create(database=relation.database, schema='freight_meta',
                                          identifier='changed_shipments') -%}
    {%- do return(adapter.quote(column) ~ ' in (select shipment_id from ' ~ changes ~ ')') -%}
{%- endmacro %}
