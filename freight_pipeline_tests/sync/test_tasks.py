"""``run_all``: a batch of requests run concurrently, all or nothing."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

import freight_pipeline
from freight_pipeline.sync.tasks import run_all


def test_run_all_cancels_the_siblings_of_a_failure_and_raises_the_original_error() -> None:
    seen: dict[str, object] = {}

    async def fails() -> int:
        await asyncio.sleep(0)
        raise LookupError("the one that failed")

    async def slow(name: str) -> int:
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            seen[name] = "cancelled"
            raise
        return 1

    async def scenario() -> None:
        with pytest.raises(LookupError, match="the one that failed") as raised:
            await run_all([slow("a"), fails(), slow("b")])
        seen["siblings when it surfaced"] = dict(seen)
        seen["error"] = raised.value

    asyncio.run(scenario())
    assert type(seen["error"]) is LookupError  # not an ExceptionGroup
    assert seen["siblings when it surfaced"] == {"a": "cancelled", "b": "cancelled"}


def test_run_all_reports_simultaneous_failures_on_the_first_one() -> None:
    async def fails(message: str) -> int:
        raise ValueError(message)

    with pytest.raises(ValueError, match="first") as raised:
        asyncio.run(run_all([fails("first"), fails("second")]))
    assert raised.value.__notes__ == ["failed at the same time: ValueError: second"]


def test_run_all_returns_results_in_order() -> None:
    async def value(n: int) -> int:
        await asyncio.sleep(0.001 * (5 - n))
        return n

    assert asyncio.run(run_all(value(n) for n in range(5))) == [0, 1, 2, 3, 4]


def test_no_module_of_the_sync_or_the_client_runs_requests_with_gather() -> None:
    """``asyncio.gather`` leaves the siblings of a failed request running: the documents stream failed by a copy the
    machine could not write, its other E-File reads ran on past the stream's end and printed "Task exception was
    never retrieved ... Session is closed" (1 run in 6). Every batch of requests goes through :func:`run_all`."""
    package = Path(freight_pipeline.__file__).parent
    gathering = sorted(str(path.relative_to(package)) for folder in ("sync", "client", "job", "warehouse")
                       for path in (package / folder).rglob("*.py") if "asyncio.gather(" in path.read_text())
    assert gathering == [], gathering
