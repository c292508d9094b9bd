"""The bars ``freight-pipeline sync`` draws on a terminal from the streams' tallies (rendered into a recording
console here; the command itself in a pseudo-terminal: test_sync_progress.py), and the plain lines it says
instead when stderr is not a terminal."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from freight_pipeline.commands.progress_bar import Bars, bars_display, shown_progress
from freight_pipeline.sync.progress import Meter, Tally


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def drawn(bars: Bars) -> list[str]:
    """The bars as the terminal shows them now."""
    console = Console(file=io.StringIO(), width=160, force_terminal=False, color_system=None)
    console.print(bars.progress.make_tasks_table(bars.progress.tasks))
    return [line.rstrip() for line in console.file.getvalue().splitlines()]  # type: ignore[attr-defined]


def test_a_bar_per_stream_shows_done_of_the_total_the_rate_the_time_left_requests_and_retries() -> None:
    clock = Clock()
    progress = bars_display()
    progress.get_time = clock  # type: ignore[method-assign]  # rich's own clock: the rate over its samples
    bars = Bars(progress)
    bars(Tally("shipments", "shipments", 0, None, False, 3, 0, 0.5))
    assert drawn(bars)[0].split() == ["shipments", "━" * 30, "0", "shipments", "-/s", "left", "-:--", "3",
                                      "requests,", "0", "retries"]
    bars(Tally("shipments", "shipments", 0, 20_000, True, 3, 0, 0.5))
    for second in range(1, 11):
        clock.now = float(second)
        bars(Tally("shipments", "shipments", 40 * second, 20_000, True, 160 * second, second // 4, second + 0.5))
    line = drawn(bars)[0]
    assert "400/20,000 shipments" in line and "  2%" in line and "40.0/s" in line
    assert "8:10 left" in line  # 19,600 shipments at 40 a second
    assert line.endswith("1,600 requests, 2 retries")
    bars(Tally("shipments", "shipments", 120, 500, False, 500, 0, 3.0))  # a total that can still grow: ~
    assert "120/~500 shipments" in drawn(bars)[0] and "~" in drawn(bars)[0].split("/s")[1]
    bars(Tally("code_conversions", "conversions", 376, 376, True, 1, 0, 0.4, ended=True))
    assert drawn(bars)[1].split()[:7] == ["code_conversions", "━" * 30, "376/376", "conversions", "100%",
                                          "940.0/s", "took"]
    assert drawn(bars)[1].split()[-5:] == ["0:00", "1", "request,", "0", "retries"]


def test_into_a_pipe_the_tallies_are_plain_lines_and_secrets_are_redacted(capsys: pytest.CaptureFixture[str]) -> None:
    with shown_progress("shipments"):  # a "secret" the line holds: redacted as every line the command says
        meter = Meter("shipments", lambda: (0, 0))
        meter.announce(10, final=True)
        meter.advance(5)  # within 15 s of the first line: not said
        meter.end()
    Meter("shipments", lambda: (0, 0)).end()  # after the block: not said
    err = capsys.readouterr().err
    assert [line.split(" ")[:6] for line in err.splitlines()] == [["", "", "", "", "***:", "0"],
                                                                  ["", "", "", "", "***:", "5"]]
    assert "shipments" not in err
