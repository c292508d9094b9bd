{#
    The combination of the given columns is unique (a composite primary key). Written here because
    the project uses no packages (dbt_utils has the same test).
#}
{% test unique_combination_of_columns(model, combination_of_columns) %}

select
    {{ combination_of_columns | join(', ') }},
    count(*) as duplicates
from {{ model }}
group by {{ combination_of_columns | join(', ') }}
having count(*) > 1

{% endtest %}
