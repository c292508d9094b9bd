"""The end of a process this package runs as its own program (the ``freight-pipeline`` command, the dbt workers'
server): what the interpreter's exit does for the program, without its teardown of every module and object."""

from __future__ import annotations

import atexit
import contextlib
import os
import sys
import threading
from typing import NoReturn


def exit_now(code: int) -> NoReturn:
    """End the process with ``code`` as the interpreter's exit would, in its order: the threads' end awaited
    (``threading._shutdown``, which ``Py_FinalizeEx`` calls first: the executors told to stop, every thread that is
    not a daemon joined), the ``atexit`` callbacks run (logging flushed, multiprocessing's children ended, weakref
    finalizers such as temporary directories'), the standard streams flushed. Left out is the teardown after that,
    the garbage collector's passes over every object the run loaded, measured at a slow hour: with Dagster's
    definitions imported (200,000 objects) 3.7-8.1 s of CPU after the work was done, a sync without Dagster 1.3-1.8 s,
    the dbt workers' server with dbt's parsed project 13-18 s (``bench/log.md``, twenty-eighth round)."""
    threading._shutdown()  # type: ignore[attr-defined]  # the interpreter's own first step of its exit
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(code)
