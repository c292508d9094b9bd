"""The opt-in HTTP control surface under ``/_control`` (only mounted when ``config.control``).

No bearer auth (it is off unless enabled, and the CLI refuses it on a non-loopback ``--host``);
never faulted nor counted. Bodies of the wrong JSON type are refused (400). Its own instants
(``now``, ``at``, ``snapshot_at``) carry their UTC offset also with a naive clock; the service stamps
it echoes (``last_modified_date_time``) are as the service writes them. Routes:

* ``POST /_control/shipments/{modify|create|delete|background|background-arrival}?count=N`` -> ``{"ids": [...]}``
  (``background``: upcoming estimates moved, and some memo lines added, without a new last-modified
  instant: a carrier's status feed, ``store_changes.StoreChanges.change_in_background``;
  ``background-arrival``: the main carriage's estimated arrival of open AIR and SEA shipments moved, their
  legs with it, the same way: a schedule feed, ``StoreChanges.revise_arrivals_in_background``)
* ``POST /_control/shipments/progress``: a new version of every open shipment with an event come due
  since its last one (due actuals in, estimates still to come revised, closed when finished) ->
  ``{"ids": [...]}``
* ``POST /_control/shipments/touch`` body ``{"ids": [...], "at": iso (optional)}``: a new version of
  each, last modified now (A8); with ``at``, the clock is first set to that instant. ->
  ``{"ids": [...], "last_modified_date_time": iso of their stamp (null for no ids)}``
* ``POST /_control/shipments/{id}/milestone`` body ``{"event": "POD_ARRIVAL", "type": "ESTIMATED" | "ACTUAL",
  "at": iso}``: moves that milestone's estimate, or its actual instant (shown once the shipment's
  last-modified instant reaches it), in a new version of the shipment (A8; an event of that code and
  type written through the interface gives way) -> ``{"id", "event", "type", "at": iso,
  "last_modified_date_time": iso}``; 404 for an unknown shipment, 400 for a code its timeline lacks
* ``POST /_control/snapshot``: a snapshot of the data now (one is taken at the start) ->
  ``{"snapshot_at": iso, "shipments": n, "efiles": n}``
* ``POST /_control/reset``: the data back to the snapshot, as a test server reset every night:
  shipments, memo lines, event overrides, E-Files and every id counter (new shipments and E-Files
  reuse the ids of vanished ones); the clock goes on and new changes are stamped after every stamp
  issued -> ``{"snapshot_at", "shipments": live after, "reverted": n (back to another version),
  "vanished": n (made since), "restored": n (deleted since), "efiles": n, "ids": {"reverted": [...],
  "vanished": [...], "restored": [...]}}``
* ``GET /_control/clock``; ``POST /_control/clock/advance?seconds=S``; ``POST /_control/clock/set``
  body ``{"now": "2026-10-25T02:30:00+02:00"}`` (ISO 8601 with offset; forward only, else 400)
  -> ``{"now": iso}``
* ``GET /_control/faults``; ``PUT`` (or ``POST``) ``/_control/faults`` body: FaultConfig fields to change;
  ``POST /_control/faults/reset``; ``POST /_control/faults/script`` body
  ``{"kind": "drop"|"rate_limit"|"server_error"|"malformed", "count": 1, "path": null, "status": null}``
  (``status``: only for ``server_error``, else 400)
* ``GET /_control/stats`` -> ``{"requests": [...], "total", "in_flight", "in_flight_peak",
  "in_flight_refused"}``; ``DELETE /_control/stats`` clears them (the peak restarts from now)
* ``POST /_control/tokens/revoke``; ``PUT /_control/auth`` body ``{"token_lifetime_s": S}``
* ``GET /_control/corruptions``; ``POST /_control/corruptions`` body
  ``{"endpoint": .., "id": N, "kind": .., "path": .., "value": .., "status": .., "key": ..}``
  (``corruptions.py``; refused with 400 when the record lacks the path, 404 when it does not exist);
  ``DELETE /_control/corruptions[?endpoint=E&id=N]`` heals them
* ``GET /_control/release``; ``POST /_control/release`` body ``{"release": "2026.2"}``: every answer from
  now on is in that release's shape (``releases.py``; 400 for a release it does not play) ->
  ``{"release": .., "releases": [...]}``
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from freight_pipeline.simulator.clock import parse_instant
from freight_pipeline.simulator.corruptions import Corruption, CorruptionError
from freight_pipeline.simulator.data_efile import efile_in_shape, references_in_shape
from freight_pipeline.simulator.http_base import ApiError, ServiceState, json_body
from freight_pipeline.simulator.releases import RELEASES, check_release


def control_routes(state: ServiceState) -> list[BaseRoute]:
    store = state.store

    async def body_object(request: Request) -> dict[str, Any]:
        body = await json_body(request, empty={})
        if not isinstance(body, dict):
            raise ApiError(400, "body must be a JSON object")
        return body

    def number(request: Request, name: str, cast: type[int] | type[float]) -> Any:
        raw = request.query_params.get(name)
        if raw is None:
            raise ApiError(400, f"query parameter {name} is required")
        try:
            return cast(raw)
        except ValueError:
            raise ApiError(400, f"query parameter {name} must be a number, got {raw!r}") from None

    async def shipments(request: Request) -> Response:
        action = request.path_params["action"]
        if action == "touch":
            body = await body_object(request)
            ids, at = body.get("ids"), body.get("at")
            if not isinstance(ids, list) or not all(_is_int(i) for i in ids) or not isinstance(at, str | None):
                raise ApiError(400, "body must be {'ids': [int, ...], 'at': ISO 8601 instant (optional)}")
            if at is not None:
                await run_in_threadpool(store.clock.set_to, instant(at, "at"))
            await run_in_threadpool(store.changes.touch_shipments, ids)
            stamped = None
            if ids:  # one stamp for all of them (A8)
                stamped = (await run_in_threadpool(store.reader.get_base_shipment, ids[0]))["last_modified_date_time"]
            return JSONResponse({"ids": ids, "last_modified_date_time": stamped})
        if action == "progress":
            return JSONResponse({"ids": await run_in_threadpool(store.changes.progress_shipments)})
        actions = {
            "modify": store.changes.modify_shipments,
            "create": store.changes.create_shipments,
            "delete": store.changes.delete_shipments,
            "background": store.changes.change_in_background,
            "background-arrival": store.changes.revise_arrivals_in_background,
        }
        if action not in actions:
            raise ApiError(404, f"unknown shipment action {action!r}")
        count = number(request, "count", int)
        if count < 0:
            raise ApiError(400, "count must not be negative")
        return JSONResponse({"ids": await run_in_threadpool(actions[action], count)})

    async def milestone(request: Request) -> Response:
        shipment_id = request.path_params["shipment_id"]
        body = await body_object(request)
        code, event_type, at = body.get("event"), body.get("type"), body.get("at")
        unknown = set(body) - {"event", "type", "at"}
        if unknown or not isinstance(code, str) or not isinstance(event_type, str) or not isinstance(at, str):
            raise ApiError(400, "body must be {'event': code, 'type': 'ESTIMATED' or 'ACTUAL', 'at': ISO 8601 "
                           f"instant}}; unknown: {sorted(unknown)}")
        moved = instant(at, "at")
        stamped = await run_in_threadpool(
            store.changes.move_milestone, shipment_id, code, event_type, int(moved.timestamp())
        )
        return JSONResponse({"id": shipment_id, "event": code, "type": event_type, "at": moved.isoformat(),
                             "last_modified_date_time": stamped})

    def instant(text: Any, name: str) -> dt.datetime:
        try:
            return parse_instant(text, name)
        except ValueError as exc:
            raise ApiError(400, str(exc)) from None

    async def clock(request: Request) -> Response:
        if request.url.path.endswith("/set"):
            at = instant((await body_object(request)).get("now"), "now")
            now = await run_in_threadpool(store.clock.set_to, at)
        elif request.method == "POST":
            now = await run_in_threadpool(store.clock.advance, number(request, "seconds", float))
        else:
            now = await run_in_threadpool(store.clock.now)
        return JSONResponse({"now": now.isoformat()})

    async def snapshot(_: Request) -> Response:
        return JSONResponse(await run_in_threadpool(store.snapshots.take))

    async def reset(_: Request) -> Response:
        return JSONResponse(await run_in_threadpool(store.snapshots.reset))

    async def faults(request: Request) -> Response:
        if request.method in ("PUT", "POST"):
            changes = await body_object(request)
            try:
                state.faults.update(**changes)
            except (TypeError, ValueError) as exc:
                raise ApiError(400, str(exc)) from None
        return JSONResponse({**state.faults.config.to_dict(), "scripted_pending": state.faults.pending_script()})

    async def faults_reset(_: Request) -> Response:
        return JSONResponse(state.faults.reset().to_dict())

    async def faults_script(request: Request) -> Response:
        body = await body_object(request)
        kind, count, path, status = body.get("kind"), body.get("count", 1), body.get("path"), body.get("status")
        if not isinstance(kind, str) or not _is_int(count) or not isinstance(path, str | None) or not (
            status is None or _is_int(status)
        ):
            raise ApiError(400, "body must be {'kind': str, 'count': int, 'path': str or null, 'status': int or null}")
        try:
            state.faults.enqueue(kind, count, path, status)
        except (TypeError, ValueError) as exc:
            raise ApiError(400, str(exc)) from None
        return JSONResponse({"scripted_pending": state.faults.pending_script()})

    async def stats(request: Request) -> Response:
        if request.method == "DELETE":
            state.stats.reset()
        return JSONResponse(
            {"requests": state.stats.snapshot(), "total": state.stats.count(), **state.stats.in_flight()}
        )

    async def corruptions(request: Request) -> Response:
        planted = state.corruptions
        if request.method == "POST":
            body = await body_object(request)
            unknown = set(body) - {"endpoint", "id", "kind", "path", "value", "status", "key"}
            if unknown or not _is_int(body.get("id")):
                raise ApiError(400, "body must be {'endpoint', 'id': int, 'kind', and 'path', 'value', 'status' or "
                               f"'key' as the kind needs}}; unknown: {sorted(unknown)}")
            try:
                corruption = Corruption(
                    endpoint=body.get("endpoint"), record_id=body["id"], kind=body.get("kind"), path=body.get("path"),
                    value=body.get("value"), status=body.get("status"), key=body.get("key"),
                )
                await run_in_threadpool(planted.plant, corruption, _current_answer(corruption))
            except CorruptionError as exc:
                raise ApiError(400, str(exc)) from None
        elif request.method == "DELETE":
            raw_id = request.query_params.get("id")
            record_id = number(request, "id", int) if raw_id is not None else None
            healed = planted.heal(request.query_params.get("endpoint"), record_id)
            return JSONResponse({"healed": healed, "corruptions": planted.listing()})
        return JSONResponse({"corruptions": planted.listing()})

    def _current_answer(corruption: Corruption) -> Callable[[], Any]:
        """What the record's endpoint answers now (the memo lines of a shipment: its lookup's rows)."""
        record_id = corruption.record_id
        shape = state.faults.config.efile_reference_shape
        if corruption.endpoint == "memos":
            def memos() -> Any:
                base = store.reader.get_base_shipment(record_id)
                return store.reader.memo_rows_of(base["client"], base["shipment_number"])
            return memos
        readers: dict[str, Callable[[int], Any]] = {
            "shipment": store.reader.get_shipment, "events": store.reader.get_events,
            "airmaincarriage": store.reader.get_air_main_carriage,
            "seamaincarriage": store.reader.get_sea_main_carriage,
            "codeconverter": store.reader.get_code_conversion,
            "efile": lambda efile_id: efile_in_shape(store.efiles.get(efile_id, True), shape),
            "efilereferences": lambda efile_id: references_in_shape(store.efiles.references(efile_id), shape),
            "efileroles": store.efiles.roles,
        }
        return lambda: readers[corruption.endpoint](record_id)

    async def release(request: Request) -> Response:
        if request.method == "POST":
            try:
                state.release = check_release((await body_object(request)).get("release"))
            except ValueError as exc:
                raise ApiError(400, str(exc)) from None
        return JSONResponse({"release": state.release, "releases": list(RELEASES)})

    async def revoke(_: Request) -> Response:
        state.auth.revoke_all_tokens()
        return JSONResponse({"revoked": True})

    async def auth_settings(request: Request) -> Response:
        lifetime = (await body_object(request)).get("token_lifetime_s")
        if not isinstance(lifetime, int | float) or lifetime <= 0:
            raise ApiError(400, "token_lifetime_s must be a positive number")
        state.auth.token_lifetime_s = float(lifetime)
        return JSONResponse({"token_lifetime_s": state.auth.token_lifetime_s})

    return [
        Route("/_control/shipments/{action}", shipments, methods=["POST"]),
        Route("/_control/shipments/{shipment_id:int}/milestone", milestone, methods=["POST"]),
        Route("/_control/snapshot", snapshot, methods=["POST"]),
        Route("/_control/reset", reset, methods=["POST"]),
        Route("/_control/clock", clock, methods=["GET"]),
        Route("/_control/clock/advance", clock, methods=["POST"]),
        Route("/_control/clock/set", clock, methods=["POST"]),
        Route("/_control/faults", faults, methods=["GET", "PUT", "POST"]),
        Route("/_control/faults/reset", faults_reset, methods=["POST"]),
        Route("/_control/faults/script", faults_script, methods=["POST"]),
        Route("/_control/stats", stats, methods=["GET", "DELETE"]),
        Route("/_control/tokens/revoke", revoke, methods=["POST"]),
        Route("/_control/auth", auth_settings, methods=["PUT"]),
        Route("/_control/corruptions", corruptions, methods=["GET", "POST", "DELETE"]),
        Route("/_control/release", release, methods=["GET", "POST"]),
    ]


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)
