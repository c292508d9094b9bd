"""Which dbt build a run needs: a full refresh, an incremental build, or none."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from freight_pipeline.config import DBT_FULL_REFRESH_ENV, DBT_TEST_ROWS_ENV, FULL_CHECK_ENV
from freight_pipeline.defs.dbt import ensure_manifest
from freight_pipeline.marts.plan import (
    SOURCE,
    batch_key,
    full_check_due,
    last_full_check,
    models_only_of,
    plan_build,
    project_fingerprint,
    record_build,
)
from freight_pipeline.sync.streams import CODE_CONVERSIONS
from freight_pipeline.warehouse.embedded import EmbeddedDuckDB
from freight_pipeline.warehouse.records import BatchWrite, RunRecord
from freight_pipeline.warehouse.store import Warehouse, open_warehouse


@pytest.fixture
def wh(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Warehouse]:
    monkeypatch.delenv(DBT_FULL_REFRESH_ENV, raising=False)
    monkeypatch.delenv(FULL_CHECK_ENV, raising=False)
    with open_warehouse(tmp_path, EmbeddedDuckDB()) as warehouse:
        yield warehouse


def built(wh: Warehouse, fingerprint: str, status: str = "success") -> dt.datetime:
    began = dt.datetime.now(dt.UTC)
    covered = plan_build(wh, fingerprint).conversions_at  # the code conversions as the build's plan saw them
    wh.run_log.record_run(RunRecord("r", "dbt_build", began, began, status))
    record_build(wh, fingerprint, began, "r", full_check=True, conversions_at=covered)
    return began


def test_never_built_or_another_project_means_a_full_refresh(wh: Warehouse) -> None:
    plan = plan_build(wh, "abc")
    assert (plan.run, plan.full_refresh, plan.args) == (True, True, ["--full-refresh"])
    built(wh, "abc")
    plan = plan_build(wh, "def")
    assert plan.full_refresh and "the dbt project changed" in plan.reason


def test_nothing_changed_means_no_build_and_a_change_an_incremental_one(wh: Warehouse) -> None:
    built(wh, "abc")
    assert plan_build(wh, "abc").run is False
    wh.writes.apply_batch("sync", BatchWrite(deleted_ids=[7]))  # a deletion is a change too
    plan = plan_build(wh, "abc")
    assert (plan.run, plan.full_refresh, plan.reason) == (True, False, "1 shipments changed; a full check")
    # the views stand as the last whole build made them, and the code conversions' model as the last build
    # made it (they did not change): left out, their tests kept (indirect selection empty)
    assert (plan.args, plan.env) == (["--exclude", "config.materialized:view", "--exclude",
                                      "source:freight.code_conversions+,resource_type:model"],
                                     {"DBT_INDIRECT_SELECTION": "empty"})
    record_build(wh, "abc", dt.datetime.now(dt.UTC), "r2", full_check=False)  # the build covered it
    assert wh.reads.pending_changes() == 0 and plan_build(wh, "abc").run is False


def test_changed_code_conversions_or_a_failed_last_build_build_again(wh: Warehouse) -> None:
    built(wh, "abc")
    wh.writes.set_cursor("code_conversions", '{"rows": 3}', "sync")
    plan = plan_build(wh, "abc")
    assert plan.reason == "0 shipments and the code conversions changed; a full check"
    assert plan.args == ["--exclude", "config.materialized:view"]  # the code conversions' model built again
    built(wh, "abc", status="failed")
    assert plan_build(wh, "abc").run


def test_code_conversions_changed_after_a_clock_stepped_back_build_again(wh: Warehouse) -> None:
    """The conversions' cursor set after the last build, by a clock stepped back since: dated before that build
    began, it read as no change, and the marts kept the old conversions."""
    wh.writes.set_cursor("code_conversions", '{"rows": 3}', "sync")
    began = built(wh, "abc")
    assert plan_build(wh, "abc").run is False
    wh.writes.set_cursor("code_conversions", '{"rows": 4}', "sync")
    wh.database.con.execute("UPDATE freight_meta.sync_state SET updated_at = ? WHERE stream = 'code_conversions'",
                            [began - dt.timedelta(hours=1)])
    assert plan_build(wh, "abc").reason == "0 shipments and the code conversions changed; a full check"


def test_between_full_checks_an_incremental_build_tests_the_changed_rows(wh: Warehouse) -> None:
    built(wh, "abc")
    wh.writes.apply_batch("sync", BatchWrite(deleted_ids=[7]))
    plan = plan_build(wh, "abc", full_check=False)
    assert (plan.run, plan.full_refresh, plan.changed_rows) == (True, False, True)
    assert plan.reason == "1 shipments changed; tests on the changed rows"
    assert plan.env == {"DBT_INDIRECT_SELECTION": "empty", DBT_TEST_ROWS_ENV: "changed"}
    assert not plan_build(wh, "abc", full_check=True).changed_rows
    assert DBT_TEST_ROWS_ENV not in plan_build(wh, "other", full_check=False).env  # a full refresh


def test_a_full_check_is_due_first_then_once_an_interval(wh: Warehouse, monkeypatch: pytest.MonkeyPatch) -> None:
    assert full_check_due(wh) and last_full_check(wh) is None  # never checked: the first run is one
    began = built(wh, "abc")  # a full check's build
    assert last_full_check(wh) == began
    assert not full_check_due(wh, began + dt.timedelta(hours=23, minutes=59))
    assert full_check_due(wh, began + dt.timedelta(hours=24))  # the default: a day
    later = began + dt.timedelta(hours=2)
    record_build(wh, "abc", later, "r3", full_check=False)  # an incremental build keeps the last full check
    assert last_full_check(wh) == began
    monkeypatch.setenv(FULL_CHECK_ENV, "60")
    assert not full_check_due(wh, began + dt.timedelta(minutes=59)) and full_check_due(wh, later)
    monkeypatch.setenv(FULL_CHECK_ENV, "0")  # every run a full check
    assert full_check_due(wh, began)
    record_build(wh, "abc", later, "r4", full_check=True)
    assert last_full_check(wh) == later


def test_a_full_refresh_can_be_asked_for(wh: Warehouse, monkeypatch: pytest.MonkeyPatch) -> None:
    built(wh, "abc")
    monkeypatch.setenv(DBT_FULL_REFRESH_ENV, "1")
    assert plan_build(wh, "abc").full_refresh


def test_the_fingerprint_follows_models_macros_project_file_and_arguments(tmp_path: Path) -> None:
    (tmp_path / "models").mkdir()
    (tmp_path / "macros").mkdir()
    (tmp_path / "tests").mkdir()
    model = tmp_path / "models" / "m.sql"
    model.write_text("select 1")
    (tmp_path / "dbt_project.yml").write_text("name: x")
    first = project_fingerprint(tmp_path, ["build"])
    (tmp_path / "tests" / "t.sql").write_text("select 1 where false")  # a test decides no mart's content
    assert project_fingerprint(tmp_path, ["build"]) == first
    assert project_fingerprint(tmp_path, ["build", "--vars", "{}"]) != first
    model.write_text("select 2")
    second = project_fingerprint(tmp_path, ["build"])
    assert second != first
    (tmp_path / "profiles.yml").write_text("schema: other")  # where the views stand
    assert project_fingerprint(tmp_path, ["build"]) != second


def test_the_models_left_out_with_the_code_conversions_read_nothing_else() -> None:
    """An incremental build leaves out the models descending from the code conversions when they did not
    change: sound only while none of those models reads another table (it would miss that table's changes)."""
    nodes = json.loads(ensure_manifest().read_text())
    graph = {**nodes["nodes"], **nodes["sources"]}

    def sources_of(unique_id: str) -> set[str]:
        node = graph[unique_id]
        if node["resource_type"] == "source":
            return {unique_id}
        return set().union(*(sources_of(parent) for parent in node["depends_on"]["nodes"]))

    table = f"source.freight_marts.{SOURCE}.{CODE_CONVERSIONS.tables[0]}"
    (selector,) = models_only_of(CODE_CONVERSIONS.tables)
    assert selector == f"source:{SOURCE}.{CODE_CONVERSIONS.tables[0]}+,resource_type:model"
    descendants = [uid for uid, node in nodes["nodes"].items()
                   if node["resource_type"] == "model" and table in sources_of(uid)]
    assert sorted(nodes["nodes"][uid]["name"] for uid in descendants) == ["dim_code_conversions",
                                                                        "stg_code_conversions"]
    assert all(sources_of(uid) == {table} for uid in descendants)


def test_a_batch_key_changes_with_the_projects_tests_the_arguments_and_the_environment(tmp_path: Path) -> None:
    (tmp_path / "tests").mkdir()
    key = batch_key(tmp_path, "abc", ["build"], {"A": "1"})
    assert key == batch_key(tmp_path, "abc", ["build"], {"A": "1"})
    assert len({key, batch_key(tmp_path, "abd", ["build"], {"A": "1"}),
                batch_key(tmp_path, "abc", ["build", "--exclude", "x"], {"A": "1"}),
                batch_key(tmp_path, "abc", ["build"], {"A": "2"})}) == 4
    (tmp_path / "tests" / "singular.sql").write_text("select 1 where false")
    assert batch_key(tmp_path, "abc", ["build"], {"A": "1"}) != key
