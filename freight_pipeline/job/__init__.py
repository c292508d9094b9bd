"""The sync job as plain Python (``run``): every stream, the warehouse checks, the marts and the
publish in one process, without Dagster's run machinery; what ``freight-pipeline sync`` runs when no
Dagster instance records its runs."""
