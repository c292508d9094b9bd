{#
    `persist_docs` (on for the marts in dbt_project.yml) as dbt-duckdb's, but only for what differs: one
    catalog query reads the relation's comment and its columns', and only the descriptions the catalog
    does not hold yet are written. A COMMENT ON costs DuckDB about half a millisecond (each one a new
    catalog entry of the table), and an incremental model keeps its comments from one build to the
    next: dbt-duckdb's own macro would write every one of them again at every build. Descriptions are
    written trimmed (a folded YAML block ends with a newline).
#}
{% macro duckdb__persist_docs(relation, model, for_relation, for_columns) -%}
  {%- set want_relation = for_relation and config.persist_relation_docs() and model.description -%}
  {%- set want_columns = for_columns and config.persist_column_docs() and model.columns -%}
  {%- if want_relation or want_columns -%}
    {%- set held = freight_catalog_comments(relation) -%}
    {%- set statements = [] -%}
    {%- if want_relation and '' in held and held[''] != model.description | trim -%}
      {%- do statements.append(duckdb__alter_relation_comment(relation, model.description | trim)) -%}
    {%- endif -%}
    {%- if want_columns -%}
      {%- for name, column in model.columns.items() -%}
        {%- set text = (column.description or '') | trim -%}
        {%- if text and name in held and held[name] != text -%}
          {%- set quoted = adapter.quote(name) if column.quote else name -%}
          {%- do statements.append('comment on column ' ~ relation ~ '.' ~ quoted ~ ' is '
                                   ~ duckdb_escape_comment(text) ~ ';') -%}
        {%- endif -%}
      {%- endfor -%}
    {%- endif -%}
    {%- if statements -%}
      {%- do run_query(statements | join('\n')) -%}
    {%- endif -%}
  {%- endif -%}
{%- endmacro %}


{#- The comments the catalog holds for `relation`: '' -> the relation's, column name -> the column's ('' when
    none); empty when the relation does not exist. -#}
{% macro freight_catalog_comments(relation) -%}
  {%- set where -%}
    database_name = '{{ relation.database }}' and schema_name = '{{ relation.schema }}'
  {%- endset -%}
  {%- set query -%}
    select '' as name, coalesce(comment, '') as comment, 0 as position from duckdb_tables()
    where {{ where }} and table_name = '{{ relation.identifier }}'
    union all
    select '', coalesce(comment, ''), 0 from duckdb_views()
    where {{ where }} and view_name = '{{ relation.identifier }}'
    union all
    select column_name, coalesce(comment, ''), column_index from duckdb_columns()
    where {{ where }} and table_name = '{{ relation.identifier }}'
    order by position
  {%- endset -%}
  {%- set held = {} -%}
  {%- if execute -%}
    {%- for row in run_query(query).rows -%}
      {%- do held.update({row[0]: row[1]}) -%}
    {%- endfor -%}
  {%- endif -%}
  {{ return(held) }}
{%- endmacro %}
