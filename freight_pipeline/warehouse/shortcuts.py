"""Keyword forms of ``Warehouse.apply_batch`` for one stream's batch: shipments with their rows, or one
detail part. A mixin of :class:`~freight_pipeline.warehouse.store.Warehouse`; the sync builds a
:class:`BatchWrite` itself, tests and tools call these."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Mapping, Sequence

import pyarrow as pa

from freight_pipeline.warehouse.records import (
    Backoff,
    BatchWrite,
    DataProblem,
    PendingDetail,
    Quarantined,
    RawDocument,
    Reject,
    WriteStats,
)

DEFAULT_BACKOFF = Backoff(dt.timedelta(minutes=10), dt.timedelta(hours=24))


class BatchShortcuts:
    """``apply_shipment_batch`` and ``apply_detail_batch`` (mixin of ``Warehouse``)."""

    apply_batch: Callable[..., WriteStats]

    def apply_shipment_batch(
        self,
        run_id: str,
        tables: Mapping[str, pa.Table],
        unit_ids: Sequence[int],
        raw_documents: Sequence[RawDocument | tuple[int, str, dt.datetime, dt.datetime | None]] = (),
        deleted_ids: Sequence[int] = (),
        cursor: tuple[str, str] | None = None,
        rejects: Sequence[Reject] = (),
        pending: Sequence[PendingDetail] = (),
        replaced_tables: Sequence[str] | None = None,
        *,
        stream: str = "shipments",
        quarantined: Sequence[Quarantined] = (),
        problems: Sequence[DataProblem] = (),
        backoff: Backoff = DEFAULT_BACKOFF,
    ) -> WriteStats:
        """Write one batch of shipments in ONE transaction (all or nothing).

        * ``unit_ids``: shipments whose rows are replaced: in each table of ``replaced_tables``
          (default: every table given in ``tables``; an empty Arrow table means "no rows") their
          old rows are deleted and the new rows of ``tables`` inserted. Every row given must
          belong to a unit id.
        * ``deleted_ids``: shipments gone from the source: their rows vanish from every
          per-shipment table, ``raw_shipments`` and the detail queue.
        * ``raw_documents``: ``(shipment_id, json_text, fetched_at, last_modified_at)``, upserted.
        * ``rejects``: upserted into ``rejected_records`` by ``(stream, source_key, run_id)``.
        * ``pending``: (re)queued detail work; a re-queue replaces the entry.
        * ``cursor``: ``(stream, cursor_json)`` set in the same transaction, so it never runs ahead.
        * ``quarantined``: records that failed, upserted into the retry queue (attempts counted,
          next attempt after ``backoff``); a unit id that loads leaves ``stream``'s queue, and its
          ``data_problems`` are replaced by ``problems``.
        """
        units = [int(i) for i in unit_ids]
        return self.apply_batch(
            run_id,
            BatchWrite(
                tables=dict(tables),
                replaced={name: units for name in (replaced_tables if replaced_tables is not None else tables)},
                loaded={stream: units},
                deleted_ids=list(deleted_ids),
                raw_documents=[RawDocument(*doc) for doc in raw_documents],
                rejects=list(rejects),
                quarantined=list(quarantined),
                problems=list(problems),
                cursor=cursor,
            ),
            pending=pending,
            backoff=backoff,
        )

    def apply_detail_batch(
        self,
        run_id: str,
        stream: str,
        tables: Mapping[str, pa.Table],
        replaced_tables: Sequence[str],
        unit_ids: Sequence[int],
        done: Sequence[tuple[int, dt.datetime | None]] = (),
        rejects: Sequence[Reject] = (),
        cursor: str | None = None,
        *,
        quarantined: Sequence[Quarantined] = (),
        problems: Sequence[DataProblem] = (),
        backoff: Backoff = DEFAULT_BACKOFF,
    ) -> WriteStats:
        """Write one batch of a detail stream in ONE transaction and acknowledge its queue entries.

        Rows of ``unit_ids`` in ``replaced_tables`` are replaced by those in ``tables``; each
        ``(shipment_id, enqueued_at)`` of ``done`` leaves ``stream``'s queue unless it was re-queued
        meanwhile (different ``enqueued_at``); ``cursor`` (JSON text) becomes ``stream``'s cursor.
        ``quarantined``, ``problems`` and ``backoff`` as in :meth:`apply_shipment_batch`.
        """
        units = [int(i) for i in unit_ids]
        return self.apply_batch(
            run_id,
            BatchWrite(
                tables=dict(tables),
                replaced={name: units for name in replaced_tables},
                loaded={stream: units},
                rejects=list(rejects),
                quarantined=list(quarantined),
                problems=list(problems),
                cursor=(stream, cursor) if cursor is not None else None,
            ),
            done=(stream, done),
            backoff=backoff,
        )
