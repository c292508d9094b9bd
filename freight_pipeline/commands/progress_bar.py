"""What ``freight-pipeline sync`` shows of a run's progress on stderr: each stream's tally (``sync.progress.Tally``).

On a terminal, a progress bar per stream (rich): done of the total the stream announced, the share, the
rate, the time left, requests and retries so far; the command's own lines scroll above the bars. Into a
pipe or a log, plain lines instead (``sync.progress.TallyLines``): each stream's first at once, then at
most one per 15 s per stream, and its last. The bars are redrawn a few times a second by rich's own
thread, whatever the number of batches; a tally only moves numbers (one per committed batch). Nothing
of a tally can carry a secret (numbers and a stream's name); the plain lines are redacted all the same,
as every line the command says.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from freight_pipeline.commands.common import redact, say
from freight_pipeline.sync.progress import Tally, TallyLines, requests_and_retries, tallies_to

if TYPE_CHECKING:
    from rich.progress import Progress, Task, TaskID

LINES_EVERY_S = 15.0
"""Plain lines (not a terminal): at most one per stream per this many seconds, besides its first and last."""
REFRESHES_PER_S = 4
"""How often the bars are redrawn on a terminal."""


def on_terminal() -> bool:
    """stderr (where the command says everything) is a terminal that can redraw a line."""
    return sys.stderr.isatty() and os.environ.get("TERM", "") != "dumb"


@contextmanager
def shown_progress(*secrets: str | None) -> Iterator[None]:
    """For the block (a job run in this process, with Dagster or without): the streams' tallies shown on
    stderr, as bars on a terminal, else as throttled plain lines."""
    if not on_terminal():
        with tallies_to(TallyLines(lambda line: say(redact(f"    {line}", *secrets)), LINES_EVERY_S)):
            yield
        return
    progress = bars_display()
    with progress, tallies_to(Bars(progress)):
        yield


class Bars:
    """A tally listener that moves one bar per stream of a rich ``Progress``."""

    def __init__(self, progress: Progress) -> None:
        self.progress = progress
        self._tasks: dict[str, TaskID] = {}
        self._lock = threading.Lock()

    def __call__(self, tally: Tally) -> None:
        fields = {"unit": tally.unit, "final": tally.total_final, "work": requests_and_retries(tally),
                  "seconds": tally.seconds}
        with self._lock:
            task = self._tasks.get(tally.stream)
            if task is None:  # added empty, then moved: rich marks a task finished only when it is moved
                task = self._tasks[tally.stream] = self.progress.add_task(tally.stream, total=tally.total, **fields)
        self.progress.update(task, total=tally.total, completed=tally.done, **fields)


def bars_display() -> Progress:
    """The bars' display on stderr (stdout stays the command's output), redrawn ``REFRESHES_PER_S`` times a second."""
    from rich.console import Console
    from rich.progress import BarColumn, Progress, ProgressColumn, TaskProgressColumn, TextColumn
    from rich.text import Text

    class Count(ProgressColumn):
        """``1,200/20,000 shipments`` (``/~20,000``: the total can still grow)."""

        def render(self, task: Task) -> Text:
            unit = task.fields.get("unit", "")
            if task.total is None:
                return Text(f"{task.completed:,.0f} {unit}", style="progress.download")
            about = "" if task.fields.get("final") else "~"
            return Text(f"{task.completed:,.0f}/{about}{task.total:,.0f} {unit}", style="progress.download")

    class Rate(ProgressColumn):
        """Done per second: over rich's last 30 s of updates, else since the stream began."""

        def render(self, task: Task) -> Text:
            per_second = _speed(task)
            return Text(f"{per_second:,.1f}/s" if per_second else "-/s", style="progress.data.speed")

    class Left(ProgressColumn):
        """The time left at the current rate (``~`` while the total can grow); the time taken once finished."""

        max_refresh = 0.5

        def render(self, task: Task) -> Text:
            if task.finished:
                return Text(f"took {_clock(task.fields.get('seconds', task.elapsed or 0.0))}", style="progress.elapsed")
            per_second = _speed(task)
            if task.total is None or not per_second:
                return Text("left -:--", style="progress.remaining")
            about = "" if task.fields.get("final") else "~"
            return Text(f"{about}{_clock((task.total - task.completed) / per_second)} left", style="progress.remaining")

    return Progress(
        TextColumn("{task.description:<16}"), BarColumn(bar_width=30), Count(), TaskProgressColumn(), Rate(),
        Left(), TextColumn("{task.fields[work]}"),
        console=Console(stderr=True), refresh_per_second=REFRESHES_PER_S, redirect_stdout=False,
    )


def _speed(task: Task) -> float | None:
    """Done per second: rich's estimate (the updates of the last 30 s), else the average since the stream began."""
    if task.speed:
        return float(task.speed)
    seconds = task.fields.get("seconds") or 0.0
    return task.completed / seconds if seconds > 0 and task.completed else None


def _clock(seconds: float) -> str:
    """``0:07``, ``7:05``, ``1:02:05``."""
    minutes, secs = divmod(max(0, round(seconds)), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"
