{#
    Elapsed minutes from `start_at` to `end_at` (two TIMESTAMP WITH TIME ZONE expressions), as a
    DOUBLE rounded to 0.01: positive when `end_at` is later. Null when either side is null.
    Elapsed time, not calendar boundaries crossed (unlike date_diff('minute', ...)).
    Portable: built on epoch_seconds (cross_database.sql).
#}
{% macro minutes_between(start_at, end_at) -%}
    round(({{ epoch_seconds(end_at) }} - {{ epoch_seconds(start_at) }}) / 60.0, 2)
{%- endmacro %}

{#  Elapsed hours from `start_at` to `end_at`, DOUBLE rounded to 0.01. #}
{% macro hours_between(start_at, end_at) -%}
    round(({{ epoch_seconds(end_at) }} - {{ epoch_seconds(start_at) }}) / 3600.0, 2)
{%- endmacro %}
