"""Parse the dbt project for a data directory in the background, while the sync runs.

dbt re-parses the whole project (about 4 s) when its partial-parse file was written for another
profile, and the profile names the DuckDB file: so the first build of every data directory starts
with a full parse. The sync asset starts that parse in a child process at its beginning (only when
the data directory has no partial-parse file yet); the dbt asset waits for it (a file lock, held by
the parse, serializes the two even across processes) and then finds the file in place. With a
service across the internet the sync waits on the network, so the parse costs no time at all.
"""

from __future__ import annotations

import fcntl
import os
import subprocess
from collections.abc import Sequence
from pathlib import Path

from freight_pipeline.marts.project import dbt_executable, project_args
from freight_pipeline.marts.worker import LOCK

PARTIAL_PARSE = "partial_parse.msgpack"


def start_parse(project_dir: Path, target: Path, database: Path, env_name: str, args: Sequence[str]) -> bool:
    """Start ``dbt parse`` into ``target`` for ``database`` unless its partial-parse file exists or
    a parse already runs; the child holds the lock until it ends. True when a parse was started."""
    if (target / PARTIAL_PARSE).exists():
        return False
    target.mkdir(parents=True, exist_ok=True)
    lock = open(target / LOCK, "a+")  # noqa: SIM115 - handed over to the child, closed here after
    try:
        try:
            fcntl.flock(lock.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        env = {**os.environ, env_name: str(database), "DBT_SEND_ANONYMOUS_USAGE_STATS": "false"}
        command = [dbt_executable(), "parse", "--quiet", *project_args(project_dir, target), *args]
        # the child inherits the locked descriptor: the lock is released when the parse ends
        subprocess.Popen(command, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL, pass_fds=(lock.fileno(),), start_new_session=True)
        return True
    finally:
        lock.close()


def wait_for_parse(target: Path) -> None:
    """Block until no background parse of ``target`` runs (returns at once when none does)."""
    if not target.exists():
        return
    with open(target / LOCK, "a+") as lock:
        fcntl.flock(lock.fileno(), fcntl.LOCK_EX)
        fcntl.flock(lock.fileno(), fcntl.LOCK_UN)
