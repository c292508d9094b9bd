"""Table specs against the warehouse contract, DuckDB DDL and Arrow output."""

from __future__ import annotations

import datetime as dt
import re

import duckdb
import pyarrow as pa
import pytest

from freight_pipeline.config import REPO_ROOT
from freight_pipeline.normalize.events import normalize_events
from freight_pipeline.normalize.flatten import merge_rows, normalize_shipment, to_arrow_batch
from freight_pipeline.normalize.legs import normalize_main_carriage
from freight_pipeline.normalize.problems import Problems
from freight_pipeline.normalize.records import normalize_code_conversions, normalize_memos
from freight_pipeline.normalize.tables import FREIGHT_TABLES, TABLES_BY_NAME
from freight_pipeline_tests.normalize import samples

CONTRACT = REPO_ROOT / "docs" / "warehouse-contract.md"  # the copy this release implements
UPSTREAM_CONTRACT = REPO_ROOT.parent / "shared" / "warehouse-contract.md"  # beside a working checkout only


def contract_freight_tables() -> dict[str, tuple[str, ...]]:
    """table -> primary key columns, parsed from the `freight` schema section of the contract."""
    text = CONTRACT.read_text(encoding="utf-8")
    section = text.split("## Schema `freight`:", 1)[1].split("\n## ", 1)[0]
    tables: dict[str, tuple[str, ...]] = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) < 2 or not cells[0].startswith("`"):
            continue
        key = tuple(k.strip() for k in re.sub(r"[`()]", "", cells[1]).split(","))
        for name in re.findall(r"`([a-z_]+)`", cells[0]):
            tables[name] = key
    return tables


def sample_rows() -> dict[str, list[dict[str, object]]]:
    docs = [samples.shipment(i) for i in (1, 2, 3)]
    parts = [normalize_shipment(d) for d in docs]
    parts += [normalize_events(i, samples.events(i)) for i in (1, 2)]
    parts.append(normalize_main_carriage(1, [samples.leg(1), samples.leg(2)], kind="air"))
    parts.append(normalize_main_carriage(2, [samples.leg(1)], kind="sea"))
    parts.append(
        normalize_memos(
            [{"id": 1, "client": "C1", "shipment_number": "SN-1", "memo": "m"}, {"id": 2, "memo": "orphan"}],
            {("C1", "SN-1"): 1},
            Problems(),  # the orphan is one: loaded with a null shipment_id, and reported
        )
    )
    parts.append(normalize_code_conversions([samples.code_conversion(i) for i in (1, 2)]))
    parts.append({"shipment_documents": samples.document_rows(1) + samples.document_rows(2, ("Packing list",))})
    return merge_rows(parts)


def sample_batch() -> dict[str, pa.Table]:
    return to_arrow_batch(sample_rows())


@pytest.fixture(scope="module")
def batch() -> dict[str, pa.Table]:
    return sample_batch()


def test_contract_parsed() -> None:
    tables = contract_freight_tables()
    assert len(tables) >= 20
    assert tables["shipment_goods"] == ("shipment_id", "good_path")
    assert tables["good_descriptions"] == ("shipment_id", "good_path", "position")


@pytest.mark.skipif(not UPSTREAM_CONTRACT.exists(), reason="no ../shared checkout beside this clone")
def test_contract_copy_keeps_every_line_of_upstream() -> None:
    """The repo's copy may add to the upstream contract (new tables: additions are allowed), never drop
    or change a line of it: upstream's lines appear in it, in order."""
    ours = iter(CONTRACT.read_text(encoding="utf-8").splitlines())
    missing = [line for line in UPSTREAM_CONTRACT.read_text(encoding="utf-8").splitlines() if line not in ours]
    assert not missing, f"{CONTRACT} lacks or reorders lines of {UPSTREAM_CONTRACT}: {missing[:3]}"


def test_every_contract_table_and_key_is_declared() -> None:
    for name, key in contract_freight_tables().items():
        assert name in TABLES_BY_NAME, f"contract table {name} not declared"
        assert TABLES_BY_NAME[name].primary_key == key, name


def test_contract_named_columns_exist() -> None:
    cols = {t.name: set(t.column_names) for t in FREIGHT_TABLES}
    assert {"last_modified_at", "created_at", "shipment_closed", "ordered_at"} <= cols["shipments"]
    assert {"last_modified_date", "last_modified_time", "chargeable_weight"} <= cols["shipments"]
    assert {"good_id", "parent_good_path", "depth"} <= cols["shipment_goods"]
    assert {"qualifier", "printed_line_1", "printed_line_5", "contact_name", "contact_json"} <= cols[
        "shipment_addresses"
    ]
    assert {"container_id", "good_id"} <= cols["shipment_containers"]
    assert {"event_at", "event_until", "unloc", "iata", "service_code", "location_codes"} <= cols[
        "shipment_events"
    ]
    assert {"contact_name", "contact_email"} <= cols["good_dangerous_goods"]
    assert {"hs_code", "good_id"} <= cols["good_hs_codes"]
    assert "payload" in cols["code_conversions"]


def test_specs_are_consistent() -> None:
    assert all(t.schema == "freight" for t in FREIGHT_TABLES)
    assert len({t.name for t in FREIGHT_TABLES}) == len(FREIGHT_TABLES)
    for spec in FREIGHT_TABLES:
        assert spec.description
        expected = None if spec.name == "code_conversions" else "shipment_id"
        assert spec.replace_key == expected, spec.name
        for key in spec.primary_key:
            assert not spec.column_index[key].nullable, (spec.name, key)


def test_arrow_output_matches_spec(batch: dict[str, pa.Table]) -> None:
    assert set(batch) == set(TABLES_BY_NAME)
    for name, table in batch.items():
        assert table.schema.equals(TABLES_BY_NAME[name].arrow_schema()), name
        assert table.num_rows > 0, name
    events = batch["shipment_events"].to_pylist()
    assert events[0]["event_at"] == dt.datetime(2026, 11, 1, 9, 15, 30, tzinfo=dt.UTC)


def test_arrow_tables_hold_what_the_rows_hold() -> None:
    """``TableSpec.to_arrow`` (the rows as one struct array) gives what ``Table.from_pylist`` gives: a key
    missing from a row is null, a key the spec does not declare is left out."""
    for name, rows in sample_rows().items():
        spec = TABLES_BY_NAME[name]
        rows = [*rows, {"undeclared": "left out"}, {k: v for k, v in rows[0].items() if k != spec.columns[-1].name}]
        assert spec.to_arrow(rows).equals(pa.Table.from_pylist(rows, schema=spec.arrow_schema())), name


def test_empty_rows_give_empty_tables() -> None:
    tables = to_arrow_batch({"shipment_memos": [], "shipments": []})
    assert tables["shipment_memos"].num_rows == 0
    assert tables["shipments"].schema.equals(TABLES_BY_NAME["shipments"].arrow_schema())
    with pytest.raises(KeyError):
        to_arrow_batch({"no_such_table": []})


def test_ddl_executes_and_arrow_inserts_with_unique_keys(batch: dict[str, pa.Table]) -> None:
    con = duckdb.connect()
    con.execute("CREATE SCHEMA freight")
    synced_at = dt.datetime(2026, 11, 1, 12, 0, tzinfo=dt.UTC)
    for spec in FREIGHT_TABLES:
        con.execute(spec.ddl())
        table = batch[spec.name]
        n = table.num_rows
        arrow_tbl = table.append_column(
            pa.field("_synced_at", pa.timestamp("us", tz="UTC"), nullable=False),
            pa.array([synced_at] * n, pa.timestamp("us", tz="UTC")),
        ).append_column(
            pa.field("_run_id", pa.string(), nullable=False), pa.array(["run-1"] * n, pa.string())
        )
        assert arrow_tbl.schema.equals(spec.arrow_schema(with_audit=True))
        con.register("arrow_tbl", arrow_tbl)
        con.execute(f"INSERT INTO {spec.qualified_name} SELECT * FROM arrow_tbl")
        con.unregister("arrow_tbl")
        keys = ", ".join(f'"{k}"' for k in spec.primary_key)
        (count, distinct) = con.execute(
            f"SELECT count(*), count(DISTINCT ({keys})) FROM {spec.qualified_name}"
        ).fetchone()
        assert count == distinct == n, spec.name
    # JSON columns hold valid JSON; instants round-trip as UTC
    assert con.execute(
        "SELECT json_extract_string(contact_json, '$.name') FROM freight.good_dangerous_goods LIMIT 1"
    ).fetchone() == ("Hazmat Desk",)
    (instant,) = con.execute(
        "SELECT epoch(last_modified_at) FROM freight.shipments WHERE shipment_id = 1"
    ).fetchone()
    assert instant == dt.datetime(2026, 11, 1, 9, 15, 30, tzinfo=dt.UTC).timestamp()
    (paths,) = con.execute(
        "SELECT list(good_path ORDER BY good_path) FROM freight.shipment_goods WHERE shipment_id = 2"
    ).fetchone()
    assert paths == ["1", "1.1", "1.1.1", "1.2", "2"]


def test_a_batch_of_shipments_holds_every_row_of_each_in_order() -> None:
    """Normalized together, shipments give the tables each gives alone, one after the other (how fast:
    the bench's runs, not a test)."""
    normalized = [normalize_shipment(samples.shipment(i)) for i in range(1, 101)]  # ~60 rows each
    batch = to_arrow_batch(merge_rows(normalized))
    alone = [to_arrow_batch(rows) for rows in normalized]
    assert batch["shipments"].column("shipment_id").to_pylist() == list(range(1, 101))
    for name, table in batch.items():
        assert table.to_pylist() == [row for tables in alone for row in tables[name].to_pylist()], name
