"""Sync settings of the tests, in a module of their own so the crash trials' child process can import
them without the simulator and pytest (which ``conftest`` imports)."""

from __future__ import annotations

import dataclasses
import datetime as dt

from freight_pipeline.client.retry import DEFAULT_RETRY_POLICY
from freight_pipeline.sync.settings import SyncSettings

# Small pages and batches so a few hundred shipments take many lookups and transactions (batches of 25: the
# suite's sync tests took 7 % more CPU with 13, each batch's transaction a few dozen statements; the crash
# trials write batches of 5, crash_sync.CRASH_SETTINGS).
# Reconciliation is OFF, and so is the restore probe that starts one: it relists every id and
# refetches whatever is missing or stale, so it would hide a walk that loses records. The rules are
# proven by the walk alone; reconciliation has its own tests (test_reconcile.py) with
# RECONCILE_SETTINGS, the probe its own (test_restore.py). Quarantined records are retried by the
# very next run (no backoff wait). No hedged reads: tests count requests exactly, and on a busy
# machine a copy may be sent now and then (hedged reads have their own tests, client/test_hedge.py).
# The client's backoff a tenth of its default, with as many attempts: a record failing on every attempt
# fails as often, without seconds of sleep in each test (the backoff has its own tests, in client/).
# No sample of open shipments' events after the walk either (``sync.freshness``): it reads what the walk
# did not, so a test of the walk counting its requests would count those; it has its own tests
# (test_freshness.py).
TEST_SETTINGS = SyncSettings(
    page_size=25, fetch_batch_size=25, concurrency=8, reconcile_interval=None,
    retry_after=dt.timedelta(0), restore_probe=0, hedge_share=0.0, freshness_sample=0,
    request_retry=dataclasses.replace(DEFAULT_RETRY_POLICY, base_delay=DEFAULT_RETRY_POLICY.base_delay / 10,
                                      max_delay=DEFAULT_RETRY_POLICY.max_delay / 10),
)
RECONCILE_SETTINGS = TEST_SETTINGS.replaced(reconcile_interval=dt.timedelta(0))
"""Reconcile on every run."""
