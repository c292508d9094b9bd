{#
    Whether `column` holds one of `values` (a code list, e.g. freight_event_types()): true or
    false, never null (a null value is not known). For the is_known_* flags of the marts, which
    carry values outside the lists instead of dropping them:
    {{ is_in_code_list('event_type', freight_event_types()) }} as is_known_event_type
#}
{% macro is_in_code_list(column, values) -%}
    coalesce({{ column }} in ({% for value in values %}'{{ value | replace("'", "''") }}'{% if not loop.last %}, {% endif %}{% endfor %}), false)
{%- endmacro %}
