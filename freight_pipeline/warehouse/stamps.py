"""Comparing last-modified stamps in SQL: as instants when both carry a UTC offset, else as wall clock.

A stamp (``raw_shipments.last_modified_key``, ``fetched_ceiling``, a reconcile listing's key) is
the service's wall-clock second, ``YYYY-MM-DD HH:MM:SS``, followed by its UTC offset when the
service sent one (``sync.cursor.ShipmentKey.stamp``). When summer time ends the wall clock repeats
an hour: ``02:30:00+02:00`` and, an hour later, ``02:30:00+01:00`` are two instants with one
wall-clock text, so versions are told apart by instant. A stamp without an offset (a service that
sends none, or a row stored before stamps kept it) is compared by its wall-clock second only, the
best that can be known of it.
"""

from __future__ import annotations

import datetime as dt

WALL_CLOCK_CHARS = 19
"""Length of ``YYYY-MM-DD HH:MM:SS``; a longer stamp carries its UTC offset."""


def _both_have_offsets(a: str, b: str) -> str:
    return f"length({a}) > {WALL_CLOCK_CHARS} AND length({b}) > {WALL_CLOCK_CHARS}"


def same_instant(a: str, b: str) -> str:
    """SQL: stamps ``a`` and ``b`` (column expressions, neither NULL) name the same instant."""
    return (f"(CASE WHEN {_both_have_offsets(a, b)} THEN CAST({a} AS TIMESTAMPTZ) = CAST({b} AS TIMESTAMPTZ) "
            f"ELSE left({a}, {WALL_CLOCK_CHARS}) = left({b}, {WALL_CLOCK_CHARS}) END)")


def earlier(a: str, b: str) -> str:
    """SQL: stamp ``a`` is before stamp ``b`` (neither NULL)."""
    return (f"(CASE WHEN {_both_have_offsets(a, b)} THEN CAST({a} AS TIMESTAMPTZ) < CAST({b} AS TIMESTAMPTZ) "
            f"ELSE left({a}, {WALL_CLOCK_CHARS}) < left({b}, {WALL_CLOCK_CHARS}) END)")


def wall_clock(a: str) -> str:
    """SQL: the wall-clock second of stamp ``a`` (to compare with a configured wall-clock floor)."""
    return f"left({a}, {WALL_CLOCK_CHARS})"


def stamp_earlier(a: str, b: str) -> bool:
    """Stamp ``a`` is before stamp ``b``, compared as :func:`earlier` compares them in SQL."""
    if len(a) > WALL_CLOCK_CHARS and len(b) > WALL_CLOCK_CHARS:
        return dt.datetime.fromisoformat(a) < dt.datetime.fromisoformat(b)
    return a[:WALL_CLOCK_CHARS] < b[:WALL_CLOCK_CHARS]
