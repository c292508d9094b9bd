"""The dbt worker: a process that gets dbt ready while the sync runs, then runs at most one command.

``python -m freight_pipeline.marts.worker --target DIR [--vars JSON]``, started by
:class:`freight_pipeline.marts.build.DbtWorker` when a run begins. dbt's fixed cost (importing it and
loading the project: about 3 s of CPU, more than a whole incremental build's models and tests) is paid
here, on the machine's other core, while the sync waits on the service or writes on this one:

1. it imports dbt and parses the project into ``DIR`` (partial parse: the manifest is read, not made;
   serialized with any other parse of ``DIR`` by :data:`LOCK`); the
   parse opens no database, so the sync keeps its write lock on the working file;
2. it waits for one request on stdin, a JSON line ``{"args": [...], "env": {...}}``: ``dbt <args>``,
   with ``env`` added to its environment;
3. it runs the command in this process (``dbtRunner``) and writes :data:`REPLY` into ``DIR``:
   ``{"success": bool, "exit_code": int, "error": str | null}`` (dbt's exit codes: 1 for failed nodes,
   2 for an error before or around them); the nodes' results are dbt's ``run_results.json`` there.

The end of its input ends it at once, wherever it is: before a request, the run needs no build (a
parse cut short is redone by the next one: dbt parses again when its partial-parse file does not
load); during the command, the run that asked for it is gone (killed), and the worker does not
write the working database behind the back of the next run (DuckDB rolls the unfinished
transaction back). Its own output (dbt prints only errors with ``--quiet``)
goes where the parent sends it: :data:`LOG` in ``DIR``.

Nothing of the pipeline's is imported here but :mod:`freight_pipeline.marts.project` (no heavy
imports): the worker pays for dbt alone (dbt-duckdb imports the lake's plugin itself when the
profile's target names it).
"""

from __future__ import annotations

import argparse
import fcntl
import json
import os
import queue
import sys
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from freight_pipeline.marts.project import LOG_FILE_LEVEL, project_args

LOCK = ".freight-parse.lock"
"""The lock of every parse into a target directory (this worker's and ``marts.warmup``'s)."""
REPLY = "worker-reply.json"
LOG = "worker.log"
QUIET = ["--quiet", "--no-use-colors"]
"""Flags of every command the worker runs: dbt logs to its file, the terminal gets errors only."""


def _read_requests(requests: queue.Queue[str]) -> None:
    """Hand the first line of stdin to the main thread, then read to the end of input and end the
    process there: the parent no longer wants a build (no request came), or is gone (one is running)."""
    requests.put(sys.stdin.readline())
    sys.stdin.read()
    os._exit(0)


def _warm_up(runner: Any, project_dir: Path, target: Path, vars_args: Sequence[str]) -> None:
    """Parse the project into ``target`` (a partial parse: fast when nothing changed), under the parse lock."""
    target.mkdir(parents=True, exist_ok=True)
    with open(target / LOCK, "a+") as lock:
        fcntl.flock(lock.fileno(), fcntl.LOCK_EX)
        try:
            runner.invoke(["parse", *LOG_FILE_LEVEL, *QUIET, *project_args(project_dir, target), *vars_args])
        finally:
            fcntl.flock(lock.fileno(), fcntl.LOCK_UN)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--project-dir", type=Path, required=True)
    parser.add_argument("--target", type=Path, required=True)
    parser.add_argument("--vars", default=None, help="the --vars the build will pass (the parse must match)")
    options = parser.parse_args(argv)
    vars_args = ["--vars", options.vars] if options.vars else []

    requests: queue.Queue[str] = queue.Queue()
    threading.Thread(target=_read_requests, args=(requests,), daemon=True).start()

    from dbt.cli.main import dbtRunner

    runner = dbtRunner()
    _warm_up(runner, options.project_dir, options.target, vars_args)
    line = requests.get()
    if not line.strip():
        return 0  # no build asked for (the reader ends the process meanwhile)
    request = json.loads(line)
    os.environ.update(request.get("env") or {})
    reply = options.target / REPLY
    reply.unlink(missing_ok=True)
    args = [*request["args"], *QUIET, *project_args(options.project_dir, options.target)]
    try:
        result = runner.invoke(args)
        error = result.exception
        answer = {"success": bool(result.success), "exit_code": 0 if result.success else 2 if error else 1,
                  "error": None if error is None else f"{type(error).__name__}: {error}"}
    except Exception as exc:  # dbt raised instead of reporting: said in the reply all the same
        answer = {"success": False, "exit_code": 2, "error": f"{type(exc).__name__}: {exc}"}
    reply.write_text(json.dumps(answer))
    return 0


if __name__ == "__main__":
    sys.exit(main())
