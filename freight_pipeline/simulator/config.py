"""Configuration of the simulator's HTTP service: users, tokens, faults, control surface.

Plain frozen dataclasses; change a running server's faults with ``FaultInjector.update`` (or
``RunningSimulator.set_faults``). Passwords and the JWT secret never appear in ``repr``.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import secrets
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from freight_pipeline.simulator.clock import clock_timezone, zone_info
from freight_pipeline.simulator.releases import CURRENT, check_release

# Permission names (assumption A16) and the webhook role (A17).
PERMISSIONS: tuple[str, ...] = (
    "shipment:lookup",
    "shipment:retrieve",
    "shipment:events",
    "shipment:event-write",
    "shipment:carriage",
    "memo:read",
    "codeconverter:read",
    "efile:read",
    "efile:write",
    "efile:delete",
)
ALL_PERMISSIONS = "*"
WEBHOOK_ROLE = "WEBHOOK"

DEFAULT_USERNAME = "demo"
DEFAULT_PASSWORD = "demo-password"
DEFAULT_WEBHOOK_USERNAME = "webhook"
DEFAULT_WEBHOOK_PASSWORD = "webhook-password"
TOKEN_LIFETIME_S = 24 * 3600
DEFAULT_UTC_OFFSET = "+01:00"
MAX_PAGE_SIZE = 500
DEFAULT_PAGE_SIZE = 50
# Initial shipments of a generated store: their ids (about 1.08 per shipment, from 10001) stay below
# data_goods.MAX_SHIPMENT_ID, so every generated id (goods, hs codes, ...) fits int32.
MAX_SHIPMENTS = 900_000


@dataclass(frozen=True)
class UserConfig:
    """One account. ``permissions`` holds A16 names or ``*``; ``roles`` e.g. ``{"WEBHOOK"}``."""

    username: str
    password: str = field(repr=False)
    permissions: frozenset[str] = frozenset({ALL_PERMISSIONS})
    roles: frozenset[str] = frozenset()

    def __post_init__(self) -> None:
        object.__setattr__(self, "permissions", frozenset(self.permissions))
        object.__setattr__(self, "roles", frozenset(self.roles))
        unknown = set(self.permissions) - set(PERMISSIONS) - {ALL_PERMISSIONS}
        if unknown:
            raise ValueError(f"unknown permission(s) for user {self.username!r}: {sorted(unknown)}")

    def allows(self, permission: str) -> bool:
        return ALL_PERMISSIONS in self.permissions or permission in self.permissions


def default_users() -> tuple[UserConfig, ...]:
    return (
        UserConfig(DEFAULT_USERNAME, DEFAULT_PASSWORD),
        UserConfig(DEFAULT_WEBHOOK_USERNAME, DEFAULT_WEBHOOK_PASSWORD, frozenset(), frozenset({WEBHOOK_ROLE})),
    )


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_strings(value: Any) -> bool:
    return isinstance(value, list | tuple | set | frozenset) and all(isinstance(v, str) for v in value)


# FaultConfig field annotation -> (what a JSON value must be, its test).
_FIELD_TYPES: dict[str, tuple[str, Callable[[Any], bool]]] = {
    "int": ("an integer", _is_int),
    "int | None": ("null or an integer", lambda v: v is None or _is_int(v)),
    "float": ("a number", lambda v: isinstance(v, int | float) and not isinstance(v, bool)),
    "bool": ("true or false", lambda v: isinstance(v, bool)),
    "str": ("a string", lambda v: isinstance(v, str)),
    "frozenset[str] | None": ("null or an array of strings", lambda v: v is None or _is_strings(v)),
}
_FIELD_WANTED = {
    "paths": "null or an array of path templates (strings)",
    "forbidden_prefixes": "null or an array of path prefixes (strings)",
    "tail_kinds": "null or an array of kinds of call (strings)",
}
EFILE_REFERENCE_SHAPES: tuple[str, ...] = ("type", "key")

# Kinds of call a latency tail can be limited to (``tail_kinds``), each a set of path templates.
CALL_KINDS: dict[str, tuple[str, ...]] = {
    "auth": ("/auth/token",),
    "lookup": ("/service/shipment/lookup",),
    "shipment": ("/service/shipment/{id}",),
    "events": (
        "/service/shipment/{id}/events",
        "/service/shipment/{shipmentId}/event",
        "/service/shipment/{shipmentId}/event/{id}",
    ),
    "legs": ("/service/shipment/{id}/airmaincarriage", "/service/shipment/{id}/seamaincarriage"),
    "memos": ("/service/shipment/memo/lookup", "/service/shipment/memo", "/service/shipment/memo/{id}"),
    "efile": (
        "/service/efile",
        "/service/efile/lookup",
        "/service/efile/{id}",
        "/service/efile/{id}/reference",
        "/service/efile/{id}/role",
    ),
    "codes": (
        "/service/basicdata/codeconverter/lookup",
        "/service/basicdata/codeconverter",
        "/service/basicdata/codeconverter/{id}",
    ),
    "webhook": ("/external/webhook",),
}
_KIND_OF_PATH = {path: kind for kind, paths in CALL_KINDS.items() for path in paths}


def call_kind(path_template: str) -> str | None:
    """The kind of call (a key of ``CALL_KINDS``) a path template belongs to; None for none."""
    return _KIND_OF_PATH.get(path_template)


@dataclass(frozen=True)
class FaultConfig:
    """Fault injection; all rates are shares of requests in [0, 1] and are decided per request.

    ``drop_rate`` + ``rate_limit_rate`` + ``server_error_rate`` must not exceed 1: a request gets at
    most one of these faults. ``latency_ms`` ± ``latency_jitter_ms`` is added to every faultable
    request. ``modify_during_paging_rate`` is the chance that a shipment lookup with ``page_no > 0``
    first modifies ``modify_during_paging_count`` shipments. ``paths`` limits faults to these path
    templates (e.g. ``"/service/shipment/lookup"``); ``None`` means every path. Decisions come from
    a ``random.Random(seed)``, so a given sequence of requests always meets the same faults.

    Behaviours of real services, on every request (``paths`` does not limit them):
    ``max_page_size`` caps the rows of every lookup and scroll page whatever ``page_size`` asks
    (``X-Page-Count`` and ``page_no`` then count pages of the size served); ``fixed_page_size`` serves pages of
    that many rows whatever ``page_size`` asks, more or fewer (a service that ignores it). ``page_size_limit``
    refuses (400) every lookup and scroll asking for more rows per page than that (a service whose maximum is below
    A4's 500).
    ``max_in_flight``: a
    request arriving while that many are being processed (latency included) is answered 429 at
    once, with ``Retry-After: retry_after_s`` if ``in_flight_retry_after``; ``/auth/token`` counts
    unless ``exempt_auth``. ``forbidden_prefixes``: every user is refused (403, after authentication)
    the endpoints whose path starts with one of them, as an account the operator did not grant
    them. ``strict_criteria``: lookups refuse (400) criterion forms the spec does not name (``IN``
    takes ``values``, ``OR`` ``identifiers``, every other mode ``value``), and a shipment, memo or E-File lookup
    without a criterion (the spec: criteria "should be as precise as possible"). ``no_content_when_empty``: a
    shipment's events and main-carriage legs answer ``204 No Content`` where it has none (the spec shows no status
    code; A10's ``200 []`` otherwise). ``memo_order_refused``: the memo
    lookup refuses (400) any ``order_by`` (a service whose memo lookup keys, which the spec does not show, have no
    ``ID``). ``memo_lookup_by_one``: the memo lookup refuses (400) ``SHIPMENT_NUMBER`` with more than one value, as
    a service whose memo lookup reads one shipment at a time. ``scroll_page_object``: the two scrolls answer Spring
    Data's page object (``{"content": [...], "totalElements", "totalPages", "number", "size"}``), paged by ``page``
    and ``size`` (default 0 and 20; ``page_no`` and ``page_size`` ignored), without headers, as a Spring service's
    ``Page`` endpoint does. ``scroll_headers=False``: the two scrolls (code
    conversions, memo lines) answer without
    ``X-Page-Count`` and ``X-Row-Count``, which the spec promises for lookups only. ``scroll_paging=False``: the two
    scrolls ignore ``page_no`` and ``page_size`` and answer every record at once (the spec shows no parameter of
    theirs). ``scroll_first_rows``: the two scrolls ignore ``page_no`` and ``page_size`` and answer their first that
    many rows to every request (a service paging them by parameters of its own, that many its default page; with
    ``scroll_headers=False`` nothing tells the rest exists). ``efile_reference_shape``
    ``"key"`` answers E-File references as ``{"id", "reference_key": "SHIPMENT_ID", "reference": 10023}``
    instead of ``{"id", "type": "SHIPMENT", "value": "10023"}``. ``json_bom``: every JSON answer begins with a
    UTF-8 byte-order mark (as some .NET and Java services write it). ``json_latin1``: every JSON answer is
    encoded in ISO-8859-1 and says so in its ``Content-Type`` (``charset=ISO-8859-1``, an older Java service's
    default). ``token_echo``: ``/auth/token`` refuses every request with 422 and echoes the body it got in
    ``detail[].input``, escaped as Python's ``json`` writes it (FastAPI's answer to a body of another shape than
    A1's). ``redirect_to``: every request is answered ``308 Permanent Redirect`` to the same path and query at
    this base URL (a service that moved, or answers https only); empty: none. ``token_activation_ms``: a token
    is refused (401) until this long after it was issued (its ``nbf``: a service whose nodes learn of a new token
    late).

    A latency tail: ``tail_rate`` of the requests are answered ``tail_ms`` later (on top of
    ``latency_ms``), a correct answer after a stall; ``tail_kinds`` limits it to these kinds of call
    (keys of ``CALL_KINDS``: ``lookup``, ``shipment``, ``events``, ``legs``, ``memos``, ``efile``,
    ``codes``, ``auth``, ``webhook``); ``None`` means every kind. It is decided per request from a
    ``random.Random`` of its own (``seed + 2``), so it does not shift the other faults' sequence,
    and it respects ``paths`` and ``exempt_auth`` like them.
    """

    seed: int = 0
    rate_limit_rate: float = 0.0
    retry_after_s: int = 1
    server_error_rate: float = 0.0
    drop_rate: float = 0.0
    latency_ms: float = 0.0
    latency_jitter_ms: float = 0.0
    modify_during_paging_rate: float = 0.0
    modify_during_paging_count: int = 1
    exempt_auth: bool = False
    paths: frozenset[str] | None = None
    max_page_size: int | None = None
    fixed_page_size: int | None = None
    page_size_limit: int | None = None
    max_in_flight: int | None = None
    in_flight_retry_after: bool = True
    forbidden_prefixes: frozenset[str] | None = None
    strict_criteria: bool = False
    memo_lookup_by_one: bool = False
    memo_order_refused: bool = False
    no_content_when_empty: bool = False
    scroll_page_object: bool = False
    scroll_headers: bool = True
    scroll_paging: bool = True
    scroll_first_rows: int | None = None
    efile_reference_shape: str = "type"
    json_bom: bool = False
    json_latin1: bool = False
    token_echo: bool = False
    redirect_to: str = ""
    token_activation_ms: float = 0.0
    tail_rate: float = 0.0
    tail_ms: float = 0.0
    tail_kinds: frozenset[str] | None = None

    def __post_init__(self) -> None:
        self._check_types()
        if self.paths is not None:
            object.__setattr__(self, "paths", frozenset(self.paths))
        if self.forbidden_prefixes is not None:
            object.__setattr__(self, "forbidden_prefixes", frozenset(self.forbidden_prefixes))
            bad = sorted(p for p in self.forbidden_prefixes if not p.startswith("/"))
            if bad:
                raise ValueError(f"forbidden_prefixes must be paths starting with '/', got {bad}")
        if self.tail_kinds is not None:
            object.__setattr__(self, "tail_kinds", frozenset(self.tail_kinds))
            unknown = sorted(set(self.tail_kinds) - set(CALL_KINDS))
            if unknown:
                raise ValueError(f"unknown tail_kinds {unknown}; known: {', '.join(CALL_KINDS)}")
        if self.efile_reference_shape not in EFILE_REFERENCE_SHAPES:
            raise ValueError(
                f"efile_reference_shape must be one of {', '.join(EFILE_REFERENCE_SHAPES)}, "
                f"got {self.efile_reference_shape!r}"
            )
        for name in ("rate_limit_rate", "server_error_rate", "drop_rate", "modify_during_paging_rate",
                     "tail_rate"):
            value = getattr(self, name)
            if not 0.0 <= value <= 1.0:
                raise ValueError(f"{name} must be within [0, 1], got {value}")
        if self.rate_limit_rate + self.server_error_rate + self.drop_rate > 1.0 + 1e-9:
            raise ValueError("drop_rate + rate_limit_rate + server_error_rate must not exceed 1")
        if self.latency_ms < 0 or self.latency_jitter_ms < 0 or self.tail_ms < 0 or self.token_activation_ms < 0:
            raise ValueError("latency_ms, latency_jitter_ms, tail_ms and token_activation_ms must not be negative")
        if self.retry_after_s < 0 or self.modify_during_paging_count < 0:
            raise ValueError("retry_after_s and modify_during_paging_count must not be negative")
        for name in ("max_page_size", "fixed_page_size", "page_size_limit", "scroll_first_rows"):
            if getattr(self, name) is not None and getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1 (or null), got {getattr(self, name)}")
        if self.max_in_flight is not None and self.max_in_flight < 1:
            raise ValueError(f"max_in_flight must be at least 1 (or null), got {self.max_in_flight}")

    def _check_types(self) -> None:
        """Refuse values of the wrong JSON type (the control surface passes request bodies through)."""
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            wanted, accepts = _FIELD_TYPES[str(f.type)]
            if not accepts(value):
                raise ValueError(f"{f.name} must be {_FIELD_WANTED.get(f.name, wanted)}, got {value!r}")

    def forbidden(self, path: str) -> str | None:
        """The forbidden prefix ``path`` starts with, if any."""
        return next((p for p in sorted(self.forbidden_prefixes or ()) if path.startswith(p)), None)

    def replace(self, **changes: Any) -> FaultConfig:
        known = {f.name for f in dataclasses.fields(self)}
        unknown = set(changes) - known
        if unknown:
            raise ValueError(f"unknown fault setting(s): {sorted(unknown)}")
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data["paths"] = sorted(self.paths) if self.paths is not None else None
        if self.forbidden_prefixes is not None:
            data["forbidden_prefixes"] = sorted(self.forbidden_prefixes)
        if self.tail_kinds is not None:
            data["tail_kinds"] = sorted(self.tail_kinds)
        return data


@dataclass(frozen=True)
class SimulatorConfig:
    """Everything the HTTP service needs besides the store.

    ``shipments``, ``seed``, ``start``, ``utc_offset``, ``offset_changes``, ``naive_clock``,
    ``fractional_stamps`` and ``wall_clock`` are only used when the server builds its own store. ``start``: the
    clock's start, ISO 8601 (without an offset: in the service's offset then); default 2026-11-01T08:00 local.
    ``offset_changes``: ``(instant, offset)`` pairs, from each instant on the service's offset is that one, e.g.
    ``(("2026-10-25T03:00:00+02:00", "+01:00"),)`` (summer time ending). ``naive_clock``: an IANA
    zone name (``Europe/Berlin``): the clock follows that zone's rules (``utc_offset`` is not used,
    ``offset_changes`` are refused) and every date-time is sent without a UTC offset, in its wall clock.
    ``fractional_stamps``: a shipment's ``last_modified_date_time`` and ``LAST_MODIFIED_TIME`` carry milliseconds
    (``2026-11-01T10:15:30.250+01:00``, as many Java services write them), each version a fraction of its own
    within its whole-second stamp, and the lookup's criteria on ``LAST_MODIFIED_TIME`` compare them
    (``EQUALS 10:15:30`` matches ``10:15:30.000`` only). ``utc_stamps``: every date-time is written in UTC
    (``2026-11-01T09:15:30Z``) while the lookup keys stay the wall clock at the service's offset.
    ``release``: the release of the
    interface it answers in (``releases.py``; switched while running with ``POST /_control/release``).
    """

    users: tuple[UserConfig, ...] = field(default_factory=default_users)
    token_lifetime_s: float = TOKEN_LIFETIME_S
    jwt_secret: str = field(default_factory=lambda: secrets.token_hex(32), repr=False)
    faults: FaultConfig = field(default_factory=FaultConfig)
    control: bool = False
    shipments: int = 2000
    seed: int = 42
    utc_offset: str = DEFAULT_UTC_OFFSET
    wall_clock: bool = False  # the built store's clock also moves with real time (the CLI's default)
    start: str | None = None
    offset_changes: tuple[tuple[str, str], ...] = ()
    naive_clock: str | None = None
    fractional_stamps: bool = False
    utc_stamps: bool = False
    release: str = CURRENT

    def __post_init__(self) -> None:
        object.__setattr__(self, "users", tuple(self.users))
        check_release(self.release)
        names = [u.username for u in self.users]
        if len(names) != len(set(names)):
            raise ValueError("usernames must be unique")
        if self.token_lifetime_s <= 0:
            raise ValueError("token_lifetime_s must be positive")
        if not 0 <= self.shipments <= MAX_SHIPMENTS:
            raise ValueError(f"shipments must be between 0 and {MAX_SHIPMENTS}, got {self.shipments}")
        object.__setattr__(self, "offset_changes", tuple(tuple(pair) for pair in self.offset_changes))
        clock_timezone(self.utc_offset, self.offset_changes)  # raises ValueError for a bad one
        if self.naive_clock is not None:
            zone_info(self.naive_clock)
            if self.offset_changes:
                raise ValueError("a naive clock follows its zone's own rules: give no offset changes with it")
            if self.utc_stamps:
                raise ValueError("a naive clock writes no offset: it cannot write its date-times in UTC")
        self.start_instant()

    def start_instant(self) -> dt.datetime | None:
        """``start`` read (naive when given without an offset); ValueError when unreadable."""
        if self.start is None:
            return None
        try:
            return dt.datetime.fromisoformat(self.start)
        except (TypeError, ValueError):
            raise ValueError(f"start must be an ISO 8601 date-time, got {self.start!r}") from None

    def user(self, username: str) -> UserConfig | None:
        return next((u for u in self.users if u.username == username), None)

    def replace(self, **changes: Any) -> SimulatorConfig:
        return dataclasses.replace(self, **changes)
