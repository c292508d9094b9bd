"""The default environment (duckdb 2.0, without DuckLake's extension packages) refuses lake mode
with a message naming the environment to use, before it creates anything of the lake."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import duckdb
import pytest

from freight_pipeline.cli import main
from freight_pipeline.config import LAKE_CATALOG_URI_ENV, LAKE_DATA_URI_ENV
from freight_pipeline.lake.backend import LakeBackend
from freight_pipeline.lake.connect import LakeUnavailable
from freight_pipeline.lake.settings import LakeSettings
from freight_pipeline.normalize.tables import FREIGHT_TABLES
from freight_pipeline.warehouse.store import Warehouse

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("duckdb_extension_ducklake") is not None,
    reason="about the default environment; this one is the lake environment (make setup-lake)",
)


def test_the_default_environment_has_duckdb_2() -> None:
    assert duckdb.__version__.split(".")[0] == "2"


def test_lake_mode_names_the_lake_environment(tmp_path: Path) -> None:
    catalog = tmp_path / "catalog.sqlite"
    lake = LakeSettings.configured({LAKE_CATALOG_URI_ENV: f"sqlite:///{catalog}",
                                  LAKE_DATA_URI_ENV: str(tmp_path / "lake")})
    with pytest.raises(LakeUnavailable) as raised:
        Warehouse(tmp_path / "data", FREIGHT_TABLES, backend=LakeBackend(lake))
    message = str(raised.value)
    assert "make setup-lake" in message and "constraints-lake.txt" in message
    assert f"duckdb {duckdb.__version__}" in message
    assert not catalog.exists() and not (tmp_path / "lake").exists()


def test_the_command_says_so_without_a_traceback(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv(LAKE_CATALOG_URI_ENV, f"sqlite:///{tmp_path / 'catalog.sqlite'}")
    monkeypatch.setenv(LAKE_DATA_URI_ENV, str(tmp_path / "lake"))
    assert main(["status", "--data-dir", str(tmp_path / "data")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("freight-pipeline status: lake mode needs") and "make setup-lake" in err
    assert "Traceback" not in err
