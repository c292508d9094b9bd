{#
    Elapsed minutes from `start_at` to `end_at` (two TIMESTAMP WITH TIME ZONE expressions), as a
    DOUBLE rounded to 0.01: positive when `end_at` is later. Null when either side is null.
    Elapsed time, not calendar boundaries crossed (unlike date_diff('minute', ...)).
#}
{% macro minutes_between(start_at, end_at) -%}
    round((epoch({{ end_at }}) - epoch({{ start_at }})) / 60.0, 2)
{%- endmacro %}

{#  Elapsed hours from `start_at` to `end_at`, DOUBLE rounded to 0.01. #}
{% macro hours_between(start_at, end_at) -%}
    round((epoch({{ end_at }}) - epoch({{ start_at }})) / 3600.0, 2)
{%- endmacro %}

{#
    Calendar month (first day, DATE) of an instant, in UTC: independent of the session TimeZone
    setting, so every reader buckets the same instant into the same month.
#}
{% macro utc_month(instant) -%}
    cast(date_trunc('month', timezone('UTC', {{ instant }})) as date)
{%- endmacro %}
