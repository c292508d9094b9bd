{#
    The milestones the ETA marts score (fct_eta_accuracy, fct_estimate_revisions), declared once:
    the events whose ESTIMATED versions are the estimates and whose ACTUAL is what happened, by
    event code, and the milestone each is; plus 'leg_arrival', the destination of every
    main-carriage leg (freight_history.leg_versions: destination_estimated_at against
    destination_actual_at).
#}
{% macro eta_event_milestones() -%}
    {{ return({'POD_ARRIVAL': 'arrival', 'DELIVERY_DATE': 'delivery'}) }}
{%- endmacro %}

{% macro eta_milestones() -%}
    {{ return(eta_event_milestones().values() | list + ['leg_arrival']) }}
{%- endmacro %}


{#  The milestone of an event code column: 'arrival', 'delivery' (null for another code). #}
{% macro eta_event_milestone(event_code) -%}
    case {{ event_code }}
        {%- for code, milestone in eta_event_milestones().items() %}
        when '{{ code }}' then '{{ milestone }}'
        {%- endfor %}
    end
{%- endmacro %}


{#  `event_code in ('POD_ARRIVAL', 'DELIVERY_DATE')`: the events of a scored milestone. #}
{% macro is_eta_event(event_code) -%}
    {{ is_in_code_list(event_code, eta_event_milestones().keys() | list) }}
{%- endmacro %}


{#
    The horizons of fct_eta_accuracy: var('eta_horizons_days') (declared in dbt_project.yml),
    checked to be whole days, not negative, without repeats.
#}
{% macro eta_horizons() -%}
    {%- set horizons = var('eta_horizons_days') -%}
    {%- if horizons is string or horizons is not iterable or horizons | length == 0 -%}
        {{ exceptions.raise_compiler_error("var eta_horizons_days must be a non-empty list of whole days, got " ~ horizons) }}
    {%- endif -%}
    {%- for days in horizons -%}
        {%- if days is not number or days != days | int or days < 0 -%}
            {{ exceptions.raise_compiler_error("var eta_horizons_days: " ~ days ~ " is not a whole number of days >= 0") }}
        {%- endif -%}
    {%- endfor -%}
    {%- if horizons | unique | list | length != horizons | length -%}
        {{ exceptions.raise_compiler_error("var eta_horizons_days repeats a horizon: " ~ horizons) }}
    {%- endif -%}
    {{ return(horizons | map('int') | list) }}
{%- endmacro %}


{#
    The instant `days` whole days (of 24 hours: elapsed time, not calendar days, so a change of
    daylight saving time in the session's time zone does not move it) before `instant`.
#}
{% macro days_before(instant, days) -%}
    ({{ instant }} - ({{ days }}) * 24 * interval '1 hour')
{%- endmacro %}
