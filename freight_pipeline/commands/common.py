"""Small helpers shared by the commands: the data directory, stderr progress, secret redaction."""

from __future__ import annotations

import argparse
import contextlib
import importlib.abc
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

from freight_pipeline.config import DATA_DIR_ENV, Settings, StorageSettings

if TYPE_CHECKING:
    from freight_pipeline.alerts.notify import Alerted
    from freight_pipeline.job.run import JobReport


def add_data_dir_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--data-dir",
        type=Path,
        default=None,
        help=f"where the warehouse lives (default: the setting data_dir: ${DATA_DIR_ENV}, the settings file, "
             f"else {StorageSettings().data_dir})",
    )


def resolve_data_dir(arg: Path | None, settings: Settings | None = None) -> Path:
    """``--data-dir`` if given, else the setting ``data_dir`` (of ``settings`` when given: a look's, else read:
    ``$FREIGHT_DATA_DIR``, the settings file, else ``./data``); made absolute."""
    if arg is not None:
        raw = arg
    else:
        raw = (settings.storage if settings is not None else StorageSettings.configured()).data_dir
    return Path(raw).expanduser().resolve()


def say_unknown(command: str, settings: Settings) -> None:
    """Each ``FREIGHT_*`` variable no setting reads (a typo?) on stderr, after ``command:``: a warning, not a
    refusal (a variable of a newer or older release than this one)."""
    for line in settings.unknown_variable_lines():
        say(f"{command}: {line}")


def say_bad(command: str, problems: Exception) -> None:
    """Each line of ``problems`` (a bad setup: one line per bad setting) on stderr, after ``command:``."""
    for line in str(problems).splitlines():
        say(f"{command}: {line}")


SKIPPED = 75
"""Exit code of a run skipped because another run writes the warehouse (``EX_TEMPFAIL``: try again later):
neither a success nor a failure, for cron wrappers and alerts (``warehouse.writer_lock``)."""


def add_wait_argument(parser: argparse.ArgumentParser) -> None:
    from freight_pipeline.warehouse.writer_lock import wait_seconds

    parser.add_argument("--wait", type=wait_seconds, default=0.0, metavar="SECONDS",
                        help="when another run writes this warehouse, wait up to this long for it (default: skip "
                             f"at once, exit {SKIPPED})")


def holding_writer_lock(held: contextlib.ExitStack, command: str, data_dir: Path, run_id: str, wait: float) -> bool:
    """``data_dir``'s writer lock taken for run ``run_id`` until ``held`` closes (the job's engine, run by this
    process as that run, takes it again at once); False, when another run holds it (for longer than ``wait``
    seconds), and one line said which: ``sync: skipped: another run writes /data: run ..., process 4242 on
    host-a, since ...; --wait SECONDS waits for it (exit 75: not a failure)``."""
    from freight_pipeline.warehouse.writer_lock import WarehouseBusy, writer_lock

    try:
        held.enter_context(writer_lock(data_dir, run_id, wait=wait))
    except WarehouseBusy as busy:
        hint = "" if wait else "; --wait SECONDS waits for it"
        say(f"{command}: skipped: {busy}{hint} (exit {SKIPPED}: not a failure)")
        return False
    return True


class StoppedIn(KeyboardInterrupt):
    """Ctrl-C or SIGTERM stopped a run ``where`` it was: said with what of it is kept, after how it was stopped
    (``freight-pipeline``)."""

    def __init__(self, where: str) -> None:
        super().__init__(f"{where}: every batch it committed before is kept, the next run goes on from the last")


def step_in_flight(plan: Sequence[str], said: Sequence[str], *, failed: Sequence[str] | None = None) -> str:
    """Where a stop found a run whose steps run one after the other in the order of ``plan``, those ``said``
    ended: ``in step`` the first not said yet. ``failed``, the steps that failed of a run that came to its end
    though a stop came (a DuckDB query takes it as its own error, ``Query interrupted``, which fails the step it
    is in): the last of them, else after the last step."""
    if failed is not None:
        step = failed[-1] if failed else None
    else:
        step = next((name for name in plan if name not in said), None)
    return f"in step {step}" if step is not None else "after its last step"


def stopped_as_such(plan: Sequence[str], said: Sequence[str], run: Callable[[], JobReport]) -> JobReport:
    """``run()``'s report, a run whose steps (``plan``, those ``said`` ended) a stop ends raising :class:`StoppedIn`,
    naming where: the step it was in (the lock and the workers let go as its blocks ended), or, when a DuckDB query
    took the stop as its own error (``Query interrupted``) and the run came to its end, the step that failed."""
    from freight_pipeline.job.run import StopNoticed
    from freight_pipeline.process_end import signals_noted

    try:
        with signals_noted() as stopped:
            report = run()
    except StopNoticed as noticed:  # between steps: in the one that failed of it, if one did
        raise StoppedIn(step_in_flight(plan, said, failed=noticed.failed or None)) from None
    except KeyboardInterrupt:  # Ctrl-C or SIGTERM
        raise StoppedIn(step_in_flight(plan, said)) from None
    if stopped:  # the run ends as stopped, not as failed
        raise StoppedIn(step_in_flight(plan, said, failed=[step.name for step in report.failed]))
    return report


def say(message: str) -> None:
    """One progress line on stderr, flushed at once, in one write: a Dagster run says lines from more than one
    thread, and ``print`` writes a line and its newline apart, so two lines could run into one."""
    sys.stderr.write(message + "\n")
    sys.stderr.flush()


@contextlib.contextmanager
def alerts_sent(alerted: Alerted | None) -> Iterator[None]:
    """What the run did with its problems said first; after the block, its sends waited for (each destination
    at most its timeout) and what became of them said: the process ends once they are."""
    if alerted is None:
        yield
        return
    say(alerted.line)
    try:
        yield
    finally:
        if undelivered := alerted.undelivered():
            say(undelivered)


def redact(text: str, *secrets: str | None) -> str:
    """``text`` with every non-trivial secret replaced by ``***``."""
    for secret in secrets:
        if secret and len(secret) >= 3:
            text = text.replace(secret, "***")
    return text


class Stopwatch:
    """Seconds since construction."""

    def __init__(self) -> None:
        self.started = time.monotonic()

    @property
    def seconds(self) -> float:
        return time.monotonic() - self.started


class _PandasLeftOut(importlib.abc.MetaPathFinder):
    """Refuses to import pandas, as if it were not installed (:func:`without_pandas`)."""

    def find_spec(self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None) -> None:
        if fullname.partition(".")[0] == "pandas":
            raise ModuleNotFoundError(f"no module named {fullname!r}: pandas is left out of `freight-pipeline sync` "
                                      "(freight_pipeline.commands.common.without_pandas)", name=fullname)


def without_pandas() -> None:
    """Make pandas unimportable in this process, as if it were not installed, unless it is imported already.
    pyarrow imports it (0.3-0.5 s) at its first conversion of a Python list, only to tell whether it was handed
    a pandas object, which the sync never does; pyarrow and DuckDB work without it, and code that does need
    pandas fails naming it. For a command that runs the job, without Dagster or as a Dagster run in its own process
    (neither Dagster, dagster-dbt nor the job imports pandas; the dashboard does, in a process of its own)."""
    if "pandas" not in sys.modules and not any(isinstance(f, _PandasLeftOut) for f in sys.meta_path):
        sys.meta_path.insert(0, _PandasLeftOut())
