"""Alerts: each problem a run finds (a failed step, a check that did not pass, a stale warehouse) sent to the
configured destinations once when it opens, again while it stays open (``alert_repeat_minutes``), and once
when it is resolved (docs/operations.md, Alerts).

``problems`` says what is wrong now, ``ledger`` keeps each problem's state and the outbox in ``freight_meta``,
``delivery`` sends the outbox's messages off the run's path, and ``notify`` is what the job and the freshness
look call.
"""
