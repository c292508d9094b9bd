"""Paths of the dbt project and a ``dbt`` command runner for the tests.

Every dbt run of the tests writes its target (manifest, run results, partial parse) AND its log
(``dbt.log``) under a temporary directory: without ``--log-path`` dbt writes
``dbt_models/logs/dbt.log`` into the repository.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from freight_pipeline.config import REPO_ROOT

DBT_DIR = REPO_ROOT / "dbt_models"
DBT = str(Path(sys.executable).with_name("dbt"))


def run_dbt(
    args: list[str], tmp: Path, database: Path, *, timeout: float = 180
) -> tuple[subprocess.CompletedProcess[str], Path]:
    """Run ``dbt <args>`` on the project with target and log paths under ``tmp``.

    Returns the finished process and the target path. Asserts that dbt logged into ``tmp``, so a
    run that wrote its log elsewhere (into the repository) fails the calling test.
    """
    target, logs = tmp / "target", tmp / "logs"
    env = {**os.environ, "FREIGHT_DBT_DATABASE": str(database)}
    result = subprocess.run(
        [
            DBT,
            *args,
            "--project-dir",
            str(DBT_DIR),
            "--profiles-dir",
            str(DBT_DIR),
            "--target-path",
            str(target),
            "--log-path",
            str(logs),
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    assert (logs / "dbt.log").is_file(), f"dbt did not log into {logs}"
    return result, target
