{#
    The engine-specific SQL of the project, each behind adapter.dispatch: `duckdb__` is what the
    pipeline runs (and the tests cover); `default__` is the ANSI/PostgreSQL spelling, a starting
    point for another adapter (write `<adapter>__<macro>` for an engine that differs, e.g.
    snowflake__ / bigquery__). The models call only these macros for such functions; what is left
    to port by hand is listed in dbt_models/README.md ("Other engines").
#}

{#  Seconds since 1970-01-01 UTC of a TIMESTAMP WITH TIME ZONE, with fractions (DOUBLE). #}
{% macro epoch_seconds(instant) -%}
    {{ return(adapter.dispatch('epoch_seconds', 'freight_marts')(instant)) }}
{%- endmacro %}

{% macro duckdb__epoch_seconds(instant) -%}
    epoch({{ instant }})
{%- endmacro %}

{% macro default__epoch_seconds(instant) -%}
    extract(epoch from {{ instant }})
{%- endmacro %}


{#
    Aggregate: `value` of the row with the smallest `order_key` among the rows where `value` is
    not null (null when there is none). E.g. the carrier of the first leg that names one.
#}
{% macro first_by(value, order_key) -%}
    {{ return(adapter.dispatch('first_by', 'freight_marts')(value, order_key)) }}
{%- endmacro %}

{% macro duckdb__first_by(value, order_key) -%}
    arg_min({{ value }}, {{ order_key }}) filter (where {{ value }} is not null)
{%- endmacro %}

{#  min_by: Snowflake, BigQuery, Spark, Trino, DuckDB; rows with a null key are ignored there. #}
{% macro default__first_by(value, order_key) -%}
    min_by({{ value }}, case when {{ value }} is not null then {{ order_key }} end)
{%- endmacro %}

{% macro postgres__first_by(value, order_key) -%}
    (array_agg({{ value }} order by {{ order_key }}) filter (where {{ value }} is not null))[1]
{%- endmacro %}


{#
    Aggregate: `value` of the row with the largest `order_key` among the rows where `value` is
    not null (null when there is none). E.g. the last estimate of a milestone.
#}
{% macro last_by(value, order_key) -%}
    {{ return(adapter.dispatch('last_by', 'freight_marts')(value, order_key)) }}
{%- endmacro %}

{% macro duckdb__last_by(value, order_key) -%}
    arg_max({{ value }}, {{ order_key }}) filter (where {{ value }} is not null)
{%- endmacro %}

{% macro default__last_by(value, order_key) -%}
    max_by({{ value }}, case when {{ value }} is not null then {{ order_key }} end)
{%- endmacro %}

{% macro postgres__last_by(value, order_key) -%}
    (array_agg({{ value }} order by {{ order_key }} desc) filter (where {{ value }} is not null))[1]
{%- endmacro %}


{#
    Calendar month (first day, DATE) of an instant, in UTC: independent of the session TimeZone
    setting, so every reader buckets the same instant into the same month.
#}
{% macro utc_month(instant) -%}
    {{ return(adapter.dispatch('utc_month', 'freight_marts')(instant)) }}
{%- endmacro %}

{% macro duckdb__utc_month(instant) -%}
    cast(date_trunc('month', timezone('UTC', {{ instant }})) as date)
{%- endmacro %}

{% macro default__utc_month(instant) -%}
    cast(date_trunc('month', {{ instant }} at time zone 'UTC') as date)
{%- endmacro %}


{#  Calendar month (first day, DATE) of a DATE. #}
{% macro date_month(day) -%}
    {{ return(adapter.dispatch('date_month', 'freight_marts')(day)) }}
{%- endmacro %}

{% macro default__date_month(day) -%}
    cast(date_trunc('month', {{ day }}) as date)
{%- endmacro %}
