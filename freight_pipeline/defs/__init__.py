"""The Dagster layer: thin wrappers around the plain-Python cores (sync, warehouse, dbt project).

``resources`` (service, warehouse), ``sync_assets`` (one asset per stream, one spec per table),
``dbt`` (the dbt project's models and tests), ``publish`` (the reader-facing copy), ``checks``
(keys, orphans, freshness, rejects), ``jobs`` (jobs and schedules). ``freight_pipeline.definitions``
puts them together.
"""
