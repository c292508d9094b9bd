{#
    The column lies between `min_value` and `max_value` (inclusive; either bound may be omitted).
    Nulls pass (combine with not_null where needed).
#}
{% test value_between(model, column_name, min_value=none, max_value=none) %}

select {{ column_name }}
from {{ model }}
where
    false
    {% if min_value is not none %} or {{ column_name }} < {{ min_value }}{% endif %}
    {% if max_value is not none %} or {{ column_name }} > {{ max_value }}{% endif %}

{% endtest %}
