"""``freight-pipeline status`` on a real published warehouse, and without one."""

from __future__ import annotations

import json
import re
from pathlib import Path

import duckdb
import httpx
import pytest

from freight_pipeline.cli import main
from freight_pipeline.client import AuthenticationError
from freight_pipeline.commands.status import READS
from freight_pipeline.config import (
    CONCERNS,
    SETTINGS_FILE_ENV,
    BadSettings,
    ServiceSettings,
    load_settings,
    variable,
)
from freight_pipeline.datetimes import DEFAULT_SERVICE_TIMEZONE
from freight_pipeline.defs.jobs import automation_running
from freight_pipeline.lake.backend import storage_from_env
from freight_pipeline.normalize.signature import current_signature
from freight_pipeline.simulator.server import RunningSimulator, running_simulator
from freight_pipeline.sync.derived_by import DERIVED_BY
from freight_pipeline.sync.runner import sync_all
from freight_pipeline.sync.streams import STREAM_NAMES
from freight_pipeline_tests.sync.settings import TEST_SETTINGS


def _counts(data_dir: Path) -> dict[str, int]:
    con = duckdb.connect(str(data_dir / "warehouse.duckdb"), read_only=True)
    try:
        tables = con.execute(
            "SELECT schema_name, table_name FROM duckdb_tables() WHERE schema_name IN ('freight', 'analytics')"
        ).fetchall()
        return {f"{s}.{t}": con.execute(f'SELECT count(*) FROM "{s}"."{t}"').fetchone()[0] for s, t in tables}
    finally:
        con.close()


def test_status_prints_streams_runs_and_row_counts(published: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["status", "--data-dir", str(published)]) == 0
    out = capsys.readouterr().out
    assert f"published warehouse: {published / 'warehouse.duckdb'}" in out
    lines = out.splitlines()
    for stream in STREAM_NAMES:  # every stream: a row with its cursor and a successful last run
        row = next(line for line in lines if line.split()[:1] == [stream])
        assert "success" in row, row
    shipments_row = next(line for line in lines if line.split()[:1] == ["shipments"])
    # the cursor as the service's wall-clock second WITH its UTC offset (in the hour a fall-back repeats, the offset
    # alone tells which instant it is), then the id
    with duckdb.connect(str(published / "warehouse.duckdb"), read_only=True) as con:
        (stored,) = con.execute("SELECT cursor_value FROM freight_meta.sync_state "
                                "WHERE stream = 'shipments'").fetchone()
    cursor = json.loads(stored)
    assert re.fullmatch(r"[+-]\d\d:\d\d", cursor["offset"])
    assert f"{cursor['date']} {cursor['time']}{cursor['offset']} (id {cursor['id']})" in shipments_row, shipments_row
    counts = _counts(published)
    assert counts["freight.shipments"] == 100
    for table, rows in counts.items():  # the tables section: one line per table with its exact count
        assert re.search(rf"^\s+{re.escape(table)}\s+{rows:,}$", out, re.MULTILINE), table
    assert re.search(r"^\s+total\s+0\s+0$", out, re.MULTILINE)  # nothing rejected, by the last runs or ever


def test_status_json(published: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["status", "--data-dir", str(published), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["tables"] == _counts(published)
    streams = {s["stream"]: s for s in report["streams"]}
    assert set(STREAM_NAMES) <= set(streams)
    assert streams["shipments"]["last_run"]["status"] == "success"
    assert streams["shipments"]["last_run"]["rows_read"] == 100
    assert json.loads(streams["shipments"]["cursor"])["date"].startswith("2026-")
    assert "pending_details" not in report and report["rejected_records"] == {}
    # the mapping the runs derived the rows with: its id, not its declarations
    derived = json.loads(streams[DERIVED_BY]["cursor"])
    assert derived == {"mappings": [current_signature(DEFAULT_SERVICE_TIMEZONE).id]}


def test_status_without_a_published_warehouse(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["status", "--data-dir", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert "nothing published yet" in err and str(tmp_path) in err


def test_status_before_the_first_publish_shows_the_runs_that_failed(
    sim: RunningSimulator, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Every sync so far failed (a wrong password from cron, each time): nothing is published, and status must say
    how the runs went, not "run `freight-pipeline sync` first" as if none had run."""
    with pytest.raises(AuthenticationError):
        sync_all(ServiceSettings(sim.base_url, sim.username, "wrong-password"), tmp_path, run_id="run-refused",
                 backend=storage_from_env())
    assert main(["status", "--data-dir", str(tmp_path)]) == 1
    out, err = capsys.readouterr()
    assert "nothing published yet" in err and "run `freight-pipeline sync`" not in err
    assert re.search(r"^\s+shipments\s+run-refused\s+failed\s+\d{4}-\d\d-\d\d .*AuthenticationError", out, re.M), out
    assert "wrong-password" not in out + err
    assert main(["status", "--data-dir", str(tmp_path), "--json"]) == 1
    report = json.loads(capsys.readouterr().out)
    assert report["published"] is None
    assert {(r["stream"], r["run_id"], r["status"]) for r in report["unpublished_runs"]} >= {
        ("shipments", "run-refused", "failed")}


def test_status_shows_a_failed_run_that_was_never_published(
    sim: RunningSimulator, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    sync_all(ServiceSettings(sim.base_url, sim.username, sim.password), tmp_path, streams=["code_conversions"],
             backend=storage_from_env())
    assert main(["status", "--data-dir", str(tmp_path)]) == 0
    assert "runs after the last publish" not in capsys.readouterr().out  # all published
    with pytest.raises(AuthenticationError):
        sync_all(ServiceSettings(sim.base_url, sim.username, "wrong-password"), tmp_path, run_id="run-refused",
                 backend=storage_from_env())
    assert main(["status", "--data-dir", str(tmp_path), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    (failed,) = report["unpublished_runs"]
    assert (failed["stream"], failed["run_id"], failed["status"]) == ("shipments", "run-refused", "failed")
    assert failed["error"].startswith("AuthenticationError") and "wrong-password" not in failed["error"]
    published = {s["stream"]: s["last_run"] for s in report["streams"]}
    assert published["code_conversions"]["status"] == "success" and "shipments" not in published
    assert main(["status", "--data-dir", str(tmp_path)]) == 0
    text = capsys.readouterr().out
    assert "runs after the last publish" in text
    assert re.search(r"^\s+shipments\s+run-refused\s+failed\s+\d{4}-\d\d-\d\d .*AuthenticationError", text, re.M), text


def test_status_says_what_waits_in_the_retry_queue_and_what_was_nulled(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with running_simulator(shipments=40, seed=9, control=True) as bad:
        docs = sorted(bad.store.reader.expected_documents(), key=lambda d: d["id"])
        cut, odd = docs[3]["id"], next(d["id"] for d in docs[4:] if bad.store.reader.get_events(d["id"]))
        for body in (
            {"endpoint": "shipment", "id": cut, "kind": "truncated"},
            {"endpoint": "events", "id": odd, "kind": "set", "path": "[0].date_time.zone_offset", "value": "+99:00"},
        ):
            assert httpx.post(f"{bad.base_url}/_control/corruptions", json=body, timeout=10).status_code == 200
        sync_all(ServiceSettings(bad.base_url, bad.username, bad.password), tmp_path, backend=storage_from_env())
    assert main(["status", "--data-dir", str(tmp_path), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["retry_queue"]["shipments"]["records"] == 1 and report["data_problems"] == {"shipment_events": 1}
    since = report["retry_queue"]["shipments"]["since"]
    assert main(["status", "--data-dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    bad_data = out[out.index("bad data (freight_meta.quarantine"):]
    shipments_row = next(line for line in bad_data.splitlines() if line.split()[:1] == ["shipments"])
    assert shipments_row.split()[1] == "1" and since.replace("T", " ").removesuffix("+00:00") in shipments_row
    events_row = next(line for line in bad_data.splitlines() if line.split()[:1] == ["shipment_events"])
    assert events_row.split()[1] == "0" and events_row.split()[-1] == "1"


def test_status_says_what_the_last_run_rejected_apart_from_the_failures_logged_in_all_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A shipment, and another's events (a part, logged in the runs of the shipments stream), that failed in two runs,
    then loaded: "rejected records 2", a total of every failure ever logged, shown beside the last run's "rejected
    0", as if two records were rejected now."""
    def rejects() -> dict[str, tuple[str, str]]:
        assert main(["status", "--data-dir", str(tmp_path)]) == 0
        out = capsys.readouterr().out
        section = out[out.index("\nrejects\n"):out.index("bad data (freight_meta.quarantine")]
        return {cells[0]: (cells[1], cells[2]) for line in section.splitlines()
                if (cells := line.split())[:1] in (["shipments"], ["shipment_events"])}

    with running_simulator(shipments=20, seed=9, control=True) as bad:
        docs = sorted(bad.store.reader.expected_documents(), key=lambda d: d["id"])
        cut, odd = docs[3]["id"], next(d["id"] for d in docs[4:] if bad.store.reader.get_events(d["id"]))
        for endpoint, shipment in (("shipment", cut), ("events", odd)):
            assert httpx.post(f"{bad.base_url}/_control/corruptions", timeout=10,
                              json={"endpoint": endpoint, "id": shipment, "kind": "truncated"}).status_code == 200
        service = ServiceSettings(bad.base_url, bad.username, bad.password)
        sync_all(service, tmp_path, TEST_SETTINGS, backend=storage_from_env())
        bad.store.clock.advance(3600)
        bad.store.changes.touch_shipments([cut, odd])  # read again by the next run, and failing again
        sync_all(service, tmp_path, TEST_SETTINGS, backend=storage_from_env())
        assert rejects() == {"shipments": ("1", "2"), "shipment_events": ("1", "2")}
        assert httpx.delete(f"{bad.base_url}/_control/corruptions", timeout=10).status_code == 200
        bad.store.clock.advance(3600)
        bad.store.changes.touch_shipments([cut, odd])
        sync_all(service, tmp_path, TEST_SETTINGS, backend=storage_from_env())
    assert rejects() == {"shipments": ("0", "2"), "shipment_events": ("0", "2")}
    assert main(["status", "--data-dir", str(tmp_path), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert (report["rejected_in_last_run"], report["rejected_records"]) == ({}, {"shipments": 2,
                                                                                "shipment_events": 2})


BAD_VALUE_OF_CONCERN = {"service": ("base_url", "not a url"), "sync": ("page_size", "900"),
                        "marts": ("dbt_replay", "sometimes")}
"""A bad value of each concern ``status`` does not read."""


def test_a_bad_value_of_a_concern_status_does_not_read_is_said_and_status_goes_on(
    published: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A page size a sync refuses stops every sync: ``status`` (and cron's ``status --alert``, which alerts when
    syncs stop) reads none of it, so it says the value and goes on (was: exit 2, the freshness look silenced with
    the syncs); a bad value of a concern it reads is refused as before."""
    assert {concern.section for concern in CONCERNS if concern not in READS} == set(BAD_VALUE_OF_CONCERN)
    for name, value in BAD_VALUE_OF_CONCERN.values():
        monkeypatch.setenv(variable(name), value)
    assert main(["status", "--data-dir", str(published)]) == 0
    captured = capsys.readouterr()
    assert "published warehouse: " in captured.out
    said = [line for line in captured.err.splitlines() if line.endswith("(a sync refuses it; status does not read it)")]
    assert sorted(line.split("=", 1)[0].removeprefix("status: ") for line in said) == sorted(
        variable(name) for name, _ in BAD_VALUE_OF_CONCERN.values())
    monkeypatch.setenv(variable("min_free_mb"), "-1")  # the storage's: status reads it
    assert main(["status", "--data-dir", str(published)]) == 2


FILE_PROBLEMS_OF_NO_CONCERN = {
    "a table of no concern": ("[Sync]\npage_size = 200\n", "[Sync] is not a table of settings"),
    "a key outside any table": ("page_size = 200\n", "page_size is a key outside any table"),
    "not TOML": ("[sync]\nrestore_probe = off\n", "is not TOML"),
}


@pytest.mark.parametrize("problem", FILE_PROBLEMS_OF_NO_CONCERN)
def test_a_settings_file_problem_of_no_concern_stops_a_sync_not_status_nor_the_definitions(
    published: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
    problem: str,
) -> None:
    """A misspelt table, a key outside any table or a file that is not TOML: a sync refuses it, while ``status``
    (cron's ``status --alert``, which alerts when syncs stop) and the definitions' schedules and sensors, which
    read some concerns, say it and go on (was: refused by every reader, the code location failing to load)."""
    text, says = FILE_PROBLEMS_OF_NO_CONCERN[problem]
    file = tmp_path / "freight.toml"
    file.write_text(text)
    monkeypatch.setenv(SETTINGS_FILE_ENV, str(file))
    with pytest.raises(BadSettings, match=re.escape(says)):
        load_settings()
    assert automation_running() is False  # the definitions' default status of their schedules: read, no refusal
    assert main(["status", "--data-dir", str(published)]) == 0
    captured = capsys.readouterr()
    assert "published warehouse: " in captured.out
    said = [line for line in captured.err.splitlines() if line.endswith("(a sync refuses it; status does not read it)")]
    assert len(said) == 1 and says in said[0], captured.err


def test_an_unknown_entry_in_a_table_status_does_not_read_is_said_and_status_goes_on(
    published: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A misspelt key in the settings file's table of a concern status does not read, as a bad value there (was:
    exit 2, the freshness look silenced with the syncs); one in a table it reads is refused."""
    file = tmp_path / "freight.toml"
    file.write_text("".join(f"[{section}]\n{name.replace('_', '')} = 1\n"
                            for section, (name, _) in BAD_VALUE_OF_CONCERN.items()))
    monkeypatch.setenv(SETTINGS_FILE_ENV, str(file))
    assert main(["status", "--data-dir", str(published)]) == 0
    captured = capsys.readouterr()
    assert "published warehouse: " in captured.out
    said = [line for line in captured.err.splitlines() if line.endswith("(a sync refuses it; status does not read it)")]
    assert sorted(line.split(" is not a setting of ")[1].split()[0] for line in said) == sorted(
        f"[{section}]" for section in BAD_VALUE_OF_CONCERN)
    file.write_text(file.read_text() + "[alerts]\nalerturls = 'json://x'\n")  # the alerts': status reads them
    assert main(["status", "--data-dir", str(published)]) == 2
    assert "[alerts] alerturls is not a setting of [alerts]" in capsys.readouterr().err
