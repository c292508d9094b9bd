"""Shared test settings of the client tests."""

from __future__ import annotations

from freight_pipeline.client import RetryPolicy

# Tiny delays: a test never waits long, yet every retry path runs.
FAST_RETRY = RetryPolicy(max_attempts=10, base_delay=0.001, max_delay=0.01, total_budget=10.0, retry_after_cap=0.01)
