"""Paths of the dbt project and a ``dbt`` command runner for the tests.

Every dbt run of the tests writes its target (manifest, run results, partial parse) AND its log
(``dbt.log``) under a temporary directory: without ``--log-path`` dbt writes
``dbt_models/logs/dbt.log`` into the repository.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from freight_pipeline.config import REPO_ROOT, MartsSettings
from freight_pipeline.marts.project import LOG_FILE_LEVEL
from freight_pipeline.marts.worker import REPLY
from freight_pipeline.marts.worker_server import forked_worker

DBT_DIR = REPO_ROOT / "dbt_models"
DBT = str(Path(sys.executable).with_name("dbt"))


def run_dbt(
    args: list[str], tmp: Path, database: Path, *, timeout: float = 180
) -> tuple[subprocess.CompletedProcess[str], Path]:
    """Run ``dbt <args>`` on the project with target and log paths under ``tmp``, as the ``dbt`` command (for
    the commands whose JSON artifacts a test reads: the worker writes none but the results).

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


def run_dbt_in_worker(
    args: list[str], tmp: Path, database: Path, *, timeout: float = 180
) -> tuple[subprocess.CompletedProcess[str], Path]:
    """Run ``dbt <args>`` (a build or a run) on the project with its target and log under
    ``tmp / "target"``, through the pipeline's dbt worker (``freight_pipeline.marts.worker``: dbt's own
    runner, on the parse every data directory shares, so a test's first command is not a full parse of
    about 8 s of CPU; forked by the suite's fork server of dbt workers when it runs, as the pipeline's are). Its
    log file keeps info and above, as the pipeline's builds' (its debug lines cost the dbt tests 5 % of their CPU).

    Returns the finished command (its exit code, dbt's; its stdout, the worker's output and dbt's error)
    and the target path. Asserts that dbt logged into the target, so a run that wrote its log elsewhere
    (into the repository) fails the calling test.
    """
    target = tmp / "target"
    target.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "FREIGHT_DBT_DATABASE": str(database), "DBT_SEND_ANONYMOUS_USAGE_STATS": "false"}
    output = target / "worker-output.log"
    argv = ["--project-dir", str(DBT_DIR), "--target", str(target)]
    with output.open("w") as out:
        worker = forked_worker(argv, env, out, MartsSettings.configured().dbt_worker_server) or subprocess.Popen(
            [sys.executable, "-m", "freight_pipeline.marts.worker", *argv], stdin=subprocess.PIPE, stdout=out,
            stderr=subprocess.STDOUT, env=env, text=True,
        )
    assert worker.stdin is not None
    try:
        worker.stdin.write(json.dumps({"args": [*args, *LOG_FILE_LEVEL], "env": {}}) + "\n")
        worker.stdin.flush()  # its input stays open until it is done: the end of its input ends it at once
        worker.wait(timeout=timeout)
    finally:
        worker.kill()
        worker.stdin.close()
    reply = json.loads((target / REPLY).read_text())
    result = subprocess.CompletedProcess(args, reply["exit_code"], output.read_text() + (reply["error"] or ""), "")
    assert (target / "dbt.log").is_file(), f"dbt did not log into {target}"
    return result, target
