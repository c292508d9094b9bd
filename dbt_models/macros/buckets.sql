{#
    The values of a column that a mart buckets: the code list plus 'UNKNOWN', where values outside
    the list (or none) are counted. Made by the model, so a test on them is severity error.
#}
{% macro freight_mode_of_transport_buckets() -%}
    {{ return(freight_modes_of_transport() + ['UNKNOWN']) }}
{%- endmacro %}
