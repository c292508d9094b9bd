{#
    Use a model's custom schema name as is: `+schema: analytics` builds into `analytics`, not
    `main_analytics` (dbt's default prefixes the target schema). Models without a custom schema go
    to the target schema (`main`).
#}
{% macro generate_schema_name(custom_schema_name, node) -%}
    {%- if custom_schema_name is none -%}
        {{ target.schema }}
    {%- else -%}
        {{ custom_schema_name | trim }}
    {%- endif -%}
{%- endmacro %}
