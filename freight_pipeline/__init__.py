"""freight_pipeline: incremental sync of a freight forwarder's transport management service into DuckDB."""

__version__ = "0.1.0"
