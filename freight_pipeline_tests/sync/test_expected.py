"""The sync tests' oracle (``expected.rows_differences``): equal tables are no difference, and a missing, an
extra, a duplicate and a changed row are each counted, whether or not its row hashes already tell."""

from __future__ import annotations

from pathlib import Path

import pytest

from freight_pipeline_tests.dbt.freight_db import build_freight_database, documents, normalized_tables
from freight_pipeline_tests.sync.expected import rows_differences


@pytest.fixture(scope="module")
def database(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("oracle") / "warehouse.duckdb"
    build_freight_database(path, shipments=5)
    return path


def rows() -> dict[str, list[dict[str, object]]]:
    """The rows the database was built from (the same documents, normalized again)."""
    return {name: table.to_pylist() for name, table in normalized_tables(documents(5)).items()}


def test_the_rows_the_tables_hold_are_no_difference(database: Path) -> None:
    assert rows_differences(rows(), database) == {}


def test_a_missing_an_extra_a_duplicate_and_a_changed_row_are_counted(database: Path) -> None:
    expected = rows()
    dropped = expected["shipments"].pop(0)  # the warehouse holds one more
    expected["shipment_goods"].append(dict(expected["shipment_goods"][0]))  # expected twice, held once
    event = expected["shipment_events"][0]
    expected["shipment_events"][0] = {**event, "location_name": f"{event['location_name']} (changed)"}
    assert rows_differences(expected, database) == {
        "shipments": (0, 1), "shipment_goods": (1, 0), "shipment_events": (1, 1)}
    involved = {dropped["shipment_id"], expected["shipment_goods"][0]["shipment_id"], event["shipment_id"]}
    assert rows_differences(expected, database, except_shipments=involved) == {}
