"""The working database: replace semantics, atomic batches, cursors, full refresh, migration."""

from __future__ import annotations

import datetime as dt
import importlib.util
import json
import re
import zlib
from pathlib import Path

import duckdb
import pyarrow as pa
import pytest

from freight_pipeline.config import (
    DATA_DIR_ENV,
    DUCKDB_MEMORY_LIMIT_ENV,
    LAKE_CATALOG_URI_ENV,
    LAKE_DATA_URI_ENV,
    StorageSettings,
)
from freight_pipeline.lake.backend import LakeBackend, storage_from_env
from freight_pipeline.lake.settings import LakeSettings
from freight_pipeline.normalize.flatten import normalize_shipment, to_arrow_batch
from freight_pipeline.normalize.problems import Problems
from freight_pipeline.normalize.records import normalize_memos
from freight_pipeline.normalize.schema import Column, TableSpec
from freight_pipeline.normalize.tables import FREIGHT_TABLES, SHIPMENT_DOCUMENT_TABLES
from freight_pipeline.sync.parts import PART_TABLES
from freight_pipeline.warehouse import meta, store
from freight_pipeline.warehouse import paths as paths_module
from freight_pipeline.warehouse import reads as reads_module
from freight_pipeline.warehouse import writes as writes_module
from freight_pipeline.warehouse.ddl import connect, ensure_tables, quote
from freight_pipeline.warehouse.embedded import EmbeddedDuckDB
from freight_pipeline.warehouse.history import BEHIND_STATE
from freight_pipeline.warehouse.meta import RAW_PARTS
from freight_pipeline.warehouse.paths import read_run_log, run_log_path, working_db_path
from freight_pipeline.warehouse.records import (
    BatchWrite,
    DataProblem,
    Quarantined,
    RawBatch,
    RawDocument,
    RawPart,
    RawPosition,
    Reject,
    RunRecord,
)
from freight_pipeline.warehouse.run_log import RunLog
from freight_pipeline.warehouse.store import SCHEMA_STATE, Warehouse, open_warehouse, schema_signature
from freight_pipeline.warehouse.writes import RepeatedKey, Writes
from freight_pipeline_tests.normalize import samples
from freight_pipeline_tests.warehouse.helpers import (
    CODES,
    LINES,
    NOTES,
    PARENTS,
    T0,
    TABLES,
    apply_shipment_batch,
    codes,
    shipment_batch,
)

CURSOR = "shipments"


@pytest.fixture
def wh(tmp_path: Path) -> Warehouse:
    with Warehouse(tmp_path, TABLES) as warehouse:
        yield warehouse


def rows(wh: Warehouse, sql: str) -> list[tuple]:
    return wh.con.execute(sql).fetchall()


def count(wh: Warehouse, table: str, where: str = "true") -> int:
    return rows(wh, f"SELECT count(*) FROM freight.{table} WHERE {where}")[0][0]


def apply(wh: Warehouse, ids: list[int], cursor: str | None = None, **kwargs) -> dict[str, int]:
    tables, raw = shipment_batch(ids, **{k: kwargs.pop(k) for k in ("lines", "marks", "version") if k in kwargs})
    return apply_shipment_batch(
        wh, "run-1", tables, ids, raw_documents=raw, cursor=(CURSOR, cursor) if cursor else None, **kwargs
    )


def snapshot(wh: Warehouse, *, business_only: bool = False) -> dict[str, list[str]]:
    """Every row of every table (all columns, or the business columns of the freight tables), sorted."""
    specs = wh.database.tables if business_only else (*wh.database.tables, *wh.database.meta_tables)
    out = {}
    for spec in specs:
        columns = ", ".join(spec.column_names if business_only else [c.name for c in spec.all_columns])
        out[spec.qualified_name] = sorted(map(repr, rows(wh, f"SELECT {columns} FROM {spec.qualified_name}")))
    return out


def test_creates_schema_idempotently_in_a_private_file(tmp_path: Path) -> None:
    with Warehouse(tmp_path, TABLES) as wh:
        assert wh.path == working_db_path(tmp_path) == tmp_path / "work" / "warehouse.duckdb"
        assert wh.ensure_schema() == []
        names = {r[0] for r in rows(wh, "SELECT schema_name || '.' || table_name FROM duckdb_tables()")}
    assert {
        "freight.parents",
        "freight.lines",
        "freight_meta.sync_state",
        "freight_meta.sync_runs",
        "freight_meta.rejected_records",
        "freight_meta.raw_shipments",
    } <= names
    with Warehouse(tmp_path, TABLES) as wh:  # reopening changes nothing
        assert wh.reads.row_counts()["freight.parents"] == 0
    assert not (tmp_path / "warehouse.duckdb").exists()


def test_apply_writes_rows_raw_documents_audit_columns_and_cursor(wh: Warehouse) -> None:
    stats = apply(wh, [1, 2, 3], cursor='{"id": 3}')
    assert dict(stats) == {"parents": 3, "lines": 6, "marks": 3}
    assert stats.rows_written == 12
    assert wh.reads.get_cursor(CURSOR) == '{"id": 3}'
    assert wh.reads.shipment_ids() == {1, 2, 3}
    assert rows(wh, "SELECT DISTINCT _run_id FROM freight.lines") == [("run-1",)]
    assert rows(wh, "SELECT count(*) FROM freight.lines WHERE _synced_at IS NULL") == [(0,)]
    modified = wh.reads.shipment_last_modified([2, 99])
    assert list(modified) == [2] and modified[2] == dt.datetime(2026, 1, 1, 0, 0, 2, tzinfo=dt.UTC)
    assert [d.shipment_id for d in wh.reads.raw_documents([3, 1])] == [1, 3]
    assert json.loads(next(iter(wh.reads.raw_documents([1]))).document)["id"] == 1


def test_raw_records_come_in_the_order_they_were_fetched_and_go_on_after_a_position(wh: Warehouse) -> None:
    """A rebuild's reading order: by ``fetched_at`` (none recorded: first), then by id; the next page goes on
    after the last one's position, past which a shipment written again has moved."""

    def fetched(ids: list[int], minute: int | None) -> None:
        tables, raw = shipment_batch(ids)
        at = None if minute is None else T0 + dt.timedelta(minutes=minute)
        apply_shipment_batch(wh, "run-1", tables, ids, raw_documents=[d._replace(fetched_at=at) for d in raw])

    fetched([5, 9], 1)
    fetched([2, 7], 2)
    fetched([4], 3)
    fetched([8], None)
    first = wh.reads.raw_records(None, 4)
    assert [r[0] for r in first.records] == [8, 5, 9, 2]
    assert first.last == RawPosition(T0 + dt.timedelta(minutes=2), 2)
    assert json.loads(first.records[1][1])["id"] == 5 and first.records[1][2] == {}
    fetched([9], 4)
    rest = wh.reads.raw_records(first.last, 10)
    assert [r[0] for r in rest.records] == [7, 4, 9]
    assert wh.reads.raw_records(rest.last, 10) == RawBatch([], None)


def test_reapplying_the_same_batch_leaves_no_duplicates(wh: Warehouse) -> None:
    apply(wh, [1, 2])
    before = snapshot(wh, business_only=True)
    apply(wh, [1, 2])
    assert snapshot(wh, business_only=True) == before
    assert wh.reads.row_counts()["freight.lines"] == 4


def test_a_removed_child_row_disappears_and_other_units_stay(wh: Warehouse) -> None:
    apply(wh, [1, 2], lines=3, marks=2)
    apply(wh, [1], lines=1, marks=0, version=1)  # shipment 1 lost two lines and all marks
    assert count(wh, "lines", "shipment_id = 1") == 1
    assert count(wh, "marks", "shipment_id = 1") == 0
    assert rows(wh, "SELECT qty FROM freight.lines WHERE shipment_id = 1") == [(2.0,)]
    assert count(wh, "lines", "shipment_id = 2") == 3 and count(wh, "marks", "shipment_id = 2") == 2


def test_tables_not_given_are_not_replaced_unless_named(wh: Warehouse) -> None:
    apply(wh, [1], marks=2)
    tables, raw = shipment_batch([1], version=1)
    del tables["marks"]  # e.g. a table owned by another stream
    apply_shipment_batch(wh, "run-2", tables, [1], raw_documents=raw)
    assert count(wh, "marks", "shipment_id = 1") == 2
    apply_shipment_batch(wh, "run-3", tables, [1], replaced_tables=("parents", "lines", "marks"))
    assert count(wh, "marks", "shipment_id = 1") == 0


def test_deleted_shipments_vanish_from_every_table(wh: Warehouse) -> None:
    apply(wh, [1, 2, 3])
    apply_shipment_batch(wh, "run-1", {"notes": NOTES.to_arrow([{"note_id": 7, "shipment_id": 2, "text": "n"}])}, [2])
    apply_shipment_batch(wh, "run-2", {}, [], deleted_ids=[2, 42])
    for table in ("parents", "lines", "marks", "notes"):
        assert count(wh, table, "shipment_id = 2") == 0, table
    assert count(wh, "parents") == 2
    assert wh.reads.shipment_ids() == {1, 3}


def test_a_row_keyed_by_its_own_id_moves_between_units(wh: Warehouse) -> None:
    note = {"note_id": 7, "shipment_id": None, "text": "unresolved"}
    apply_shipment_batch(wh, "r", {"notes": NOTES.to_arrow([note])}, [5])  # a null key belongs to no unit
    assert rows(wh, "SELECT note_id, shipment_id FROM freight.notes") == [(7, None)]
    apply_shipment_batch(wh, "r", {"notes": NOTES.to_arrow([{**note, "shipment_id": 5}])}, [5])
    apply_shipment_batch(wh, "r", {"notes": NOTES.to_arrow([{**note, "shipment_id": 6}])}, [6])
    assert rows(wh, "SELECT note_id, shipment_id FROM freight.notes") == [(7, 6)]


def test_rows_outside_the_unit_ids_are_refused_before_writing(wh: Warehouse) -> None:
    tables, _ = shipment_batch([1, 2])
    with pytest.raises(ValueError, match="not among the unit ids"):
        apply_shipment_batch(wh, "r", tables, [1], cursor=(CURSOR, '"x"'))
    with pytest.raises(ValueError, match="not a per-shipment table"):
        apply_shipment_batch(wh, "r", {"codes": codes(1)}, [1])
    with pytest.raises(ValueError, match="both replaced and deleted"):
        apply_shipment_batch(wh, "r", tables, [1, 2], deleted_ids=[2])
    assert wh.reads.get_cursor(CURSOR) is None and count(wh, "parents") == 0


def test_a_failing_batch_changes_neither_data_nor_cursor(wh: Warehouse) -> None:
    apply(wh, [1, 2], cursor='{"id": 2}', rejects=[Reject("shipments", "9", "{}", "bad")])
    before = snapshot(wh)
    tables, raw = shipment_batch([1, 3], version=5)
    duplicated = {**tables, "marks": pa.concat_tables([tables["marks"], tables["marks"]])}  # PK conflict
    with pytest.raises(RepeatedKey, match=r"freight.marks: rows repeat the key \(shipment_id, position\)"):
        apply_shipment_batch(wh,
            "run-2",
            duplicated,
            [1, 3],
            raw_documents=raw,
            deleted_ids=[2],
            cursor=(CURSOR, '{"id": 3}'),
            rejects=[Reject("shipments", "10", "{}", "bad")],
        )
    assert snapshot(wh) == before
    assert wh.reads.get_cursor(CURSOR) == '{"id": 2}'
    apply(wh, [3], cursor='{"id": 3}')  # the connection is usable afterwards
    assert wh.reads.get_cursor(CURSOR) == '{"id": 3}'


def test_a_failure_in_the_last_step_rolls_back_everything(wh: Warehouse, monkeypatch: pytest.MonkeyPatch) -> None:
    apply(wh, [1], cursor='{"id": 1}')
    before = snapshot(wh)

    def boom(*args: object) -> None:
        raise RuntimeError("disk on fire")

    monkeypatch.setattr(Writes, "_set_cursor", staticmethod(boom))
    with pytest.raises(RuntimeError, match="disk on fire"):
        apply(wh, [1, 2], cursor='{"id": 2}', version=3)
    monkeypatch.undo()
    assert snapshot(wh) == before
    assert wh.reads.get_cursor(CURSOR) == '{"id": 1}'


def test_cursors_are_read_once_until_one_is_written_whether_its_transaction_commits_or_not(
    wh: Warehouse, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Outside a transaction every stream's cursor comes from one statement, kept until a cursor is written: by a
    batch, on its own, or in a transaction rolled back (the cursors are read again, as they were). Inside a
    transaction a read is of the moment (what the transaction wrote), kept by none."""
    statements: list[str] = []
    real_run = reads_module.run
    monkeypatch.setattr(reads_module, "run", lambda con, sql, *a: statements.append(sql) or real_run(con, sql, *a))

    def read(*streams: str) -> tuple[list[str | None], int]:
        before = len(statements)
        return [wh.reads.get_cursor(s) for s in streams], len(statements) - before

    wh.writes.set_cursor("codes", '{"n": 1}', "r")
    assert read("codes", CURSOR, "codes", "nothing") == (['{"n": 1}', None, '{"n": 1}', None], 1)
    apply(wh, [1], cursor='{"id": 1}')  # a batch's cursor
    assert read(CURSOR, "codes") == (['{"id": 1}', '{"n": 1}'], 1)
    apply_shipment_batch(wh, "r", {"lines": LINES.to_arrow([])}, [7])  # a batch that writes no cursor
    assert read(CURSOR, "codes") == (['{"id": 1}', '{"n": 1}'], 0)
    wh.writes.set_cursor("codes", '{"n": 2}', "r")  # on its own
    assert read("codes", CURSOR) == (['{"n": 2}', '{"id": 1}'], 1)

    real_set = Writes._set_cursor

    def set_then_fail(self: Writes, *args: object) -> None:
        real_set(self, *args)
        raise RuntimeError("disk on fire")

    monkeypatch.setattr(Writes, "_set_cursor", set_then_fail)
    with pytest.raises(RuntimeError, match="disk on fire"):
        apply(wh, [1, 2], cursor='{"id": 2}')
    monkeypatch.setattr(Writes, "_set_cursor", real_set)
    assert read(CURSOR, "codes") == (['{"id": 1}', '{"n": 2}'], 1)  # read again: as before the rollback

    with pytest.raises(RuntimeError, match="given up"), wh.database.transaction() as con:
        wh.writes._set_cursor(con, "codes", '{"n": 3}', "r", T0)
        assert read("codes", "codes") == (['{"n": 3}', '{"n": 3}'], 2)  # of the moment, each read
        raise RuntimeError("given up")
    assert read("codes", CURSOR, "codes") == (['{"n": 2}', '{"id": 1}', '{"n": 2}'], 1)

    wh.writes.set_cursor("codes", '{"n": 4}', "r")

    def racing(con: duckdb.DuckDBPyConnection, sql: str, *args: object) -> object:
        """The read, while another thread writes a cursor (``Writes._set_cursor`` moves the count)."""
        statements.append(sql)
        found = real_run(con, sql, *args)
        wh.database.cursor_writes += 1
        return found

    monkeypatch.setattr(reads_module, "run", racing)
    assert read("codes", "codes") == (['{"n": 4}', '{"n": 4}'], 2)  # what was read meanwhile is not kept


def test_rejects_are_upserted_and_non_json_payloads_kept_as_strings(wh: Warehouse) -> None:
    rejects = [Reject("shipments", "5", "not json", "first"), Reject("shipments", "5", '{"a": 1}', "second")]
    apply_shipment_batch(wh, "r1", {}, [], rejects=rejects)
    apply_shipment_batch(wh, "r1", {}, [], rejects=[Reject("shipments", "6", None, "404")])
    apply_shipment_batch(wh, "r2", {}, [], rejects=[Reject("shipments", "5", "oops", "third")])
    assert wh.reads.rejected_count() == 3
    assert wh.reads.rejected_count(stream="shipments", run_id="r1") == 2
    assert rows(wh, "SELECT reason, payload FROM freight_meta.rejected_records WHERE run_id = 'r2'") == [
        ("third", '"oops"')
    ]


def test_a_detail_batch_replaces_only_its_own_tables_and_sets_its_cursor(wh: Warehouse) -> None:
    apply(wh, [1, 2])
    lines = LINES.to_arrow([{"shipment_id": 1, "position": 1, "qty": 9.0}])
    apply_shipment_batch(wh, "r", {"lines": lines}, [1, 2], cursor=("events", '{"n": 1}'), stream="events")
    assert rows(wh, "SELECT shipment_id, qty FROM freight.lines ORDER BY 1") == [(1, 9.0)]
    assert count(wh, "parents") == 2 and count(wh, "marks") == 2
    assert wh.reads.get_cursor("events") == '{"n": 1}' and wh.reads.get_cursor(CURSOR) is None


def test_full_refresh_writes_nothing_when_unchanged(wh: Warehouse) -> None:
    first = wh.writes.replace_table("r1", CODES, codes(3), stream="codes")
    assert (first.changed, first.rows_written, first.rows_total) == (True, 3, 3)
    cursor = rows(wh, "SELECT cursor_value, updated_at FROM freight_meta.sync_state WHERE stream = 'codes'")
    before = rows(wh, "SELECT *, _synced_at, _run_id FROM freight.codes ORDER BY code_id")
    again = wh.writes.replace_table("r2", "codes", codes(3), stream="codes")
    assert (again.changed, again.rows_written, again.rows_deleted) == (False, 0, 0)
    assert rows(wh, "SELECT *, _synced_at, _run_id FROM freight.codes ORDER BY code_id") == before
    assert rows(wh, "SELECT cursor_value, updated_at FROM freight_meta.sync_state WHERE stream = 'codes'") == cursor


def test_full_refresh_replaces_only_what_differs(wh: Warehouse) -> None:
    wh.writes.replace_table("r1", CODES, codes(3))
    new = codes(4).to_pylist()
    new[0]["label"] = "changed"
    del new[1]  # code 2 removed; code 4 added
    outcome = wh.writes.replace_table("r2", CODES, CODES.to_arrow(new), cursor=("codes", '{"n": 3}'))
    assert (outcome.changed, outcome.rows_written, outcome.rows_deleted, outcome.rows_total) == (True, 2, 2, 3)
    assert rows(wh, "SELECT code_id, label, _run_id FROM freight.codes ORDER BY 1") == [
        (1, "changed", "r2"),
        (3, "x3", "r1"),
        (4, "x4", "r2"),
    ]
    assert wh.reads.get_cursor("codes") == '{"n": 3}'
    empty = wh.writes.replace_table("r3", CODES, codes(0))
    assert (empty.changed, empty.rows_total) == (True, 0)


def test_full_refresh_with_duplicate_keys_fails_without_writing(wh: Warehouse) -> None:
    wh.writes.replace_table("r1", CODES, codes(2))
    bad = CODES.to_arrow([*codes(2).to_pylist(), {"code_id": 1, "label": "dup", "payload": None}])
    with pytest.raises(RepeatedKey, match=r"freight.codes: rows repeat the key \(code_id\): \[\{'code_id': 1\}\]"):
        wh.writes.replace_table("r2", CODES, bad, cursor=("codes", '"x"'))
    assert rows(wh, "SELECT code_id, label FROM freight.codes ORDER BY 1") == [(1, "x1"), (2, "x2")]
    assert wh.reads.get_cursor("codes") is None


def test_schema_migration_adds_a_column_the_spec_gained(tmp_path: Path) -> None:
    with Warehouse(tmp_path, TABLES) as wh:
        apply(wh, [1])
    grown = TableSpec(
        LINES.schema, LINES.name, (*LINES.columns, Column("unit", "VARCHAR", "new")), LINES.primary_key, "grown"
    )
    with Warehouse(tmp_path, (PARENTS, grown)) as wh:
        assert rows(wh, "SELECT qty, unit FROM freight.lines ORDER BY position") == [(1.0, None), (2.0, None)]
        assert wh.ensure_schema() == []
        new = grown.to_arrow([{"shipment_id": 1, "position": 1, "qty": 3.0, "unit": "KG"}])
        apply_shipment_batch(wh, "r", {"lines": new}, [1])
        assert rows(wh, "SELECT unit FROM freight.lines") == [("KG",)]



def test_a_column_an_earlier_version_kept_not_null_takes_nulls_once_its_spec_makes_it_nullable(tmp_path: Path) -> None:
    """A release that takes a column out of a table's key (its rows keyed by a new column now): the database an
    earlier version made keeps the column NOT NULL unless the migration drops it, and every batch with a null there
    failed. A keyed meta table's key columns, which DuckDB cannot make nullable, are left as they are."""
    with Warehouse(tmp_path, TABLES) as wh:
        apply(wh, [1])
    rekeyed = TableSpec(LINES.schema, LINES.name, (LINES.columns[0], Column("line_id", "VARCHAR", nullable=False),
                                                   Column("position", "INTEGER"), LINES.columns[2]),
                        ("shipment_id", "line_id"), "rekeyed")
    state = meta.SYNC_STATE
    renamed_key = TableSpec(state.schema, state.name,
                            (Column("name", "VARCHAR", nullable=False), Column("stream", "VARCHAR"),
                             *state.columns[1:]),
                            ("name",), state.description, replace_key=None, audit=False, key_constraint=True)
    with Warehouse(tmp_path, (PARENTS, rekeyed), ensure_schema=False) as wh:
        assert "freight.lines: column position declared nullable now, made nullable" in wh.ensure_schema()
        assert wh.database.write("meta", lambda con: ensure_tables(con, (renamed_key,))) == [
            "freight_meta.sync_state: added column name VARCHAR"]
        apply_shipment_batch(wh, "r", {"lines": rekeyed.to_arrow([{"shipment_id": 2, "line_id": "a", "qty": 1.0}])},
                             [2])
        assert rows(wh, "SELECT line_id, position FROM freight.lines WHERE shipment_id = 2") == [("a", None)]
        assert rows(wh, "SELECT is_nullable FROM duckdb_columns() WHERE table_name = 'sync_state' "
                        "AND column_name = 'stream'") == [(False,)]


def test_a_column_declared_in_another_type_is_converted_keeping_its_values(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A release that widens a column (INTEGER to BIGINT: the service's numbers outgrew it) or makes it text: the
    database an earlier version made kept the old type (a warning at the first opening, then nothing), and every
    batch with a value the old type cannot hold failed. A column whose held values do not all convert is kept."""
    with Warehouse(tmp_path, TABLES) as wh:
        apply(wh, [1])
        wh.writes.replace_table("run-1", CODES, codes(2))  # labels x1, x2: no number
    wider = TableSpec(LINES.schema, LINES.name, (LINES.columns[0], Column("position", "BIGINT", nullable=False),
                                                 Column("qty", "VARCHAR")), LINES.primary_key, "wider")
    numbered = TableSpec(CODES.schema, CODES.name, (CODES.columns[0], Column("label", "BIGINT"), CODES.columns[2]),
                         CODES.primary_key, "numbered", replace_key=None)
    with Warehouse(tmp_path, (PARENTS, wider, numbered), ensure_schema=False) as wh:
        steps = wh.ensure_schema()
        assert {"freight.lines: column position retyped from INTEGER to BIGINT",
                "freight.lines: column qty retyped from DOUBLE to VARCHAR"} <= set(steps)
        assert "not altered (2 values held do not convert to it unchanged)" in caplog.text
        assert rows(wh, "SELECT position, qty FROM freight.lines ORDER BY position") == [(1, "1.0"), (2, "2.0")]
        big = wider.to_arrow([{"shipment_id": 2, "position": 3_000_000_000, "qty": "12 kg"}])
        apply_shipment_batch(wh, "r", {"lines": big}, [2])
        assert rows(wh, "SELECT position, qty FROM freight.lines WHERE shipment_id = 2") == [(3_000_000_000, "12 kg")]
        assert rows(wh, "SELECT label FROM freight.codes ORDER BY code_id") == [("x1",), ("x2",)]


def test_a_column_whose_values_the_declared_type_would_change_is_kept(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A cast that rounds (1.5 to BIGINT is 2) does not fail: converting would change the values held, silently."""
    with Warehouse(tmp_path, TABLES) as wh:
        apply_shipment_batch(wh, "r", {"lines": LINES.to_arrow([{"shipment_id": 1, "position": 1, "qty": 1.5}])}, [1])
    narrower = TableSpec(LINES.schema, LINES.name, (*LINES.columns[:2], Column("qty", "BIGINT")), LINES.primary_key,
                         "narrower")
    with Warehouse(tmp_path, (PARENTS, narrower), ensure_schema=False) as wh:
        steps = wh.ensure_schema()
        assert not any("retyped" in step for step in steps)
        assert "qty is DOUBLE in the database but BIGINT in the spec; not altered (1 values held do not convert to " \
               "it unchanged)" in caplog.text
        assert rows(wh, "SELECT qty FROM freight.lines") == [(1.5,)]


@pytest.mark.parametrize(("folder", "char"), [("runs?2026", "?"), ("a\\b", "\\")])
def test_a_data_directory_duckdb_cannot_use_is_refused_naming_it(tmp_path: Path, folder: str, char: str) -> None:
    """DuckDB reads ``?`` in a database's path as the start of options (the file is made, then every commit fails on
    a WAL named ``runs.wal?2026/...``) and ``\\`` as a folder separator (``a/b/`` is looked for): the working
    database is refused at once, naming the data directory's setting."""
    with pytest.raises(ValueError, match=rf"{re.escape(repr(char))}.*{DATA_DIR_ENV}"):
        Warehouse(tmp_path / folder, TABLES)
    assert not working_db_path(tmp_path / folder).exists()


def test_the_schema_is_ensured_once_for_each_signature_and_again_when_it_changes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An opening reads the catalog only when the database was not ensured for the schema the code declares: a new
    database, a spec that gained a column, an entry another version wrote; then the entry says this schema.
    A warehouse without keys (a lake's) is another signature."""
    real_read = store.Catalog.read
    reads: list[int] = []
    monkeypatch.setattr(store.Catalog, "read", lambda con: reads.append(1) or real_read(con))
    grown = TableSpec(LINES.schema, LINES.name, (*LINES.columns, Column("unit", "VARCHAR", "new")), LINES.primary_key,
                      "grown")
    for tables, ensures in ((TABLES, 1), (TABLES, 0), (TABLES, 0), ((PARENTS, grown), 1), ((PARENTS, grown), 0)):
        before = len(reads)
        with Warehouse(tmp_path, tables) as wh:
            assert len(reads) - before == ensures, tables
            signature = schema_signature((*tables, *meta.META_TABLES), True, True)
            assert wh.reads.get_cursor(SCHEMA_STATE) == signature
    with Warehouse(tmp_path, (PARENTS, grown)) as wh:
        assert rows(wh, "SELECT unit FROM freight.lines") == []  # the grown column is there
        wh.writes.set_cursor(SCHEMA_STATE, '{"schema": "an older version"}', "older")
    before = len(reads)
    with Warehouse(tmp_path, (PARENTS, grown)) as wh:
        assert len(reads) - before == 1 and wh.reads.get_cursor(SCHEMA_STATE) == signature
    assert schema_signature((*TABLES, *meta.META_TABLES), False, False) != schema_signature(
        (*TABLES, *meta.META_TABLES), True, True)
    assert json.loads(signature)["duckdb"] == duckdb.__version__


TABLES_OF_GENERATION = {1: "3e36aca2917c333206be"}
"""Each :data:`~freight_pipeline.warehouse.store.SCHEMA_GENERATION`'s tables, as the signature's ``schema`` digest
says them (the embedded warehouse's: ``freight`` and ``freight_meta``, the history, its macros)."""


def test_the_tables_generation_is_raised_with_each_change_of_the_tables(tmp_path: Path) -> None:
    """A release whose tables differ from the generation it says is one whose data directories an older release
    would not refuse (:func:`~freight_pipeline.warehouse.store.refuse_newer`). Changed the tables? Raise
    ``SCHEMA_GENERATION`` and add its digest here."""
    with open_warehouse(tmp_path, EmbeddedDuckDB()) as wh:
        held = json.loads(wh.reads.get_cursor(SCHEMA_STATE) or "{}")
    assert held["generation"] == store.SCHEMA_GENERATION
    assert TABLES_OF_GENERATION.get(held["generation"]) == held["schema"], (
        f"the tables are not generation {store.SCHEMA_GENERATION}'s: raise SCHEMA_GENERATION, record {held['schema']}")


def test_a_working_database_a_newer_generation_ensured_is_refused_and_left_as_it_is(tmp_path: Path) -> None:
    """A data directory a later release wrote (a column of its own, NOT NULL): an older release dropped the
    constraint, wrote NULL into the column for every shipment it rewrote and its own signature over the newer one,
    and said nothing. Now it refuses before it writes anything; a signature without a generation (the releases
    before them) is ensured as before."""
    with open_warehouse(tmp_path, EmbeddedDuckDB()) as wh:
        wh.con.execute("ALTER TABLE freight.shipments ADD COLUMN place_of_delivery VARCHAR DEFAULT 'x' NOT NULL")
        newer = json.dumps({**json.loads(wh.reads.get_cursor(SCHEMA_STATE) or "{}"),
                            "generation": store.SCHEMA_GENERATION + 1, "schema": "a later one"})
        wh.writes.set_cursor(SCHEMA_STATE, newer, "newer")
    with pytest.raises(store.NewerWarehouse, match=rf"^{re.escape(str(tmp_path))} was written by a newer release .*"
                       rf"generation {store.SCHEMA_GENERATION + 1}, this release's {store.SCHEMA_GENERATION}\)"):
        open_warehouse(tmp_path, EmbeddedDuckDB())
    with pytest.raises(store.NewerWarehouse):  # an opening that ensures nothing writes nothing either (alerts)
        Warehouse(tmp_path, FREIGHT_TABLES, ensure_schema=False)
    with duckdb.connect(str(working_db_path(tmp_path)), read_only=True) as con:
        assert con.execute("SELECT is_nullable FROM information_schema.columns WHERE table_schema = 'freight' AND "
                           "table_name = 'shipments' AND column_name = 'place_of_delivery'").fetchall() == [("NO",)]
        assert con.execute("SELECT cursor_value FROM freight_meta.sync_state WHERE stream = ?",
                           [SCHEMA_STATE]).fetchall() == [(newer,)]
    with duckdb.connect(str(working_db_path(tmp_path))) as con:  # a release before generations wrote it
        con.execute("UPDATE freight_meta.sync_state SET cursor_value = '{\"schema\": \"older\"}' WHERE stream = ?",
                    [SCHEMA_STATE])
    with open_warehouse(tmp_path, EmbeddedDuckDB()) as wh:
        assert json.loads(wh.reads.get_cursor(SCHEMA_STATE) or "{}")["generation"] == store.SCHEMA_GENERATION


def test_a_column_keeps_the_storage_compression_its_spec_names_in_a_duckdb_file(tmp_path: Path) -> None:
    """``Column.compression`` (``freight_meta.raw_parts.answer``: zlib's bytes, stored as they are); a DuckLake's
    tables are made without it (``storage_hints=False``)."""
    blobs = TableSpec("freight", "blobs", (Column("shipment_id", "BIGINT"), Column("answer", "BLOB", "zlib",
                                           compression="uncompressed")), ("shipment_id",), "blobs")
    assert "USING COMPRESSION" not in blobs.ddl(storage_hints=False)
    with Warehouse(tmp_path, (blobs,)) as wh:
        rows_in = [{"shipment_id": n, "answer": zlib.compress(b"x" * 200 + bytes([n % 251]))} for n in range(3000)]
        wh.con.register("new_rows", blobs.to_arrow(rows_in))
        wh.con.execute("INSERT INTO freight.blobs BY NAME SELECT *, now() AS _synced_at, 'r' AS _run_id FROM new_rows")
        wh.con.execute("CHECKPOINT")
        stored = {compression for column, compression in wh.con.execute(
            "SELECT column_name, compression FROM pragma_storage_info('freight.blobs') WHERE segment_type = 'BLOB'"
        ).fetchall() if column == "answer"}
        (parts,) = wh.con.execute("SELECT sql FROM duckdb_tables() WHERE schema_name = 'freight_meta' "
                                  f"AND table_name = '{RAW_PARTS.name}'").fetchone() or ("",)
    assert stored == {"Uncompressed"}
    assert "answer BLOB USING COMPRESSION Uncompressed" in parts


def test_two_writers_of_one_data_directory_record_runs_between_each_other(
    wh: Warehouse, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A lake's writers (backfill partitions, a process each) keep one run log in their data directory: its
    temporary file had one name for all, so a writer that replaced it while another was writing made the other's
    rename fail (FileNotFoundError: the run's start or finish not recorded). Each writes a file of its own now."""
    with Warehouse(tmp_path / "other", TABLES) as other:
        beside = RunLog(other.database, tmp_path)  # the other writer, recording in the same data directory
        real_replace = paths_module.os.replace  # the run log's writer (paths.replace_json)
        between: list[int] = []

        def replace_after_the_other(source: str, target: str) -> None:
            if not between:  # the other writer writes and renames the run log meanwhile
                between.append(1)
                beside.record_run(RunRecord("b1", "shipments@2", T0))
            real_replace(source, target)

        monkeypatch.setattr(paths_module.os, "replace", replace_after_the_other)
        wh.run_log.record_run(RunRecord("a1", "shipments@1", T0))
    assert between and [row["run_id"] for row in read_run_log(tmp_path)] == ["a1"]
    assert sorted(p.name for p in run_log_path(tmp_path).parent.iterdir() if p.name.endswith(".tmp")) == []


def test_record_run_inserts_then_updates(wh: Warehouse) -> None:
    """A start inserts the row, a finish updates it (twice: still one row); a finish whose start was never
    recorded inserts its own."""
    run = RunRecord("run-9", "shipments", dt.datetime.now(dt.UTC), cursor_before=None)
    wh.run_log.record_run(run)
    run.status, run.finished_at, run.rows_written, run.extra = "success", dt.datetime.now(dt.UTC), 12, {"a": 1}
    wh.run_log.record_run(run)
    (saved,) = wh.reads.runs("run-9")
    assert saved["status"] == "success" and saved["rows_written"] == 12
    assert json.loads(saved["details"])["extra"] == {"a": 1}
    run.status, run.error, run.rows_written = "failed", "boom", 13
    wh.run_log.record_run(run)
    (again,) = wh.reads.runs("run-9")
    assert (again["status"], again["error"], again["rows_written"]) == ("failed", "boom", 13)
    alone = RunRecord("run-10", "documents", dt.datetime.now(dt.UTC), cursor_before='"7"')
    alone.status, alone.finished_at, alone.cursor_after = "success", dt.datetime.now(dt.UTC), '"8"'
    wh.run_log.record_run(alone)
    (saved_alone,) = wh.reads.runs("run-10")
    assert (saved_alone["status"], saved_alone["cursor_before"], saved_alone["cursor_after"]) == ("success", '"7"',
                                                                                                  '"8"')


def test_the_latest_run_is_the_one_recorded_last_whatever_the_clock_said(wh: Warehouse, tmp_path: Path) -> None:
    """The machine's clock was two hours ahead during a run that succeeded, then stepped back (NTP, a VM restored):
    the next run starts at an earlier ``started_at`` and fails. It is the stream's latest run, in the run log file
    (what ``status`` compares with the publish) and in every read of the latest runs; the clock had made the older
    success the latest, the failure shown nowhere."""
    ahead = RunRecord("run-ahead", "shipments", T0 + dt.timedelta(hours=2))
    wh.run_log.record_run(ahead)
    ahead.status, ahead.finished_at = "success", T0 + dt.timedelta(hours=2, minutes=5)
    wh.run_log.record_run(ahead)
    other = RunRecord("run-other", "documents", T0 + dt.timedelta(hours=3))  # another stream, later still
    wh.run_log.record_run(other)
    after = RunRecord("run-after-the-step", "shipments", T0)
    wh.run_log.record_run(after)
    after.status, after.finished_at, after.error = "failed", T0 + dt.timedelta(minutes=1), "boom"
    wh.run_log.record_run(after)
    ahead.extra = {"late": 1}  # a record of the older run again (its finish written twice) moves nothing
    wh.run_log.record_run(ahead)
    logged = {row["stream"]: (row["run_id"], row["status"]) for row in read_run_log(tmp_path)}
    assert logged == {"shipments": ("run-after-the-step", "failed"), "documents": ("run-other", "running")}
    latest = rows(wh, f"SELECT stream, run_id FROM {meta.latest_runs('freight_meta.sync_runs')} "
                      "ORDER BY stream")
    assert latest == [("documents", "run-other"), ("shipments", "run-after-the-step")]


def _runs_across_a_clock_step(wh: Warehouse, stream: str, ahead: str, after: str,
                              extra: tuple[dict[str, object], dict[str, object]] = ({}, {})) -> None:
    """Two finished runs of ``stream``: ``ahead`` (status) while the clock was two hours ahead, then ``after``
    (status) dated earlier, the clock stepped back (NTP, a VM restored); another stream's run between them."""
    for run_id, started, status, said in (("run-ahead", T0 + dt.timedelta(hours=2), ahead, extra[0]),
                                          ("run-after-the-step", T0, after, extra[1])):
        run = RunRecord(run_id, stream, started, extra=said)
        wh.run_log.record_run(run)
        run.status, run.finished_at = status, started + dt.timedelta(minutes=5)
        wh.run_log.record_run(run)
        wh.run_log.record_run(RunRecord(run_id, "documents", started, started, "success"))


def test_the_last_run_status_is_that_of_the_run_recorded_last_whatever_the_clock_said(wh: Warehouse) -> None:
    """The dbt build succeeded while the clock was ahead; after the step back it failed. The next run asks whether
    the last build succeeded before it skips a build with nothing changed (``marts.plan``): it was told success,
    and the marts stayed as the failed build left them."""
    _runs_across_a_clock_step(wh, meta.BUILD_STREAM, "success", "failed")
    assert wh.reads.last_run_status(meta.BUILD_STREAM) == "failed"


def test_the_notice_kinds_of_the_last_success_are_those_of_the_success_recorded_last(wh: Warehouse) -> None:
    """The kinds of notice the stream's latest success said, read by the next run (whether it met naive date-times
    before): after a clock stepped back, those of an older success."""
    said = ({meta.NOTICE_KINDS: ["older"]}, {meta.NOTICE_KINDS: ["latest"]})
    _runs_across_a_clock_step(wh, "shipments", "success", "success", said)
    assert wh.reads.last_success_notice_kinds("shipments") == ["latest"]


def test_the_runs_are_read_in_the_order_they_were_recorded_whatever_the_clock_said(wh: Warehouse) -> None:
    _runs_across_a_clock_step(wh, "shipments", "success", "failed")
    assert [(r["run_id"], r["stream"]) for r in wh.reads.runs()] == [
        ("run-ahead", "shipments"), ("run-ahead", "documents"),
        ("run-after-the-step", "shipments"), ("run-after-the-step", "documents")]


@pytest.mark.skipif(importlib.util.find_spec("duckdb_extension_ducklake") is None,
                    reason="lake mode: the lake environment (.venv-lake)")
def test_a_lake_s_cursor_is_the_one_written_last_whatever_the_clock_said(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A lake appends a ``sync_state`` row per cursor written (``Writes._set_cursor``). Written while the clock was
    two hours ahead, then again after it stepped back: the cursor read back was the older one (a run went on from
    where it had been before) and an entry cleared came back (the history said behind)."""
    lake = LakeSettings.configured({LAKE_CATALOG_URI_ENV: f"sqlite:///{tmp_path}/catalog.sqlite",
                                    LAKE_DATA_URI_ENV: str(tmp_path / "lake")})
    clock = [T0 + dt.timedelta(hours=2)]
    monkeypatch.setattr(writes_module, "_now", lambda: clock[0])
    with Warehouse(tmp_path / "data", TABLES, backend=LakeBackend(lake)) as lake_wh:
        lake_wh.writes.set_cursor(CURSOR, '{"id": 100}', "run-ahead")
        lake_wh.writes.set_cursor(BEHIND_STATE, '{"since": "2026-03-29"}', "run-ahead")
        clock[0] = T0
        lake_wh.writes.set_cursor(CURSOR, '{"id": 200}', "run-after-the-step")
        lake_wh.writes.set_cursor(BEHIND_STATE, None, "run-after-the-step")
        assert lake_wh.reads.get_cursor(CURSOR) == '{"id": 200}'
        assert lake_wh.reads.cursors_with_prefix(BEHIND_STATE) == {}


def test_a_run_of_a_stream_switched_off_is_logged_switched_off_not_as_a_success(wh: Warehouse, tmp_path: Path) -> None:
    """A stream switched off (FREIGHT_SYNC_DOCUMENTS=0) runs as a success that reads and writes nothing: the run log
    file, which ``status`` and the dashboard show before and after a publish, must not call it a success."""
    off = RunRecord("run-off", "documents", T0, T0, "success", extra={"skipped": "the documents stream is off"})
    wh.run_log.record_run(off)
    assert [(row["stream"], row["status"]) for row in read_run_log(tmp_path)] == [("documents", "switched off")]
    loaded = RunRecord("run-on", "documents", T0, T0, "success", extra={"changed": 3})
    wh.run_log.record_run(loaded)
    assert [(row["stream"], row["status"]) for row in read_run_log(tmp_path)] == [("documents", "success")]


def test_table_freshness_moves_with_a_success_alone_and_every_other_record_keeps_it(wh: Warehouse) -> None:
    tables = ["shipments", "shipment_events"]

    def record(status: str, at: dt.datetime, **extra: object) -> list[tuple[object, ...]]:
        run = RunRecord(f"run-{at:%H%M}", "shipments", at, cursor_before=None)
        run.status, run.finished_at, run.extra = status, at, dict(extra)
        run.error = None if status in ("running", "success") else "boom"
        wh.run_log.record_run(run, tables)
        return wh.con.execute("SELECT table_name, synced_through, last_status, last_error FROM "
                              "freight_meta.table_freshness ORDER BY table_name").fetchall()

    first, then = dt.datetime(2026, 3, 1, 10, tzinfo=dt.UTC), dt.datetime(2026, 3, 1, 11, tzinfo=dt.UTC)
    assert record("running", first) == [(t, None, "running", None) for t in sorted(tables)]
    assert record("success", first) == [(t, first, "success", None) for t in sorted(tables)]
    for status, extra in (("running", {}), ("failed", {}), ("success", {"skipped": True})):
        kept = record(status, then, **extra)
        shown = "switched off" if extra else status
        assert kept == [(t, first, shown, "boom" if status == "failed" else None) for t in sorted(tables)], status
    assert [row[1] for row in record("success", then)] == [then, then]

    # a stream that writes one table more: that table's row is made, the others keep theirs
    tables.append("shipment_legs")
    assert record("running", then) == [(t, None if t == "shipment_legs" else then, "running", None)
                                       for t in sorted(tables)]
    # a table's row twice (a lake has no key: two writers' first records beside each other): one row again
    kept = "CREATE TABLE freight_meta.kept AS SELECT * FROM freight_meta.table_freshness"
    for statement in (kept, "DROP TABLE freight_meta.table_freshness",
                      "ALTER TABLE freight_meta.kept RENAME TO table_freshness",
                      "INSERT INTO freight_meta.table_freshness SELECT * FROM freight_meta.table_freshness "
                      "WHERE table_name = 'shipments'"):
        wh.con.execute(statement)
    for status in ("running", "success"):
        once = record(status, then)
        assert [row[0] for row in once] == sorted(tables) and {row[2] for row in once} == {status}, status


def test_large_unit_lists_are_handled(wh: Warehouse) -> None:
    ids = list(range(1, 20_001))
    stats = apply(wh, ids, lines=1, marks=0)
    assert stats["lines"] == 20_000
    again = apply(wh, ids, lines=1, marks=0, version=1)
    assert again.deleted["lines"] == 20_000 and count(wh, "lines") == 20_000


def test_raw_document_types(wh: Warehouse) -> None:
    now = dt.datetime(2026, 5, 1, 12, tzinfo=dt.timezone(dt.timedelta(hours=2)))
    apply_shipment_batch(wh, "r", {}, [], raw_documents=[(8, '{"id": 8}', now, now)])
    assert wh.reads.shipment_last_modified(None) == {8: dt.datetime(2026, 5, 1, 10, tzinfo=dt.UTC)}
    assert next(iter(wh.reads.raw_documents())) == RawDocument(8, '{"id": 8}', now, now)


def test_real_freight_tables(tmp_path: Path) -> None:
    stream_tables = SHIPMENT_DOCUMENT_TABLES
    with Warehouse(tmp_path, FREIGHT_TABLES) as wh:
        docs = [samples.shipment(i) for i in (1, 2)]
        rows_by_table: dict[str, list] = {}
        for doc in docs:
            for table, table_rows in normalize_shipment(doc).items():
                rows_by_table.setdefault(table, []).extend(table_rows)
        tables = to_arrow_batch(rows_by_table)
        assert set(tables) == set(stream_tables)
        first = apply_shipment_batch(wh, "r", tables, [1, 2], cursor=("shipments", '"c"'))
        assert first["shipments"] == 2 and first.rows_written > 2
        again = apply_shipment_batch(wh, "r", tables, [1, 2])
        assert dict(again) == dict(first)
        counts = wh.reads.row_counts()
        assert counts["freight.shipments"] == 2
        assert all(counts[f"freight.{t}"] == n for t, n in first.items())
        apply_shipment_batch(wh, "r", {}, [], deleted_ids=[1])
        assert all(
            wh.con.execute(f"SELECT count(*) FROM {s.qualified_name} WHERE shipment_id = 1").fetchall() == [(0,)]
            for s in wh.database.unit_tables
        )


def test_connections_have_a_bounded_memory_limit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(DUCKDB_MEMORY_LIMIT_ENV, raising=False)
    with Warehouse(tmp_path, TABLES, backend=storage_from_env()) as wh:
        limit, ordered = wh.con.execute(
            "SELECT current_setting('memory_limit'), current_setting('preserve_insertion_order')"
        ).fetchall()[0]
    assert (limit, ordered) == ("122.0 MiB", False)  # DEFAULT_DUCKDB_MEMORY_LIMIT = 128MB, not 80 % of the RAM
    publishing = connect(tmp_path / "other.duckdb", StorageSettings.configured(), "publish")
    assert publishing.execute("SELECT current_setting('memory_limit')").fetchall() == [("488.2 MiB",)]  # 512MB
    publishing.close()
    monkeypatch.setenv(DUCKDB_MEMORY_LIMIT_ENV, "64MB")
    with Warehouse(tmp_path, TABLES, backend=storage_from_env()) as wh:
        assert wh.con.execute("SELECT current_setting('memory_limit')").fetchall() == [("61.0 MiB",)]
    monkeypatch.setenv(DUCKDB_MEMORY_LIMIT_ENV, "lots")
    with pytest.raises(ValueError, match=f"{DUCKDB_MEMORY_LIMIT_ENV}='lots': is not a memory size DuckDB reads"):
        Warehouse(tmp_path, TABLES, backend=storage_from_env())


def test_a_shipment_read_again_with_the_same_content_is_not_written_again(wh: Warehouse) -> None:
    def write(version: int, content: str, run_id: str) -> None:
        tables, raw = shipment_batch([1, 2], version=version)
        hashed = [doc._replace(content_hash=f"{content}{doc.shipment_id}", fetched_ceiling=run_id) for doc in raw]
        wh.writes.apply_batch(run_id, BatchWrite(tables=tables, replaced={t: [1, 2] for t in tables},
                                          loaded={"shipments": [1, 2]}, raw_documents=hashed))

    write(0, "a", "r1")
    wh.con.execute("DELETE FROM freight_meta.changed_shipments")  # a dbt build covered them
    written = rows(wh, "SELECT shipment_id, name, _synced_at, _run_id FROM freight.parents ORDER BY 1")
    write(0, "a", "r2")  # the same content again: the rows stay as written, the marts have nothing to do
    assert rows(wh, "SELECT shipment_id, name, _synced_at, _run_id FROM freight.parents ORDER BY 1") == written
    assert wh.reads.pending_changes() == 0
    assert rows(wh, "SELECT fetched_ceiling FROM freight_meta.raw_shipments") == [("r2",), ("r2",)]  # what was read
    write(1, "b", "r3")  # new content: rewritten, and a change for the marts
    assert rows(wh, "SELECT name, _run_id FROM freight.parents ORDER BY 1") == [("S1 v1", "r3"), ("S2 v1", "r3")]
    assert wh.reads.pending_changes() == 2


def test_a_document_read_again_exactly_as_held_keeps_its_raw_row_and_any_other_difference_rewrites_it(
    wh: Warehouse,
) -> None:
    """The walk reads again, every run, the shipments stamped in its ceiling's second: when what came back is what is
    held (content, stamps, ceiling), the raw row is left as it is (so the publish links the table's file); a change
    in any other column of the raw document, each in turn, writes it again."""
    tables, raw = shipment_batch([1])
    held = raw[0]._replace(content_hash="a1", last_modified_key="2026-03-01 10:00:01", fetched_ceiling="2026-03-01 "
                           "10:00:01")

    def read(run_id: str, doc: RawDocument) -> list[tuple]:
        wh.writes.apply_batch(run_id, BatchWrite(tables=tables, replaced={t: [1] for t in tables},
                                                 loaded={"shipments": [1]}, raw_documents=[doc]))
        return rows(wh, "SELECT run_id, fetched_at FROM freight_meta.raw_shipments")

    later = held.fetched_at + dt.timedelta(minutes=10)
    assert read("r1", held) == [("r1", held.fetched_at)]
    assert read("r2", held._replace(fetched_at=later)) == [("r1", held.fetched_at)]  # the same read: untouched
    changes = {"document": '{"id": 1, "name": "S1", "note": "new"}', "last_modified_at": held.last_modified_at
               + dt.timedelta(hours=1), "last_modified_key": "2026-03-01 10:00:01+01:00", "fetched_ceiling":
               "2026-03-01 10:00:02", "content_hash": "b1"}
    compared = [c.name for c in meta.RAW_SHIPMENTS.columns if c.name not in (*meta.RAW_SHIPMENTS.primary_key,
                                                                           *meta.RAW_READ_INSTANT)]
    assert sorted(changes) == sorted(compared)  # every column of the raw document is tried
    for n, (column, value) in enumerate(changes.items()):
        doc = held._replace(fetched_at=later + dt.timedelta(minutes=n), **{column: value})
        assert read(f"changed-{column}", doc) == [(f"changed-{column}", doc.fetched_at)], column
        read(f"back-{column}", held._replace(fetched_at=later))  # held as at first again


def test_a_shipment_read_again_unchanged_keeps_its_data_problems_as_loaded_and_leaves_the_retry_queue(
    wh: Warehouse,
) -> None:
    """Its rows stay as they were loaded, and so do the problems found in them (their run and instant); a new
    content replaces both; an entry of the retry queue goes whenever the record loaded."""
    tables, raw = shipment_batch([1])

    def read(run_id: str, content: str, reason: str) -> list[tuple]:
        doc = raw[0]._replace(content_hash=content, fetched_ceiling=run_id)
        problem = DataProblem("shipments", "1", 1, "weight", '"12a"', reason)
        wh.writes.apply_batch(run_id, BatchWrite(tables=tables, replaced={t: [1] for t in tables},
                                                 loaded={"shipments": [1]}, raw_documents=[doc], problems=[problem]))
        return rows(wh, "SELECT run_id, reason FROM freight_meta.data_problems")

    assert read("r1", "a1", "not a number") == [("r1", "not a number")]
    wh.writes.apply_batch("r2", BatchWrite(quarantined=[Quarantined("shipments", "1", 1, "refused")]))
    assert read("r3", "a1", "not a number") == [("r1", "not a number")]  # unchanged: as loaded by r1
    assert rows(wh, "SELECT count(*) FROM freight_meta.quarantine") == [(0,)]  # it loaded: out of the queue
    assert read("r4", "b1", "not a number either") == [("r4", "not a number either")]


def test_a_part_read_again_as_held_keeps_its_data_problems_as_loaded(wh: Warehouse) -> None:
    """A part re-read to compare (``compare=True``: the events sample, ``sync.freshness``) whose answer is the one
    held, byte for byte, and whose shipment's rows all stay, keeps its data problems as loaded (their run and
    instant), as its rows keep theirs; another answer (even with the same rows: another value that cannot be
    read), rows that differ, or a batch of the walk (which writes the record again) replaces them."""
    apply(wh, [1])

    def read(run_id: str, answer: bytes, reason: str, *, version: int = 0, compare: bool = True) -> list[tuple]:
        lines = shipment_batch([1], version=version)[0]["lines"]
        part = RawPart("shipment_events", 1, zlib.compress(answer), len(answer), T0)
        problem = DataProblem("shipment_events", "1", 1, "[0].qty", '"12a"', reason)
        wh.writes.apply_batch(run_id, BatchWrite(tables={"lines": lines}, replaced={"lines": [1]},
                                                 loaded={"shipment_events": [1]}, raw_parts=[part],
                                                 problems=[problem]), compare=compare)
        return rows(wh, "SELECT run_id, reason FROM freight_meta.data_problems")

    assert read("r1", b'[{"qty": "12a"}]', "not a number") == [("r1", "not a number")]  # no answer held yet
    assert read("r2", b'[{"qty": "12a"}]', "not a number") == [("r1", "not a number")]  # as held: as loaded
    assert rows(wh, "SELECT DISTINCT _run_id FROM freight.lines") == [("run-1",)]
    assert read("r3", b'[{"qty": "12b"}]', "not a number either") == [("r3", "not a number either")]
    assert read("r4", b'[{"qty": "12b"}]', "rows differ", version=1) == [("r4", "rows differ")]
    assert read("r5", b'[{"qty": "12b"}]', "the walk", version=1, compare=False) == [("r5", "the walk")]


def test_the_retry_queue_is_counted_per_stream_in_one_read(wh: Warehouse) -> None:
    """``Reads.quarantine_counts``: the records waiting, per stream; a stream with none is absent."""
    assert wh.reads.quarantine_counts() == {}
    wh.writes.apply_batch("r1", BatchWrite(quarantined=[Quarantined("shipments", "1", 1, "refused"),
                                                        Quarantined("shipments", "2", 2, "refused"),
                                                        Quarantined("shipment_events", "2", 2, "truncated")]))
    assert wh.reads.quarantine_counts() == {"shipments": 2, "shipment_events": 1}
    tables, raw = shipment_batch([1, 2])
    wh.writes.apply_batch("r2", BatchWrite(tables=tables, replaced={t: [1, 2] for t in tables},
                                           loaded={"shipments": [1, 2]}, raw_documents=raw))
    assert wh.reads.quarantine_counts() == {"shipment_events": 1}  # loaded: out of the queue, the others stay


def test_the_due_retries_of_several_streams_are_read_at_once_stream_by_stream_oldest_first(wh: Warehouse) -> None:
    """``Reads.due_retries``: the streams in the order asked, each one's oldest failure first, with the context a
    retry needs; not an entry that failed in the run asking, nor one whose next attempt is not due yet."""

    def failed(stream: str, shipment_id: int) -> Quarantined:
        return Quarantined(stream, str(shipment_id), shipment_id, "refused", context=json.dumps({"n": shipment_id}))

    wh.writes.apply_batch("r1", BatchWrite(quarantined=[failed("shipment_events", 3), failed("shipments", 2)]))
    wh.writes.apply_batch("r2", BatchWrite(quarantined=[failed("shipments", 1), failed("shipment_memos", 4)]))
    later = dt.datetime.now(dt.UTC) + dt.timedelta(days=2)
    due = wh.reads.due_retries(["shipments", "shipment_events"], "r3", later)
    assert [(d.stream, d.shipment_id) for d in due] == [("shipments", 2), ("shipments", 1), ("shipment_events", 3)]
    assert [json.loads(d.context or "null") for d in due] == [{"n": 2}, {"n": 1}, {"n": 3}]
    assert [d.shipment_id for d in wh.reads.due_retries(["shipment_events", "shipments"], "r2", later)] == [3, 2]
    assert wh.reads.due_retries(["shipments", "shipment_memos"], "r3") == []  # the first waits ten minutes


def test_a_rebuild_batch_is_written_with_the_content_held_and_keeps_the_retry_queue(wh: Warehouse) -> None:
    """A rebuild re-derives what was read with a changed mapping: the same raw (the same content hash) is no
    reason to keep the old rows, and a record waiting in the retry queue was not read again."""
    tables, raw = shipment_batch([1, 2])
    hashed = [doc._replace(content_hash=f"a{doc.shipment_id}") for doc in raw]
    wh.writes.apply_batch("r1", BatchWrite(tables=tables, replaced={t: [1, 2] for t in tables},
                                           loaded={"shipments": [1, 2]}, raw_documents=hashed))
    wh.writes.apply_batch("r2", BatchWrite(quarantined=[Quarantined("shipments", "1", 1, "refused")]))
    mapped, _ = shipment_batch([1, 2], version=1)  # the same raw, mapped anew
    wh.writes.apply_batch("rebuild", BatchWrite(tables=mapped, replaced={t: [1, 2] for t in mapped},
                                                loaded={"shipments": [1, 2]}, raw_documents=hashed), rebuild=True)
    assert rows(wh, "SELECT name, _run_id FROM freight.parents ORDER BY 1") == [("S1 v1", "rebuild"),
                                                                                ("S2 v1", "rebuild")]
    assert rows(wh, "SELECT stream, record_key FROM freight_meta.quarantine") == [("shipments", "1")]
    wh.writes.apply_batch("r3", BatchWrite(tables=mapped, replaced={t: [1, 2] for t in mapped},
                                           loaded={"shipments": [1, 2]}))
    assert rows(wh, "SELECT count(*) FROM freight_meta.quarantine") == [(0,)]  # a sync's load clears it


def test_a_table_an_earlier_version_made_with_a_primary_key_is_rebuilt_without_it(tmp_path: Path) -> None:
    path = working_db_path(tmp_path)
    path.parent.mkdir(parents=True)
    with duckdb.connect(str(path)) as con:  # as versions before the keys' indexes were dropped made them
        con.execute("CREATE SCHEMA freight")
        con.execute("CREATE TABLE freight.lines (shipment_id BIGINT NOT NULL, position INTEGER NOT NULL, qty DOUBLE, "
                    "old_note VARCHAR, _synced_at TIMESTAMPTZ NOT NULL, _run_id VARCHAR NOT NULL, "
                    "PRIMARY KEY (shipment_id, position))")
        con.execute("INSERT INTO freight.lines VALUES (1, 1, 2.5, 'kept', now(), 'old')")
    with Warehouse(tmp_path, TABLES) as wh:
        assert rows(wh, "SELECT count(*) FROM duckdb_constraints() WHERE table_name = 'lines' "
                        "AND constraint_type = 'PRIMARY KEY'") == [(0,)]
        assert rows(wh, "SELECT shipment_id, position, qty, old_note, _run_id FROM freight.lines") == [
            (1, 1, 2.5, "kept", "old")]
        apply(wh, [1])  # and it takes the next batch as usual
        assert count(wh, "lines", "shipment_id = 1") == 2


def _a_value(column_type: str) -> str:
    """A literal of ``column_type`` (any value: the row only has to be there)."""
    text = "2026-01-01" if column_type in ("DATE", "TIMESTAMPTZ") else "1"
    return f"CAST('{text}' AS {column_type})"


def test_the_append_check_finds_a_row_of_a_shipment_in_each_table_it_names(tmp_path: Path) -> None:
    """``Reads.holds_shipment_rows``, which lets a first sync append (``BatchWrite.fresh_ids``): one row of a
    shipment in any table it names (each the shipments stream writes, the raw documents and parts, the data
    problems, the retry queue) is found, inside a backfill partition's range and not outside it; a row of no
    shipment (a code conversion's problem or retry entry) is not. ``Reads.holds_shipments`` (a first walk lists
    everything) finds a raw document or a shipment's retry entry, nothing else."""
    with Warehouse(tmp_path, FREIGHT_TABLES) as wh:
        assert set(PART_TABLES) <= {spec.name for spec in wh.database.unit_tables}
        named = [wh.database.spec(name) for name in PART_TABLES]
        assert not wh.reads.holds_shipment_rows(PART_TABLES) and not wh.reads.holds_shipments()
        for spec in (*named, meta.RAW_SHIPMENTS, meta.RAW_PARTS, meta.DATA_PROBLEMS, meta.QUARANTINE):
            for shipment_id in ("1", "NULL"):
                if shipment_id == "NULL" and spec not in (meta.DATA_PROBLEMS, meta.QUARANTINE):
                    continue
                values = [f"{shipment_id} AS shipment_id"]
                values += [f"{_a_value(c.type)} AS {quote(c.name)}" for c in spec.all_columns
                           if c.name != "shipment_id" and (not c.nullable or c.name in spec.primary_key)]
                wh.con.execute(f"INSERT INTO {spec.qualified_name} BY NAME SELECT {', '.join(values)}")
                held = shipment_id == "1"
                assert wh.reads.holds_shipment_rows(PART_TABLES) is held, (spec.name, shipment_id)
                assert wh.reads.holds_shipment_rows(PART_TABLES, (1, 2)) is held, (spec.name, shipment_id)
                assert wh.reads.holds_shipment_rows(PART_TABLES, (1, None)) is held, (spec.name, shipment_id)
                assert not wh.reads.holds_shipment_rows(PART_TABLES, (2, None)), spec.name
                assert not wh.reads.holds_shipment_rows(PART_TABLES, (0, 1)), spec.name
                assert wh.reads.holds_shipments() is (held and spec in (meta.RAW_SHIPMENTS, meta.QUARANTINE)), spec.name
                wh.con.execute(f"DELETE FROM {spec.qualified_name}")
        assert not wh.reads.holds_shipment_rows(PART_TABLES)


def test_one_memo_id_answered_for_two_shipments_keeps_a_row_and_reports_the_other(tmp_path: Path) -> None:
    """A memo id the service answered for two shipments (in one batch, or in two of one run): the batch is not
    refused (every other shipment of it loads), one line is loaded and the other is a data problem of its shipment."""
    def memos(shipment_id: int, memo_id: int, text: str) -> pa.Table:
        line = {"id": memo_id, "client": "C", "shipment_number": f"N{shipment_id}", "memo": text}
        rows = normalize_memos([line], {("C", f"N{shipment_id}"): shipment_id}, Problems())["shipment_memos"]
        return to_arrow_batch({"shipment_memos": rows})["shipment_memos"]

    with Warehouse(tmp_path, FREIGHT_TABLES) as wh:
        both = pa.concat_tables([memos(1, 7, "first"), memos(2, 7, "second"), memos(3, 8, "other")])
        apply_shipment_batch(wh, "run-1", {"shipment_memos": both}, [1, 2, 3], stream="shipment_memos")
        assert rows(wh, "SELECT memo_id, shipment_id, memo FROM freight.shipment_memos ORDER BY 1") == [
            (7, 2, "second"), (8, 3, "other")]
        assert rows(wh, "SELECT record_key, json_path FROM freight_meta.data_problems") == [("1", "(memo_id 7)")]
        apply_shipment_batch(wh, "run-1", {"shipment_memos": memos(4, 8, "fourth")}, [4], stream="shipment_memos")
        assert rows(wh, "SELECT record_key, json_path FROM freight_meta.data_problems ORDER BY 1") == [
            ("1", "(memo_id 7)"), ("3", "(memo_id 8)")]
        apply_shipment_batch(wh, "run-2", {"shipment_memos": memos(5, 8, "moved")}, [5], stream="shipment_memos")
        assert len(rows(wh, "SELECT * FROM freight_meta.data_problems")) == 2  # an earlier run's: a move, no problem


@pytest.mark.parametrize("held", ["a directory", "{not json", "[1, \"two\", null]", "{\"stream\": \"shipments\"}"])
def test_a_run_log_file_that_cannot_be_read_is_an_empty_one_not_a_traceback(tmp_path: Path, held: str) -> None:
    """``work/latest_runs.json`` as a directory, not JSON, or not a list of objects: ``status``, the dashboard and
    the checks read no run from it (the working database holds them), and fail on none."""
    path = run_log_path(tmp_path)
    path.parent.mkdir(parents=True)
    if held == "a directory":
        path.mkdir()
    else:
        path.write_text(held)
    assert read_run_log(tmp_path) == []
