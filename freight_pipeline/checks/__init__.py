"""Checks of the working warehouse, plain Python: what each verifies, on which table, how severe a
failure is, and how it is evaluated (``warehouse``), on read-only SQL derived from the table specs
(``queries``). The Dagster asset checks (``defs.checks``) and ``freight-pipeline sync`` evaluate them."""
