"""Field declarations and value converters shared by every table.

A :class:`Field` maps one source key to one column: the same object gives the table spec its
:class:`Column` and gives the flattener its converter, so the declaration exists once. Converters
are plain functions on the hot path (no per-row model objects); they are lenient where the meaning
is unambiguous (``"12.5"`` for a number, ``"J"`` for true) and raise :class:`Invalid` otherwise.
The functions that apply them to a record (``copy_fields``, ``as_object``, ``as_items``, the column
groups' ``put``) never raise for a value: they turn :class:`Invalid` into a null column and one
entry in the record's :class:`Problems` sink.

Groups of columns that repeat across tables (DateTime objects, locations, contacts) are small
classes with ``columns()`` for the spec and ``put(row, value, path)`` for the flattener.

The code is split by job, and every name is re-exported here (import them from this module):

* :mod:`.converters`: column types, the value converters, ``CONVERTERS``, ``json_or_report``;
* :mod:`.plain_fields`: :class:`Field`, ``compile_fields`` / ``copy_fields``, the container readers
  (``as_object``, ``as_list``, ``as_items``, ``items_of``, ``string_lines``) and ``columns_of``;
* :mod:`.groups`: ``DateTimeGroup``, ``LocationGroup``, ``ContactGroup`` and the DateTime helpers.
"""

from freight_pipeline.normalize.converters import (  # noqa: F401
    BIGINT,
    BOOLEAN,
    CONVERTERS,
    DATE,
    DOUBLE,
    INTEGER,
    JSON,
    TIMESTAMPTZ,
    VARCHAR,
    Converter,
    Row,
    Rows,
    is_text,
    json_or_report,
    to_bool,
    to_date,
    to_float,
    to_instant,
    to_int,
    to_int32,
    to_json,
    to_str,
)
from freight_pipeline.normalize.groups import (  # noqa: F401
    LOCATION_CODE_TYPES,
    ContactGroup,
    DateTimeGroup,
    LocationGroup,
    loose_datetime,
    read_datetime,
    utc_instant,
)
from freight_pipeline.normalize.plain_fields import (  # noqa: F401
    CompiledFields,
    Field,
    as_items,
    as_list,
    as_object,
    columns_of,
    compile_fields,
    copy_fields,
    items_of,
    string_lines,
)
