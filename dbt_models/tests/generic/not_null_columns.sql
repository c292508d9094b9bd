{#
    No row of the model has a null in any of `column_names`: one test, one query, where a not_null
    test per column would be as many dbt nodes (each about 20 ms of dbt's CPU in every build, for a
    query DuckDB answers in about a millisecond). The failing rows show which column is null.
#}
{% test not_null_columns(model, column_names) %}

select *
from {{ model }}
where
    false
    {% for column_name in column_names %} or {{ column_name }} is null{% endfor %}

{% endtest %}
