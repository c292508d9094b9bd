"""A sync run's settings: the `[sync]` settings (``config.SyncTuning``) and what the code hands each run beside them."""

from __future__ import annotations

from typing import Any

from pydantic import Field, model_validator

from freight_pipeline.client.hedge import HedgePolicy
from freight_pipeline.client.limiter import AdaptiveLimit
from freight_pipeline.client.retry import RetryPolicy, retry_policy_of
from freight_pipeline.config import SyncTuning
from freight_pipeline.datetimes import ServiceZone
from freight_pipeline.sync.backfill import IdRange
from freight_pipeline.warehouse.records import Backoff

RUNTIME = {"runtime": True}
"""Marks a field each run is handed by the code, not a setting."""


class SyncSettings(SyncTuning):
    """Tuning of a sync run: the settings (``config.SyncTuning``, declared and described there), and what the code
    hands each run beside them."""

    request_retry: RetryPolicy | None = Field(None, json_schema_extra=RUNTIME)
    """A retry policy the code hands the run instead of the one the ``request_*`` settings describe (the tests'
    quick ones); None: the settings' (:attr:`retry_policy`)."""
    id_range: IdRange | None = Field(None, json_schema_extra=RUNTIME)
    """A backfill partition (``sync.backfill``): the shipments stream walks only these ids, under a
    cursor of its own, and leaves retries and the reconcile to the incremental runs."""
    backfill_plan: tuple[IdRange, ...] = Field((), json_schema_extra=RUNTIME)
    """Every partition of the backfill ``id_range`` belongs to (stored when it completes, so that the
    incremental stream knows which partitions it waits for)."""
    zone: ServiceZone = Field(default_factory=ServiceZone, json_schema_extra=RUNTIME)
    """``service_timezone`` as the value the code that reads date-times is handed (made from it, never set
    apart): each stream's run takes one of its own (:meth:`with_own_zone`), which counts what it read."""

    @classmethod
    def of(cls, tuning: SyncTuning, **runtime: Any) -> SyncSettings:
        """A run's settings: the configured ``tuning``, with the ``runtime`` fields the code hands it."""
        return cls.model_validate({**dict(tuning), **runtime})

    def replaced(self, **changes: Any) -> SyncSettings:
        """These settings with ``changes`` (field names), validated again."""
        return type(self).model_validate({**dict(self), **changes})

    def with_own_zone(self) -> SyncSettings:
        """These settings with a zone value of their own (its count of date-times read without an offset
        starts at 0): one per stream's run, so that runs in one process never share it."""
        return self.replaced(zone=ServiceZone(self.service_timezone))

    @property
    def retry_policy(self) -> RetryPolicy:
        """How the client retries one request that failed (attempts, backoff, ``Retry-After``: ``client.retry``)."""
        return self.request_retry or retry_policy_of(self)

    def hedge_policy(self) -> HedgePolicy:
        """How reads are hedged in one run, as these settings say (``share`` 0: not at all)."""
        return HedgePolicy(share=self.hedge_share)

    def in_flight_limit(self) -> AdaptiveLimit:
        """A fresh limit on requests in flight for one run, as these settings say."""
        if not self.adaptive_concurrency:
            return AdaptiveLimit.fixed(self.concurrency)
        return AdaptiveLimit(min(self.initial_concurrency, self.concurrency), self.concurrency)

    @property
    def backoff(self) -> Backoff:
        return Backoff(self.retry_after, self.retry_after_max)

    @model_validator(mode="after")
    def _consistent(self) -> SyncSettings:
        if self.id_range is not None and self.id_range not in self.backfill_plan:
            raise ValueError(f"id_range {self.id_range.key} is not one of the backfill plan's partitions")
        if self.zone.name != self.service_timezone:
            object.__setattr__(self, "zone", ServiceZone(self.service_timezone))
        return self
