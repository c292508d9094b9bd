"""Estimate revisions of a milestone timeline and the revised dates that follow them, against
hand-computed values (a stub RNG fixes the draws)."""

from __future__ import annotations

import random

import pytest

from freight_pipeline.simulator.data_estimates import (
    first_revised_dates,
    moved_milestone,
    revised_dates_after,
    revised_milestones,
)
from freight_pipeline.simulator.data_identity import HOUR, Milestone

NOW = 1_800_000_000  # a multiple of 300 s
DAY = 24 * HOUR


class FixedDraws(random.Random):
    """``random()`` always ``roll``; ``gauss(mu, sigma)`` always ``mu + z * sigma``."""

    def __init__(self, roll: float, z: float) -> None:
        super().__init__(0)
        self.roll, self.z = roll, z

    def random(self) -> float:
        return self.roll

    def gauss(self, mu: float = 0.0, sigma: float = 1.0) -> float:
        return mu + self.z * sigma


class FixedInts(FixedDraws):
    """:class:`FixedDraws` whose ``randint(a, b)`` is always ``value``."""

    def __init__(self, roll: float, value: int) -> None:
        super().__init__(roll, 0.0)
        self.value = value

    def randint(self, a: int, b: int) -> int:
        assert a <= self.value <= b
        return self.value


def pod(planned: int, actual: int, code: str = "POD_ARRIVAL", until: int | None = None) -> Milestone:
    return Milestone(code=code, role="pod", planned=planned, actual=actual, until=until, time_known=False)


def test_a_revision_keeps_half_the_error_and_adds_a_spread_that_shrinks_with_the_time_to_go() -> None:
    actual = NOW + 10 * DAY
    timeline = (pod(actual - 40 * HOUR, actual),)
    # sea: half the 40 h early error kept (-20 h), one spread added: 18 h + 6 % of 240 h = 32.4 h,
    # so 12.4 h late, down to whole five minutes: 12 h 20 min
    (revised,) = revised_milestones(timeline, "SEA", NOW, FixedDraws(0.0, 1.0)) or ()
    assert revised == Milestone("POD_ARRIVAL", "pod", actual + 12 * HOUR + 20 * 60, actual, None, True)
    # air, one day to go, one spread earlier: -20 h + -(1.5 h + 8 % of 24 h) = -23.42 h -> 23 h 30 min early
    actual = NOW + DAY
    (revised,) = revised_milestones((pod(actual - 40 * HOUR, actual),), "AIR", NOW, FixedDraws(0.0, -1.0)) or ()
    assert revised.planned == actual - 23 * HOUR - 30 * 60


def test_a_revision_is_never_the_actual_nor_before_the_revision_plus_its_lead() -> None:
    actual = NOW + 5 * DAY
    (revised,) = revised_milestones((pod(actual, actual),), "SEA", NOW, FixedDraws(0.0, 0.0)) or ()
    assert revised.planned == actual + 300  # no error left would be the actual itself: five minutes later
    actual = NOW + HOUR
    (revised,) = revised_milestones((pod(actual - 10 * HOUR, actual),), "SEA", NOW, FixedDraws(0.0, 0.0)) or ()
    assert revised.planned == NOW + 15 * 60  # 5 h early would lie before the revision: 15 minutes after it


@pytest.mark.parametrize(
    ("milestone", "roll"),
    [
        (pod(NOW + DAY, NOW + DAY + 3 * HOUR), 0.6),  # not drawn (chance 0.6)
        (pod(NOW - DAY, NOW - HOUR), 0.0),  # its actual has passed
        (pod(NOW + DAY, NOW + DAY + 3 * HOUR, code="CUSTOMS_CLEARANCE"), 0.0),  # not a revised milestone
    ],
)
def test_no_revision(milestone: Milestone, roll: float) -> None:
    assert revised_milestones((milestone,), "SEA", NOW, FixedDraws(roll, 1.0)) is None


def test_a_revision_that_lands_on_the_same_five_minutes_is_none() -> None:
    actual = NOW + DAY
    moved = revised_milestones((pod(actual - HOUR, actual),), "AIR", NOW, FixedDraws(0.0, 0.0))
    assert moved is not None and moved[0].planned == actual - HOUR // 2  # half the hour early kept
    settled = pod(actual, actual + 1)  # a second early: half of that still rounds down to the estimate
    assert revised_milestones((settled,), "AIR", NOW, FixedDraws(0.0, 0.0)) is None


def test_moved_milestone_sets_an_estimate_with_its_window_or_an_actual() -> None:
    pickup = Milestone("PICKUP", "origin", NOW, NOW + HOUR, NOW + 3 * HOUR, False)
    arrival = pod(NOW + DAY, NOW + DAY + HOUR)
    moved = moved_milestone((pickup, arrival), "PICKUP", "ESTIMATED", NOW + 2 * HOUR)
    assert moved == (Milestone("PICKUP", "origin", NOW + 2 * HOUR, NOW + HOUR, NOW + 5 * HOUR, True), arrival)
    assert moved_milestone((pickup, arrival), "POD_ARRIVAL", "ACTUAL", NOW + 7) == (
        pickup, pod(NOW + DAY, NOW + 7))
    with pytest.raises(ValueError, match="no milestone 'GATE_OUT'; it has PICKUP, POD_ARRIVAL"):
        moved_milestone((pickup, arrival), "GATE_OUT", "ESTIMATED", NOW)
    with pytest.raises(ValueError, match="must be ESTIMATED or ACTUAL"):
        moved_milestone((pickup, arrival), "PICKUP", "PLANNED", NOW)


def pol(planned: int, actual: int) -> Milestone:
    return Milestone(code="POL_DEPARTURE", role="pol", planned=planned, actual=actual, until=None, time_known=True)


def test_first_revised_dates_are_drawn_for_the_departure_and_arrival_still_to_come() -> None:
    departure, arrival = pol(NOW + DAY, NOW + DAY + HOUR), pod(NOW + 5 * DAY, NOW + 5 * DAY - HOUR)
    delivery = pod(NOW + 6 * DAY, NOW + 6 * DAY, code="DELIVERY_DATE")  # no revised date
    # drawn (roll 0.0 < 0.3): the estimate plus randint(6, 96) = 10 hours
    assert first_revised_dates((departure, arrival, delivery), NOW, lambda: FixedInts(0.0, 10)) == (
        ("POL_DEPARTURE_REVISED", NOW + DAY + 10 * HOUR), ("POD_ARRIVAL_REVISED", NOW + 5 * DAY + 10 * HOUR))
    assert first_revised_dates((departure, arrival), NOW, lambda: FixedInts(0.3, 10)) == ()  # not drawn

    def no_draws() -> random.Random:
        raise AssertionError("nothing to draw: no random stream wanted")

    # both actuals passed (or no such milestone): no revised date, and no draw
    assert first_revised_dates((departure, arrival, delivery), NOW + 5 * DAY, no_draws) == ()
    assert first_revised_dates((delivery,), NOW, no_draws) == ()


def test_revised_dates_move_only_with_their_estimate() -> None:
    departure, arrival = pol(NOW + DAY, NOW + DAY + HOUR), pod(NOW + 5 * DAY, NOW + 5 * DAY - HOUR)
    delivery = pod(NOW + 6 * DAY, NOW + 6 * DAY, code="DELIVERY_DATE")
    before = (departure, arrival, delivery)
    held = (("POL_DEPARTURE_REVISED", NOW + DAY + 10 * HOUR),)
    # nothing moved, or only the delivery estimate, or an actual: the dates stay as they were
    assert revised_dates_after(before, before, held) == held
    assert revised_dates_after(before, moved_milestone(before, "DELIVERY_DATE", "ESTIMATED", NOW + 7 * DAY),
                               held) == held
    assert revised_dates_after(before, moved_milestone(before, "POL_DEPARTURE", "ACTUAL", NOW + 2 * DAY),
                               held) == held
    # the arrival's estimate moved: its revised date appears at the new estimate, the departure's stays
    later = moved_milestone(before, "POD_ARRIVAL", "ESTIMATED", NOW + 5 * DAY + 3 * HOUR)
    assert revised_dates_after(before, later, held) == (
        ("POL_DEPARTURE_REVISED", NOW + DAY + 10 * HOUR), ("POD_ARRIVAL_REVISED", NOW + 5 * DAY + 3 * HOUR))
    # the departure's estimate moved: its revised date follows it
    earlier = moved_milestone(before, "POL_DEPARTURE", "ESTIMATED", NOW + DAY - 2 * HOUR)
    assert revised_dates_after(before, earlier, held) == (("POL_DEPARTURE_REVISED", NOW + DAY - 2 * HOUR),)
