"""Estimates revised as a shipment progresses: its milestone timeline after a change.

A generated shipment starts with its identity's timeline (:class:`~.data_identity.Milestone`:
the planned instant is the estimate, the actual instant is what will happen). Each time the
simulator changes the shipment, the estimate of every main-carriage and delivery milestone still
to come may be revised (:func:`revised_milestones`): toward the actual, with an error that shrinks
as the actual draws near, so estimates move several times, later (slips) and earlier, and the
actual lands close to the last one (hours to a few days off at sea and by rail, hours by air and
road). :func:`moved_milestone` sets one milestone's estimate or actual on demand (a test hook).

The service also reports a revised date of the main-carriage departure and arrival (REVISED_DATE_CODES:
a ``<code>_REVISED`` event, and the leg's ``revised_datetime``). It belongs to the shipment, not to a
version: a shipment starts with the dates :func:`first_revised_dates` draws (when it is generated), and
they move only when an estimate does (:func:`revised_dates_after`: the revised date of a milestone whose
estimate moved is its new estimate); a change that revises nothing leaves them as they were.

All draws come from the ``rng`` the caller seeds, so the same shipment, version and instant give
the same revision.
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Callable

from freight_pipeline.simulator.data_identity import HOUR, Milestone

REVISED_CODES = frozenset(
    {"DISPATCH", "POL_DEPARTURE", "TRANSSHIPMENT_ARRIVAL", "TRANSSHIPMENT_DEPARTURE", "POD_ARRIVAL", "DELIVERY_DATE"}
)
"""Milestones whose estimate the simulator revises: main-carriage departures and arrivals, delivery."""
REVISE_SHARE = 0.6
"""Chance that a change of the shipment revises the estimate of one such milestone still to come."""
PERSISTENCE = 0.5
"""Share of the current estimate's error a revision keeps (the rest is new information)."""
ERROR_FLOOR_HOURS = {"SEA": 18.0, "RL": 14.0, "AIR": 1.5, "RD": 1.0}
"""Standard deviation (hours) of a fresh estimate's error, however close the actual is, by mode ..."""
ERROR_SHARE_OF_TIME_TO_GO = {"SEA": 0.06, "RL": 0.06, "AIR": 0.08, "RD": 0.08}
"""... plus this share of the time still to go until the actual."""
ESTIMATE_STEP = 300
"""Estimates are whole five minutes, like the planned instants."""
MIN_LEAD = 15 * 60
"""A revised estimate lies at least this long after the revision."""

REVISED_DATE_CODES = ("POL_DEPARTURE", "POD_ARRIVAL")
"""Milestones with a revised date: a ``<code>_REVISED`` event (ESTIMATED) and the leg end's ``revised_datetime``."""
FIRST_REVISED_SHARE = 0.3
"""Chance that a generated shipment has a revised date for one such milestone still to come."""

RevisedDates = tuple[tuple[str, int], ...]
"""A shipment's revised dates: (``<code>_REVISED``, epoch seconds), in REVISED_DATE_CODES order."""


def revised_milestones(
    milestones: tuple[Milestone, ...], mode: str, now: int, rng: random.Random
) -> tuple[Milestone, ...] | None:
    """The timeline after a change of the shipment at ``now`` (epoch seconds); None when no estimate moved.

    Each milestone of REVISED_CODES whose actual lies after ``now`` is revised with chance
    REVISE_SHARE: the new error (estimate - actual) keeps PERSISTENCE of the old one and adds a
    normal draw whose spread is ERROR_FLOOR_HOURS plus ERROR_SHARE_OF_TIME_TO_GO of the time to go.
    The new estimate is whole five minutes, at least MIN_LEAD after ``now`` and never the actual itself.
    """
    timeline = list(milestones)
    moved = False
    for index, milestone in enumerate(milestones):
        if milestone.code not in REVISED_CODES or milestone.actual <= now or rng.random() >= REVISE_SHARE:
            continue
        estimate = _next_estimate(milestone, mode, now, rng)
        if estimate != milestone.planned:
            timeline[index] = _with_estimate(milestone, estimate)
            moved = True
    return tuple(timeline) if moved else None


def moved_milestone(milestones: tuple[Milestone, ...], code: str, event_type: str, at: int) -> tuple[Milestone, ...]:
    """The timeline with milestone ``code``'s estimate (``ESTIMATED``) or actual (``ACTUAL``) at ``at``.

    Raises ValueError when the timeline has no such milestone or the type is neither.
    """
    if event_type not in ("ESTIMATED", "ACTUAL"):
        raise ValueError(f"type {event_type!r} must be ESTIMATED or ACTUAL")
    index = next((i for i, m in enumerate(milestones) if m.code == code), None)
    if index is None:
        raise ValueError(f"the shipment has no milestone {code!r}; it has {', '.join(m.code for m in milestones)}")
    milestone = milestones[index]
    moved = _with_estimate(milestone, at) if event_type == "ESTIMATED" else dataclasses.replace(milestone, actual=at)
    return (*milestones[:index], moved, *milestones[index + 1:])


def _next_estimate(milestone: Milestone, mode: str, now: int, rng: random.Random) -> int:
    to_go = milestone.actual - now
    spread = ERROR_FLOOR_HOURS[mode] * HOUR + ERROR_SHARE_OF_TIME_TO_GO[mode] * to_go
    error = PERSISTENCE * (milestone.planned - milestone.actual) + rng.gauss(0.0, spread)
    earliest = -(-(now + MIN_LEAD) // ESTIMATE_STEP) * ESTIMATE_STEP
    estimate = max(int(milestone.actual + error) // ESTIMATE_STEP * ESTIMATE_STEP, earliest)
    return estimate + ESTIMATE_STEP if estimate == milestone.actual else estimate


def _with_estimate(milestone: Milestone, estimate: int) -> Milestone:
    """The milestone estimated at ``estimate`` (its window, if any, moved along); its time is known."""
    until = None if milestone.until is None else milestone.until + estimate - milestone.planned
    return dataclasses.replace(milestone, planned=estimate, until=until, time_known=True)


def first_revised_dates(
    milestones: tuple[Milestone, ...], as_of: int, rng: Callable[[], random.Random]
) -> RevisedDates:
    """The revised dates of a shipment generated with ``milestones`` as of ``as_of``: for each milestone of
    REVISED_DATE_CODES whose actual lies after ``as_of``, with chance FIRST_REVISED_SHARE, its estimate
    plus 6 to 96 hours (whole five minutes). ``rng`` makes the random stream, only when there is a draw."""
    dates: list[tuple[str, int]] = []
    draws: random.Random | None = None
    for code in REVISED_DATE_CODES:
        milestone = next((m for m in milestones if m.code == code), None)
        if milestone is None or milestone.actual <= as_of:
            continue
        draws = draws or rng()
        if draws.random() < FIRST_REVISED_SHARE:
            dates.append((f"{code}_REVISED", milestone.planned + draws.randint(6, 96) * HOUR // 300 * 300))
    return tuple(dates)


def revised_dates_after(
    before: tuple[Milestone, ...], after: tuple[Milestone, ...], dates: RevisedDates
) -> RevisedDates:
    """``dates`` once the timeline went from ``before`` to ``after``: a milestone of REVISED_DATE_CODES
    whose estimate moved has its revised date at the new estimate; the others keep theirs (or none)."""
    was = {m.code: m.planned for m in before}
    now = {m.code: m.planned for m in after}
    held = dict(dates)
    for code in REVISED_DATE_CODES:
        if code in now and now[code] != was.get(code):
            held[f"{code}_REVISED"] = now[code]
    return tuple((f"{code}_REVISED", held[f"{code}_REVISED"]) for code in REVISED_DATE_CODES
                 if f"{code}_REVISED" in held)
