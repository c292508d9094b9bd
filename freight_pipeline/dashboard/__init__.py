"""The BI dashboard over the PUBLISHED warehouse: ``sources`` (one read-only DuckDB connection per
page load, the filters), ``queries`` (plain functions returning DataFrames), ``charts`` and
``display`` (charts and number formats) and ``app`` (the Streamlit page, started by
``freight-pipeline dashboard``)."""
