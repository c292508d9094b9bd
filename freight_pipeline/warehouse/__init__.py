"""The warehouse: a private working DuckDB database written in one transaction per batch, and the
atomic publish of a read-only copy plus Parquet for readers (see ``store`` and ``publish``)."""
