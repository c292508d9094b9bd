"""Estimate revisions of a milestone timeline, against hand-computed values (a stub RNG fixes the draws)."""

from __future__ import annotations

import random

import pytest

from freight_pipeline.simulator.data_estimates import moved_milestone, revised_milestones
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
