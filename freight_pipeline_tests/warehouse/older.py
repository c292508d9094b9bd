"""The published file's older readers (``older_reader.py``) run with the lake environment's python, whose
duckdb is 1.5.x: the engine of Metabase's, DBeaver's and Evidence's drivers and of Superset's duckdb-engine."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import duckdb
import pytest

from freight_pipeline.config import REPO_ROOT

OLDER_PYTHON = REPO_ROOT / ".venv-lake" / "bin" / "python"
READER = Path(__file__).with_name("older_reader.py")
OLDEST_READER = (1, 5, 0)
"""The oldest DuckDB the published file must open: 1.5.x is what the BI tools bundle (Metabase's JDBC
driver 1.5.3, Evidence 1.5.6) and is supported until March 2027."""


def older_python() -> Path:
    """The lake environment's python (duckdb 1.5.x): a test without it fails under CI and skips elsewhere."""
    if OLDER_PYTHON.exists():
        return OLDER_PYTHON
    message = f"{OLDER_PYTHON} is missing: `make setup-lake` builds it (duckdb 1.5.5, the BI tools' engine)"
    if os.environ.get("CI") == "true":
        pytest.fail(message)
    pytest.skip(message)


def read_once(db: Path, mode: str) -> dict[str, Any]:
    """One pass of the older reader over ``db`` (``duckdb`` or ``sqlalchemy``): what it printed."""
    done = subprocess.run([str(older_python()), str(READER), str(db), mode],
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def start_reader(db: Path, mode: str, stop: Path) -> subprocess.Popen[str]:
    """The older reader reading ``db`` pass after pass until ``stop`` exists, one JSON line per pass."""
    return subprocess.Popen([str(older_python()), str(READER), str(db), mode, str(stop)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def rows_here(db: Path) -> dict[str, int]:
    """Rows of every table and view of ``db`` as this environment's duckdb reads them."""
    with duckdb.connect(str(db), read_only=True) as con:
        names = con.execute("SELECT schema_name, table_name FROM duckdb_tables() UNION ALL "
                            "SELECT schema_name, view_name FROM duckdb_views() WHERE NOT internal").fetchall()
        return {f"{s}.{n}": int(con.execute(f'SELECT count(*) FROM "{s}"."{n}"').fetchall()[0][0]) for s, n in names}


def storage_tag_of(db: Path) -> str:
    """The file's storage version as DuckDB tags it (``v1.5.0+``)."""
    with duckdb.connect(str(db), read_only=True) as con:
        return str(con.execute("SELECT tags['storage_version'] FROM duckdb_databases() "
                               "WHERE database_name = current_database()").fetchall()[0][0])


def version_of(tag: str) -> tuple[int, ...]:
    """``v1.5.0+`` -> (1, 5, 0)."""
    return tuple(int(part) for part in tag.strip("v+").split("."))
