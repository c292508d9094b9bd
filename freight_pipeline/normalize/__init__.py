"""Normalization: the service's JSON documents -> rows of the ``freight`` tables -> Arrow.

Plain Python, no Dagster and no database. Table specs are declared once (:mod:`.specs`, listed by
:mod:`.tables`) and drive DDL, Arrow and Parquet; the flatteners read the same declarations. The
field machinery is split by job: :mod:`.converters` (column types and value converters),
:mod:`.plain_fields` (:class:`Field` and the container readers) and :mod:`.groups` (DateTime,
location and contact column groups); :mod:`.signature` says what a change of the mapping can touch (the
rebuild's guide). Import each name from the module that defines it.
"""
