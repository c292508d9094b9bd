"""The BI dashboard over the PUBLISHED warehouse: ``queries`` (plain functions returning DataFrames,
one read-only DuckDB connection per page load), ``display`` (number formats) and ``app`` (the
Streamlit page, started by ``freight-pipeline dashboard``)."""
