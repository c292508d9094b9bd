"""The ``freight_meta`` tables: cursors, run log, rejected records, quarantine (the retry queue of
records that failed), data problems, raw documents, changed shipments (what the incremental marts
rebuild), table freshness, the fields each source sent (schema drift), the share of nulls per column.

Declared once as :class:`TableSpec` so the same declaration drives the DDL, the Parquet export and
the docs. They carry no audit columns (their own timestamps and ``run_id`` say who wrote them) and
no replace key (the warehouse writes them with explicit keyed upserts).
"""

from __future__ import annotations

from freight_pipeline.normalize.schema import Column, TableSpec

META_SCHEMA = "freight_meta"


def _meta(name: str, columns: tuple[Column, ...], primary_key: tuple[str, ...], description: str) -> TableSpec:
    return TableSpec(META_SCHEMA, name, columns, primary_key, description, replace_key=None, audit=False,
                     key_constraint=True)


def _key(name: str, type_: str, description: str) -> Column:
    return Column(name, type_, description, nullable=False)


SYNC_STATE = _meta(
    "sync_state",
    (
        _key("stream", "VARCHAR", "name of the incremental stream"),
        Column("cursor_value", "VARCHAR", "the stream's cursor as JSON text (its shape belongs to the stream)"),
        Column("updated_at", "TIMESTAMPTZ", "when the cursor was last written"),
        Column("run_id", "VARCHAR", "the run that wrote the cursor"),
    ),
    ("stream",),
    "Cursor of each incremental stream; advanced only in the same transaction as the rows it covers.",
)

SYNC_RUNS = _meta(
    "sync_runs",
    (
        _key("run_id", "VARCHAR", "Dagster run id or CLI run id"),
        _key("stream", "VARCHAR", "stream name"),
        Column("started_at", "TIMESTAMPTZ", "when the stream's run started"),
        Column("finished_at", "TIMESTAMPTZ", "null while running or after a crash"),
        Column("status", "VARCHAR", "running, success or failed"),
        Column("rows_read", "BIGINT", "records received from the service"),
        Column("rows_written", "BIGINT", "rows inserted into freight tables"),
        Column("requests", "BIGINT", "HTTP requests made"),
        Column("retries", "BIGINT", "HTTP requests retried"),
        Column("rejected", "BIGINT", "records written to rejected_records"),
        Column("quarantined", "BIGINT", "records that failed and wait in the retry queue (quarantine)"),
        Column("data_problems", "BIGINT", "values of loaded records nulled because they could not be converted"),
        Column("error", "VARCHAR", "error message of a failed stream"),
        Column("cursor_before", "VARCHAR", "cursor (JSON text) at the start"),
        Column("cursor_after", "VARCHAR", "cursor (JSON text) at the end"),
        Column("details", "JSON", "rows written per table and stream-specific figures"),
    ),
    ("run_id", "stream"),
    "One row per stream per run: started/finished, rows read and written, requests, retries, rejected.",
)
NOTICES = "notices"
"""The key, in a run's ``details.extra``, of what the run said of the service's behaviour (a line each)."""
NOTICE_KINDS = "notice_kinds"
"""The key, in a run's ``details.extra``, of each notice's kind (``sync.result.NoticeKind``), in the order of
:data:`NOTICES`."""


NAIVE_DATETIMES = "naive_datetimes"
"""The key, in a run's ``details.extra``, of the date-times it read without a UTC offset: how many (``read``) and the
service zone it read them in (``service_timezone``)."""


def extra_path(key: str) -> str:
    """The JSON path of ``key`` in a ``sync_runs`` row's ``details`` (under its ``extra``)."""
    return f"$.extra.{key}"


TABLE_FRESHNESS = _meta(
    "table_freshness",
    (
        _key("table_name", "VARCHAR", "a table of schema freight"),
        Column("stream", "VARCHAR", "the stream that writes it"),
        Column("synced_through", "TIMESTAMPTZ",
               "when the stream's latest successful run finished: the table holds the service's data as of "
               "then (null: never synced successfully)"),
        Column("last_run_id", "VARCHAR", "the stream's latest run"),
        Column("last_status", "VARCHAR", "its status: running, success, failed or switched off"),
        Column("last_attempt_at", "TIMESTAMPTZ", "when it started"),
        Column("last_error", "VARCHAR", "why it failed (null unless it failed)"),
    ),
    ("table_name",),
    "Per freight table: since when it is current, and whether its stream's latest run failed (then the "
    "table keeps the rows of its last successful run while every other table moves on).",
)

BUILD_STREAM = "dbt_build"
"""The ``sync_runs`` stream of the dbt build: its latest run must have succeeded for a publish."""

RETIRED_STREAMS: dict[str, str] = {
    "shipment_events": "shipments",
    "air_main_carriage_legs": "shipments",
    "sea_main_carriage_legs": "shipments",
    "shipment_memos": "shipments",
}
"""Streams of earlier versions -> the stream that does their work now. A retired stream's last run,
failed or cut off, holds back no publish once a later run of its successor succeeded."""

LATEST_STATE = "QUALIFY row_number() OVER (PARTITION BY stream ORDER BY rowid DESC) = 1"
"""Filter of ``sync_state`` reads: its latest row per stream (embedded: the only one; a lake appends a row per cursor
written), the one recorded last, by ``rowid`` as in :func:`latest_runs`: by ``updated_at``, a clock stepped back
made an older cursor the latest (a lake read back a cursor it had moved past, an entry it had cleared)."""


def latest_runs(table: str) -> str:
    """Each stream's latest row of ``table`` (``sync_runs``) as a subquery: the row of the stream recorded last, by
    ``rowid``. A run's start inserts its row after every row before it (one writer at a time; a lake's writers each
    run streams of their own) and its finish updates that row in place, keeping its rowid (in a DuckDB file, its byte
    copy, a DuckLake), so the rowids of a stream go up in the order its runs started. ``started_at`` does not: a
    clock stepped back (an NTP correction, a VM restored) dates a later run before an earlier one, which then showed
    as the latest (a failed run hidden behind an older success). 4 ms at 500,000 rows (by the latest start: 8 ms)."""
    return f"(SELECT * FROM {table} WHERE rowid IN (SELECT max(rowid) FROM {table} GROUP BY stream))"


def settled_retired_streams(table: str) -> str:
    """The streams of :data:`RETIRED_STREAMS` settled in ``table`` (``sync_runs``), as a subquery of their names:
    those whose successor succeeded in a run recorded after their last one (by ``rowid``, as :func:`latest_runs`),
    whatever the successor's runs did since. Their last run (failed or cut off before the upgrade) holds back no
    publish and is shown to no reader."""
    retired = ", ".join(f"'{old}'" for old in RETIRED_STREAMS)
    successors = ", ".join(f"'{new}'" for new in sorted(set(RETIRED_STREAMS.values())))
    successor = " ".join(f"WHEN '{old}' THEN '{new}'" for old, new in RETIRED_STREAMS.items())
    return (f"SELECT o.stream FROM (SELECT stream, max(rowid) AS at FROM {table} WHERE stream IN ({retired}) "
            f"GROUP BY stream) o JOIN (SELECT stream, max(rowid) AS at FROM {table} WHERE status = 'success' "
            f"AND stream IN ({successors}) GROUP BY stream) n ON n.stream = CASE o.stream {successor} END "
            "AND n.at > o.at")


REJECTED_RECORDS = _meta(
    "rejected_records",
    (
        _key("stream", "VARCHAR", "stream that received the record"),
        _key("source_key", "VARCHAR", "the record's key in the source (e.g. the shipment id)"),
        _key("run_id", "VARCHAR", "the run that rejected it"),
        Column("payload", "JSON", "the raw record as received (null when there was none, e.g. a 404)"),
        Column("reason", "VARCHAR", "why it could not be normalized"),
        Column("rejected_at", "TIMESTAMPTZ", "when the pipeline rejected the record (wrote this row)"),
    ),
    ("stream", "source_key", "run_id"),
    "Records that could not be normalized: the raw payload, the reason, the run.",
)

RAW_SHIPMENTS = _meta(
    "raw_shipments",
    (
        _key("shipment_id", "BIGINT", "id of the shipment"),
        Column("document", "JSON", "the last full document as received"),
        Column("fetched_at", "TIMESTAMPTZ", "when it was fetched (a later read that found the row's every other "
                                            "column as held leaves the row as it is)"),
        Column("last_modified_at", "TIMESTAMPTZ", "the document's last-modified instant (UTC)"),
        Column("run_id", "VARCHAR", "the run that fetched it (as fetched_at)"),
        Column("last_modified_key", "VARCHAR",
               "last-modified second in the service's own wall clock (YYYY-MM-DD HH:MM:SS), followed by its "
               "UTC offset when the service sent one (+HH:MM): the version's instant, even in a repeated hour"),
        Column("fetched_ceiling", "VARCHAR",
               "newest last-modified stamp the service held when the fetching run started (same form): a copy "
               "whose last_modified_key is an earlier instant was fetched after its last change"),
        Column("content_hash", "VARCHAR",
               "hash of everything read for the shipment in one pass (null: not all of it loaded)"),
    ),
    ("shipment_id",),
    "The last raw JSON document of each shipment, for replay without re-fetching.",
)
RAW_READ_INSTANT = ("fetched_at", "run_id")
"""The columns of :data:`RAW_SHIPMENTS` that say when and by which run a document was read, not what was read: a
document read again with every other column as held is not written again (``Writes._same_content``)."""

RAW_PARTS = _meta(
    "raw_parts",
    (
        _key("stream", "VARCHAR", "the part of the shipment: shipment_events, air_main_carriage_legs, "
             "sea_main_carriage_legs, shipment_memos; documents: its E-Files (a list of each file's lookup record "
             "efile, references, roles and content: sha256, size, path of its copy, or null)"),
        _key("shipment_id", "BIGINT", "id of the shipment"),
        Column("answer", "BLOB", "the part's last answer as received: its JSON text, zlib-compressed (null: the "
                                 "part did not apply to the shipment, or was gone, so its rows are none)",
               compression="uncompressed"),  # DuckDB's analysis of zlib's bytes cost 0.1 s a checkpoint, saved nothing
        Column("answer_bytes", "BIGINT", "the size of the JSON text before compression"),
        Column("fetched_at", "TIMESTAMPTZ", "when the batch that read it was assembled"),
        Column("run_id", "VARCHAR", "the run that read it"),
    ),
    ("stream", "shipment_id"),
    "The last raw answer of each part of each shipment (events, legs, memo lines, E-Files), compressed, written in "
    "the same transaction as its rows: with raw_shipments, what re-deriving the tables needs without a request.",
)

CHANGED_SHIPMENTS = _meta(
    "changed_shipments",
    (
        _key("shipment_id", "BIGINT", "a shipment written or deleted"),
        Column("run_id", "VARCHAR", "the run that last wrote or deleted it"),
        Column("changed_at", "TIMESTAMPTZ", "when"),
    ),
    ("shipment_id",),
    "Shipments written or deleted since the last complete dbt build (recorded in the same transaction as "
    "their rows): what the incremental marts rebuild. Emptied by a complete, successful build.",
)

QUARANTINE = _meta(
    "quarantine",
    (
        _key("stream", "VARCHAR", "stream the record belongs to"),
        _key("record_key", "VARCHAR", "the record's key in the source (shipment id; code-conversion id)"),
        Column("shipment_id", "BIGINT", "the shipment the record belongs to (null for code conversions)"),
        Column("reason", "VARCHAR", "why the record could not be loaded (the last failure)"),
        Column("request", "VARCHAR", "the request that failed, e.g. GET /service/shipment/1042/events"),
        Column("status_code", "INTEGER", "HTTP status of the failed answer (null: none came)"),
        Column("response_excerpt", "VARCHAR", "the start of what came back (at most 500 characters)"),
        Column("context", "JSON", "what a retry needs besides the key (client, shipment number, mode)"),
        Column("first_failed_at", "TIMESTAMPTZ", "when the record first failed (since it last loaded)"),
        Column("last_failed_at", "TIMESTAMPTZ", "when it failed last"),
        Column("attempts", "INTEGER", "failed attempts so far"),
        Column("next_attempt_at", "TIMESTAMPTZ", "not retried before this instant (exponential backoff)"),
        Column("run_id", "VARCHAR", "the run of the last failure"),
    ),
    ("stream", "record_key"),
    "Records that failed after the client's retries and wait to be retried: a record leaves only by "
    "loading, or by vanishing from the source.",
)

DATA_PROBLEMS = _meta(
    "data_problems",
    (
        _key("stream", "VARCHAR", "stream the record belongs to"),
        _key("record_key", "VARCHAR", "the record's key (shipment id; code-conversion id)"),
        _key("json_path", "VARCHAR", "where the value sits in the record, e.g. goods[0].weight"),
        Column("shipment_id", "BIGINT", "the shipment the record belongs to (null for code conversions)"),
        Column("raw_value", "JSON", "the value as received (long values cut, see reason)"),
        Column("reason", "VARCHAR", "why it could not be converted; its column holds null"),
        Column("run_id", "VARCHAR", "the run that loaded the record (a shipment read again with the content "
                                    "held keeps its rows and their problems as loaded)"),
        Column("detected_at", "TIMESTAMPTZ", "when the pipeline found the problem (loaded the record)"),
    ),
    ("stream", "record_key", "json_path"),
    "Values of loaded records that could not be converted (their column is null); replaced with the record.",
)

SOURCE_FIELDS = _meta(
    "source_fields",
    (
        _key("stream", "VARCHAR", "the source of the records: a part of a shipment (shipments, shipment_events, "
             "...) or a stream (code_conversions), as in data_problems"),
        _key("field", "VARCHAR", "a field (key) of its records, named by its path: house_reference at the top, "
             "goods[].weight in every goods line (subgoods at any depth included), "
             "main_carriage.carriage_legs[].origin.location"),
        Column("declared", "BOOLEAN", "whether a table spec declares it (false: its value is kept in the raw "
                                      "record only)"),
        Column("state", "VARCHAR", "received; new (no spec declares it); vanished (declared, received by earlier "
                                   "runs, absent from every object of its path in the latest run that read any); "
                                   "retyped (declared, received in a JSON kind earlier runs never sent it in)"),
        Column("changed_run_id", "VARCHAR", "the run that met the current state first (reported then)"),
        Column("changed_at", "TIMESTAMPTZ", "when"),
        Column("first_run_id", "VARCHAR", "the first run that received the field"),
        Column("first_seen_at", "TIMESTAMPTZ", "when"),
        Column("last_run_id", "VARCHAR", "the latest run that received it"),
        Column("last_seen_at", "TIMESTAMPTZ", "when"),
        Column("records_read", "BIGINT", "records of the source read by the latest run that read any"),
        Column("records_with", "BIGINT", "of those, the records that had the field (a null value counts: it is there)"),
        Column("example_record_key", "VARCHAR", "a record of that run with the field (vanished: one without it), "
                                                "e.g. the shipment id"),
        Column("records_read_total", "BIGINT", "records of the source read by the runs that received the field"),
        Column("records_with_total", "BIGINT", "of those, the records that had it (their share: how often it comes)"),
        Column("records_since_seen", "BIGINT", "records of the source read since a run last received it"),
        Column("path", "VARCHAR", "the path of the objects the field is a key of ('' for the records themselves, "
                                  "goods[] for goods lines); records_* count the objects of that path"),
        Column("kinds", "JSON", "the JSON kinds its values came in (number, text, boolean, object, array; a null "
                                "is none): a kind outside them is a type change"),
        Column("kinds_read", "JSON", "its values in the latest run that received it, per JSON kind"),
        Column("unread", "BIGINT", "retyped: values of the latest run in a new kind that could not be read (null in "
                                   "their column, each in data_problems)"),
    ),
    ("stream", "field"),
    "The shape of the records each source sent, at every level a spec reads: every field received, whether a "
    "spec declares it, the JSON kinds of its values, and which fields are new, vanished or retyped (schema "
    "drift, reported by the run that meets it).",
)

COLUMN_NULLS = _meta(
    "column_nulls",
    (
        _key("table_name", "VARCHAR", "a freight table"),
        _key("column_name", "VARCHAR", "one of its columns"),
        Column("stream", "VARCHAR", "the source of the records that fill the table (as in data_problems)"),
        Column("state", "VARCHAR", "usual; jumped (its share of nulls in the rows a run wrote rose above the "
                                   "bound from under the floor in the runs before it: open until a run's share "
                                   "is back under the bound)"),
        Column("recent_runs", "JSON", "the runs a run's share is compared with: [[run_id, rows, nulls], ...], "
                                      "oldest first (a run while the column is jumped is not added)"),
        Column("latest_run_id", "VARCHAR", "the latest run that wrote rows of the table"),
        Column("rows_latest", "BIGINT", "rows of the table that run wrote"),
        Column("nulls_latest", "BIGINT", "of those, the rows with the column null"),
        Column("changed_run_id", "VARCHAR", "the run that met the current state first (reported then)"),
        Column("changed_at", "TIMESTAMPTZ", "when"),
    ),
    ("table_name", "column_name"),
    "The share of nulls of each column in the rows the recent runs wrote, and the columns whose share jumped "
    "(a field renamed or dropped where no declaration watches it, a mapping's fault, a service sending null).",
)

ALERTS = _meta(
    "alerts",
    (
        _key("problem", "VARCHAR", "what is wrong, as a stable key: `step.sync_memos:failed`, "
                                   "`check.shipments.no_shape_changes:goods[].weight`, `freshness:shipments`"),
        _key("opened_at", "TIMESTAMPTZ", "when a run or a freshness look first found it (this episode)"),
        Column("level", "VARCHAR", "error or warning"),
        Column("title", "VARCHAR", "what is wrong, in a few words"),
        Column("summary", "VARCHAR", "what is wrong, in one line with its figures (as the latest look found it)"),
        Column("docs", "VARCHAR", "the next step: a repository doc and its section's anchor"),
        Column("opened_run", "VARCHAR", "the run that found it first"),
        Column("last_seen_at", "TIMESTAMPTZ", "when it was last found"),
        Column("last_seen_run", "VARCHAR", "the run that last found it"),
        Column("times_seen", "BIGINT", "runs and looks that found it in this episode"),
        Column("last_alerted_at", "TIMESTAMPTZ", "when a message on it was last queued (opened or repeated)"),
        Column("closed_at", "TIMESTAMPTZ", "when a run looked and no longer found it; null while it is open"),
        Column("closed_run", "VARCHAR", "that run"),
    ),
    ("problem", "opened_at"),
    "Each problem the runs found (a failed step, a check that did not pass, one thing a check found, a stale "
    "warehouse), from the run that opened it to the run that closed it: what the alerts are sent on, once per "
    "change of state (alerts).",
)

ALERT_MESSAGES = _meta(
    "alert_messages",
    (
        _key("message_id", "VARCHAR", "`<run>|<queued_at>`: the one message of one look"),
        _key("destination", "VARCHAR", "the destination, as a fingerprint of its URL (never the URL: it holds "
                                       "secrets)"),
        Column("problems", "VARCHAR", "the alerts rows' problems it is about, one per line"),
        Column("kinds", "VARCHAR", "what it says of them: opened, repeated (still open), resolved, joined by +"),
        Column("level", "VARCHAR", "error or warning: the most severe problem it opens or repeats; resolved when it "
                                   "only resolves"),
        Column("title", "VARCHAR", "the message's title"),
        Column("body", "VARCHAR", "the message's text"),
        Column("queued_at", "TIMESTAMPTZ", "when the look queued it"),
        Column("queued_run", "VARCHAR", "the run (or `status --alert`, `alerts freshness sensor`) that queued it"),
        Column("sent_at", "TIMESTAMPTZ", "when the destination accepted it; null until then (sent again by each look)"),
        Column("attempts", "BIGINT", "sends tried"),
        Column("last_error", "VARCHAR", "why the last send failed"),
        Column("sending_until", "TIMESTAMPTZ", "while a look's send of it may still be under way (its place in its "
                                               "destination's queue times the send timeout): the looks before then "
                                               "leave it to that send; null: no send under way"),
    ),
    ("message_id", "destination"),
    "The alerts' outbox: one message per look that changed what is said, per destination, kept until the "
    "destination accepts it (an unsent one is sent again by the next look).",
)

META_TABLES: tuple[TableSpec, ...] = (
    SYNC_STATE,
    SYNC_RUNS,
    REJECTED_RECORDS,
    QUARANTINE,
    DATA_PROBLEMS,
    RAW_SHIPMENTS,
    RAW_PARTS,
    CHANGED_SHIPMENTS,
    TABLE_FRESHNESS,
    SOURCE_FIELDS,
    COLUMN_NULLS,
    ALERTS,
    ALERT_MESSAGES,
)
