"""The suite's own lists (``conftest.py``) name test files that exist: a renamed file would silently drop
out of the slow marker or of the longest-first order."""

from __future__ import annotations

from pathlib import Path

import pytest

from freight_pipeline_tests.conftest import LONGEST_FIRST, SLOW_FILES

TESTS = Path(__file__).parent


@pytest.mark.parametrize("name", sorted({*SLOW_FILES, *LONGEST_FIRST}))
def test_every_listed_test_file_exists(name: str) -> None:
    assert (TESTS / name).is_file()
