"""``freight-pipeline demo`` end to end on a tiny simulator, and how it treats an existing data directory."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from freight_pipeline.commands.demo_data import MARKER, ForeignDataDir, prepare_demo_dir
from freight_pipeline_tests.commands.conftest import cli_env, run_cli


def _table_row(out: str, table: str) -> list[str]:
    line = next(line for line in out.splitlines() if line.split()[:1] == [table])
    return line.split()[1:]


def test_demo_syncs_changes_and_summarises(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    done = run_cli(["demo", "--data-dir", str(data_dir), "--shipments", "120", "--changes", "10"], cli_env())
    assert done.returncode == 0, done.stderr
    out = done.stdout
    # the analytic answer: an on-time share per mode, from the published marts
    answer = re.search(r"on-time share of arrived shipments by mode: (.+)", out)
    assert answer, out
    assert re.fullmatch(r"(?:(?:AIR|SEA|RD|RL) \d{1,3}\.\d%(?:, )?)+", answer.group(1)), answer.group(1)
    # tables: rows after the full sync, now, change; 10 modified, 1 created, 1 deleted between the runs,
    # and the demo reconciles ids every run, so the deleted shipment is gone from tables and marts
    assert _table_row(out, "freight.shipments") == ["120", "120", "0"]
    assert _table_row(out, "analytics.fct_shipments")[:2] == ["120", "120"]
    assert "between the runs the service changed: 10 modified, 1 created, 1 deleted; " in out
    # three days passed in the service between the runs: shipments progressed (events came due)
    progressed = re.search(r"; (\d+) progressed \(events come due, estimates revised\)", out)
    assert progressed and 1 <= int(progressed.group(1)) < 120, out
    assert "deleted in the service: 1, still in the warehouse: 0" in out
    # every E-File linked to a live shipment is in freight.shipment_documents, and nothing else
    documents = re.search(r"E-File documents of live shipments: ([\d,]+) in the service, ([\d,]+) in "
                          r"freight.shipment_documents: (.+)", out)
    assert documents, out
    assert documents.group(1) == documents.group(2) and int(documents.group(1).replace(",", "")) > 120
    assert documents.group(3) == "the same pairs"
    full, incremental = _table_row(out, "full"), _table_row(out, "incremental")
    assert full[0] == "sync" and int(full[2]) == 120  # the full sync read every shipment
    assert 11 <= int(incremental[2]) < 120  # the incremental one the changed ones (and its overlap)
    assert f"duckdb.connect('{data_dir / 'warehouse.duckdb'}', read_only=True)" in out
    assert f"{data_dir}/parquet/<schema>/<table>/" in out and "make ui" in out
    assert "demo: incremental sync done" in done.stderr
    assert (data_dir / MARKER).is_file()


def test_a_previous_demo_is_emptied_and_a_foreign_warehouse_refused(tmp_path: Path) -> None:
    demo_dir = tmp_path / "demo"
    prepare_demo_dir(demo_dir, {"seed": 1})
    (demo_dir / "work").mkdir()
    (demo_dir / "warehouse.duckdb").write_text("old")
    (demo_dir / "notes.txt").write_text("mine")
    removed = prepare_demo_dir(demo_dir, {"seed": 2})
    assert sorted(p.name for p in removed) == ["warehouse.duckdb", "work"]
    assert not (demo_dir / "warehouse.duckdb").exists() and (demo_dir / "notes.txt").read_text() == "mine"
    assert '"seed": 2' in (demo_dir / MARKER).read_text()

    real = tmp_path / "real"
    (real / "work").mkdir(parents=True)
    (real / "warehouse.duckdb").write_text("precious")
    with pytest.raises(ForeignDataDir, match="did not create"):
        prepare_demo_dir(real, {})
    assert (real / "warehouse.duckdb").read_text() == "precious"
