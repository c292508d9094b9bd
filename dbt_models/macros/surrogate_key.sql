{#
    A stable text key from several columns (nulls allowed): md5 of the values joined with '|',
    null written as a marker so that (null, 'a') and ('', 'a') differ. Written here because the
    project uses no packages (dbt_utils.generate_surrogate_key does the same).
#}
{% macro surrogate_key(columns) -%}
    md5(concat_ws('|'
    {%- for column in columns %}, coalesce(cast({{ column }} as varchar), '<null>'){% endfor -%}
    ))
{%- endmacro %}
