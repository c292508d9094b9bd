{#
    Every row whose `from_columns` are all non-null has a parent row in `to` with equal
    `to_columns` (a composite foreign key; the built-in `relationships` test takes one column).
#}
{% test composite_relationships(model, to, from_columns, to_columns) %}

select child.*
from (select * from {{ model }}) as child  -- a relation, or a where subquery (macros/test_rows.sql)
where
    {% for column in from_columns %}
    child.{{ column }} is not null and
    {% endfor %}
    not exists (
        select 1
        from {{ to }} as parent
        where
            {% for pair in zip(from_columns, to_columns) %}
            parent.{{ pair[1] }} = child.{{ pair[0] }}{% if not loop.last %} and{% endif %}
            {% endfor %}
    )

{% endtest %}
