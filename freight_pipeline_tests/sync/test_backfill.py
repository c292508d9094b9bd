"""Unit tests of the backfill's id-range partitions and the incremental take-over from their cursors."""

from __future__ import annotations

import re
from pathlib import Path

import duckdb
import pytest

from freight_pipeline.config import ServiceSettings
from freight_pipeline.lake.backend import storage_from_env
from freight_pipeline.simulator.server import running_simulator
from freight_pipeline.sync.backfill import (
    BackfillIncomplete,
    IdRange,
    completed_cursor,
    id_ranges_between,
    takeover_cursor,
)
from freight_pipeline.sync.cursor import CursorError, ShipmentKey
from freight_pipeline.sync.runner import sync_all
from freight_pipeline_tests.sync.settings import TEST_SETTINGS

PLAN = id_ranges_between([100, 250])
LOW = ShipmentKey("2024-03-01", "08:00:00", 7)
MID = ShipmentKey("2024-03-01", "08:00:00", 9)
HIGH = ShipmentKey("2024-03-02", "00:00:00", 1)


def unfinished_in(error: BackfillIncomplete) -> list[str]:
    match = re.search(r"partitions (.*) have not completed", str(error))
    assert match, str(error)
    return match.group(1).split(", ")


@pytest.mark.parametrize(("key", "expected"), [("0-99", IdRange(0, 100)), ("100-", IdRange(100, None))])
def test_key_and_parse_round_trip(key: str, expected: IdRange):
    assert IdRange.parse(key) == expected
    assert expected.key == key
    assert IdRange.parse(expected.key) == expected


def test_single_id_range_round_trips():
    assert IdRange.parse("5-5") == IdRange(5, 6)
    assert IdRange(5, 6).key == "5-5"


@pytest.mark.parametrize("key", ["abc", "5-2", "5-4", "-5", "1-2-3", ""])
def test_parse_rejects_bad_keys(key: str):
    with pytest.raises(ValueError):
        IdRange.parse(key)


def test_cursor_stream_of_a_range():
    assert IdRange(100, 250).cursor_stream == "shipments@100-249"


def test_criteria_of_a_bounded_range():
    assert IdRange(100, 250).criteria() == [
        {"key": "ID", "match_mode": "GE", "value": "100"},
        {"key": "ID", "match_mode": "LT", "value": "250"},
    ]


def test_criteria_of_an_open_range_has_no_upper_bound():
    assert IdRange(250).criteria() == [{"key": "ID", "match_mode": "GE", "value": "250"}]


def test_contains_bounded():
    bounded = IdRange(100, 250)
    assert 100 in bounded
    assert 249 in bounded
    assert 250 not in bounded
    assert 99 not in bounded
    assert "150" not in bounded


def test_contains_open_ended():
    assert 10**12 in IdRange(250)
    assert 249 not in IdRange(250)


def test_id_ranges_between_boundaries():
    assert [r.key for r in id_ranges_between([100, 250])] == ["0-99", "100-249", "250-"]


def test_id_ranges_between_no_boundaries_is_one_open_range():
    assert id_ranges_between([]) == (IdRange(0, None),)
    assert id_ranges_between([])[0].key == "0-"


@pytest.mark.parametrize("boundaries", [[250, 100], [100, 100], [0, 5], [-1]])
def test_id_ranges_between_refuses_non_increasing_boundaries(boundaries: list[int]):
    with pytest.raises(ValueError):
        id_ranges_between(boundaries)


def test_no_partition_cursors_means_no_takeover():
    assert takeover_cursor({}) is None


def test_other_streams_are_ignored():
    assert takeover_cursor({"shipments": LOW.to_json(), "documents": "{}"}) is None


def test_takeover_is_the_lowest_completed_ceiling():
    cursors = {
        "shipments@0-99": completed_cursor(HIGH, PLAN),
        "shipments@100-249": completed_cursor(LOW, PLAN),
        "shipments@250-": completed_cursor(MID, PLAN),
        "shipments": HIGH.to_json(),
    }
    assert takeover_cursor(cursors) == LOW


def test_takeover_refuses_while_a_planned_partition_has_no_cursor():
    cursors = {"shipments@0-99": completed_cursor(LOW, PLAN), "shipments@250-": completed_cursor(HIGH, PLAN)}
    with pytest.raises(BackfillIncomplete) as raised:
        takeover_cursor(cursors)
    assert unfinished_in(raised.value) == ["100-249"]


def test_takeover_refuses_while_a_partition_is_not_complete():
    cursors = {
        "shipments@0-99": completed_cursor(LOW, PLAN),
        "shipments@100-249": MID.to_json(),
        "shipments@250-": completed_cursor(HIGH, PLAN),
    }
    with pytest.raises(BackfillIncomplete) as raised:
        takeover_cursor(cursors)
    assert unfinished_in(raised.value) == ["100-249"]


def test_takeover_names_every_unfinished_partition():
    cursors = {"shipments@100-249": completed_cursor(MID, PLAN), "shipments@250-": LOW.to_json()}
    with pytest.raises(BackfillIncomplete) as raised:
        takeover_cursor(cursors)
    assert unfinished_in(raised.value) == ["0-99", "250-"]


def test_takeover_refuses_invalid_json():
    with pytest.raises(CursorError):
        takeover_cursor({"shipments@0-": "{not json"})


@pytest.mark.parametrize("value", ["5", "null", "[1]"])
def test_takeover_refuses_json_that_is_not_an_object(value: str):
    with pytest.raises(CursorError):
        takeover_cursor({"shipments@0-": value})


def test_backfill_partitions_run_one_after_another_compare_no_null_shares(tmp_path: Path) -> None:
    """Each partition's id range has shares of its own (the older shipments closed, their actual arrivals filled; the
    newer open): compared as runs of one stream, the second range's columns were said jumped (8 here), WARN checks
    and alerts for the data being as it is, and they stayed while later runs wrote few rows."""
    plan = tuple(id_ranges_between([10060]))
    with running_simulator(shipments=120, seed=11) as sim:
        service = ServiceSettings(sim.base_url, sim.username, sim.password)
        for partition in plan:
            settings = TEST_SETTINGS.model_copy(update={"id_range": partition, "backfill_plan": plan})
            results, _ = sync_all(service, tmp_path, settings, backend=storage_from_env(), streams=("shipments",),
                                  publish_after=False)
            assert [r.status for r in results] == ["success"]
            assert not results[0].extra.get("null_jumps"), partition
    database = tmp_path / "work" / "warehouse.duckdb"
    with duckdb.connect(str(database), read_only=True) as con:
        assert con.execute("SELECT count(*) FROM freight.shipments").fetchone() == (120,)
        assert con.execute("SELECT count(*) FROM freight_meta.column_nulls WHERE state = 'jumped'").fetchone() == (0,)
