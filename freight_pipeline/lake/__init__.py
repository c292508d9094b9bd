"""Lake mode: the warehouse as a DuckLake (catalog in PostgreSQL, SQLite or DuckDB; Parquet on a path
or S3), written by several processes at once. Unset ``FREIGHT_LAKE_CATALOG_URI``: not used."""
