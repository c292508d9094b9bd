"""The Dagster layer: thin wrappers around the plain-Python cores (sync, warehouse, dbt project).

``resources`` (service, warehouse), ``sync_assets`` (the spec of each table a stream fills),
``dbt`` and ``dbt_translation`` (the dbt models' specs), ``freight_job`` (the one multi-asset that runs the
engine, ``job.run``: streams, checks, build and publish), ``checks`` (the asset checks it reports, and freshness),
``rebuild`` (the rebuild job), ``lake`` (the lake's backfill and maintenance), ``jobs`` (jobs and schedules),
``run_history`` (the runs older than the retention deleted),
``writer_claim`` (a run's claim on the writer lock, told to Dagster), ``names`` (the jobs' names).
``freight_pipeline.definitions`` puts them together.
"""
