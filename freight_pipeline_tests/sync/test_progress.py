"""A run's progress: the streams' meters and their tallies, the plain lines they make (throttled per stream, on a
fake clock), the change walk's announced total."""

from __future__ import annotations

import asyncio
from typing import Any

from freight_pipeline.datetimes import ServiceZone
from freight_pipeline.sync.changes import Criterion, LookupResult, WalkStats, walk_changes
from freight_pipeline.sync.cursor import BEGINNING, ShipmentKey
from freight_pipeline.sync.progress import Meter, Tally, TallyLines, tallies_to, tally_line


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Counts:
    """A source's (requests, retries) so far."""

    def __init__(self) -> None:
        self.requests, self.retries = 7, 1

    def __call__(self) -> tuple[int, int]:
        return self.requests, self.retries


def test_a_meter_tells_its_listeners_what_its_stream_did_since_it_began() -> None:
    clock, counts, heard = Clock(), Counts(), []
    meter = Meter("shipments", counts, clock=clock)
    meter.advance(5)  # nobody listens: counted, told to no one
    with tallies_to(heard.append):
        counts.requests, counts.retries, clock.now = 57, 3, 1002.0
        meter.announce(300, final=True)
        meter.announce(300, final=True)  # the same total again: nothing new to tell
        meter.advance(10)
        meter.expect(4)  # the retry queue's shipments, listed after the walk
        meter.end()
    meter.advance(1)  # the listener is gone
    assert heard == [
        Tally("shipments", "shipments", 5, 300, True, 50, 2, 2.0),
        Tally("shipments", "shipments", 15, 300, True, 50, 2, 2.0),
        Tally("shipments", "shipments", 15, 304, True, 50, 2, 2.0),
        # its last: the total is what it did
        Tally("shipments", "shipments", 15, 15, True, 50, 2, 2.0, ended=True),
    ]


def test_a_total_that_can_grow_is_said_so_and_gives_no_time_left() -> None:
    growing = Tally("shipments", "shipments", 100, 400, False, 420, 0, 10.0)
    assert tally_line(growing) == "shipments: 100 of ~400 shipments (25 %), 10 shipments/s; 420 requests, 0 retries"
    known = Tally("shipments", "shipments", 1200, 20000, True, 4810, 1, 60.0)
    assert tally_line(known) == ("shipments: 1,200 of 20,000 shipments (6 %), 20 shipments/s, about 15 min 40 s left; "
                                 "4,810 requests, 1 retry")
    assert tally_line(Tally("documents", "shipments", 0, 300, True, 0, 0, 0.1)) == (
        "documents: 0 of 300 shipments (0 %); 0 requests, 0 retries")
    ended = Tally("code_conversions", "conversions", 376, 376, True, 1, 0, 0.5, ended=True)
    assert tally_line(ended) == ("code_conversions: 376 conversions done in 0.5 s, 752 conversions/s; 1 request, "
                                 "0 retries")


def test_plain_lines_come_at_most_one_per_interval_per_stream_besides_each_stream_s_first_and_last() -> None:
    clock, said = Clock(), []
    lines = TallyLines(said.append, every_s=15.0, clock=clock)

    def tally(stream: str, done: int, ended: bool = False) -> Tally:
        return Tally(stream, "shipments", done, 1000, True, done * 4, 0, clock.now - 1000.0 + 1.0, ended)

    for second in range(0, 40):  # a batch of each stream every second
        clock.now = 1000.0 + second
        lines(tally("shipments", second * 10))
        lines(tally("documents", second * 5))
    lines(tally("shipments", 400, ended=True))
    clock.now += 0.5
    lines(tally("documents", 200, ended=True))
    by_stream = {stream: [line for line in said if line.startswith(f"{stream}:")] for stream in ("shipments",
                                                                                                 "documents")}
    # seconds 0, 15, 30 and the last: one line per 15 s of each stream, and its last line
    assert [line.split(" of ")[0] for line in by_stream["shipments"][:3]] == [
        "shipments: 0", "shipments: 150", "shipments: 300"]
    assert len(by_stream["shipments"]) == len(by_stream["documents"]) == 4
    assert by_stream["shipments"][-1].startswith("shipments: 400 shipments done in ")
    assert len(said) == 8


def _shipment(shipment_id: int, date: str, time: str) -> dict[str, Any]:
    return {"id": shipment_id, "last_modified_date_time": f"{date}T{time}+01:00"}


def test_the_walk_announces_the_rows_its_lookups_count_final_once_a_query_reaches_the_ceiling() -> None:
    """A walk from the beginning: the lookup of the following days up to the ceiling counts every shipment
    (its ``X-Row-Count``); from a cursor, the rest of its day is a lower bound until a query reaches it."""
    rows = [(d, f"10:00:{s:02d}", i) for i, (d, s) in enumerate(
        [("2024-03-01", 1), ("2024-03-01", 2), ("2024-03-02", 1), ("2024-03-02", 2), ("2024-03-03", 1)], start=1)]

    def matches(row: tuple[str, str, int], criterion: Criterion) -> bool:
        value = {"LAST_MODIFIED_DATE": row[0], "LAST_MODIFIED_TIME": row[1], "ID": row[2]}[criterion["key"]]
        wanted = type(value)(criterion["value"])
        return {"EQUALS": value == wanted, "GT": value > wanted, "LE": value <= wanted}[criterion["match_mode"]]

    async def lookup(criteria: list[Criterion], order_by: list[str], order_mode: list[str],
                     page_size: int) -> LookupResult:
        found = sorted(row for row in rows if all(matches(row, c) for c in criteria))
        return LookupResult([_shipment(i, d, t) for d, t, i in found[:page_size]], len(found))

    async def walk(after: ShipmentKey, stats: WalkStats) -> list[tuple[int | None, bool]]:
        announced = []
        ceiling = ShipmentKey("2024-03-03", "10:00:01", 2**63 - 1)
        async for _ in walk_changes(lookup, after, ceiling, ServiceZone(), page_size=2, stats=stats):
            announced.append((stats.total, stats.total_final))
        return announced

    assert asyncio.run(walk(BEGINNING, WalkStats())) == [(5, True), (5, True), (5, True)]
    from_cursor = WalkStats()
    assert asyncio.run(walk(ShipmentKey("2024-03-01", "10:00:01", 1), from_cursor)) == [(1, False), (4, True),
                                                                                        (4, True)]
    assert from_cursor.seen == from_cursor.total == 4  # the walk read the 4 after the cursor
