"""The contract between the simulator's data (store, generator, clock) and its HTTP layer.

``store.SimulatorStore`` implements :class:`StoreAPI`; ``app.create_app`` consumes it. A store is
made of parts, one protocol each: its clock, its reader, its event writes, its E-Files, its webhook
recorder and its own changes over time. Documents are plain JSON-ready dicts shaped exactly as the
spec (``../shared/freight-service-spec.md``) and docs/assumptions.md describe them. All methods are
synchronous and thread-safe (the HTTP layer may call them from a thread pool while a test mutates
the store).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Iterator, Mapping
from typing import Any, Protocol

# The 18 shipment identifier keys of the spec, in spec order.
SHIPMENT_KEYS: tuple[str, ...] = (
    "ID", "HBL", "MBL", "FILENUMBER", "SHIPMENT_NUMBER", "SHIPMENT_ID", "ADDRESS_REFERENCE",
    "DIRECTION", "MODE_OF_TRANSPORT", "MONTH_OF_SERVICE", "CLIENT", "CREATION_DATE",
    "RUNNING_SEQUENCE_NUMBER", "CUSTOMER_ADDRESS_TYPE", "CUSTOMER_ADDRESS_NUMBER",
    "SHIPMENT_CLOSED", "LAST_MODIFIED_DATE", "LAST_MODIFIED_TIME",
)
EFILE_KEYS: tuple[str, ...] = ("REFERENCE", "SHIPMENT_ID")
MEMO_KEYS: tuple[str, ...] = ("ID", "CLIENT", "SHIPMENT_NUMBER", "RUNNING_NUMBER")
CODE_CONVERSION_KEYS: tuple[str, ...] = (
    "ID", "PARTNER", "DIRECTION", "CODE_TABLE", "CODE_TYPE", "SOURCE_CODE", "TARGET_CODE",
)
EVENT_CODES: tuple[str, ...] = (
    "DISPATCH", "PICKUP", "WAREHOUSE", "POL_ARRIVAL", "LOADING_START", "LOADING_END",
    "POL_DEPARTURE", "POD_ARRIVAL", "CLEARANCE_START", "CLEARANCE_END", "CUSTOMS_CLEARANCE",
    "AVAILABLE", "ACCEPTANCE", "FINAL_DESTINATION", "TRANSSHIPMENT", "GATE_OUT", "POD_DEPARTURE",
    "CUSTOMS_RELEASE", "DELIVERY_DATE", "POL_DEPARTURE_REVISED", "POD_ARRIVAL_REVISED",
    "TRANSSHIPMENT_ARRIVAL", "TRANSSHIPMENT_DEPARTURE", "DIFF_BL_DATE", "VGM_CLOSING",
)
EVENT_TYPES: tuple[str, ...] = ("ESTIMATED", "ACTUAL")
# Fields of a ShipmentEvent body; any other field is refused (HTTP 400).
EVENT_FIELDS: tuple[str, ...] = ("event", "type", "shipment_id", "date_time", "location")

# Value sets of enumerated lookup keys (the spec's identifier tables, and A14 for code conversions).
DIRECTIONS: tuple[str, ...] = ("I", "E")
MODES_OF_TRANSPORT: tuple[str, ...] = ("SEA", "AIR", "RD", "RL")
CLOSED_FLAGS: tuple[str, ...] = ("J", "N")
CUSTOMER_ADDRESS_TYPES: tuple[str, ...] = ("D", "K", "G", "P", "A")
CODE_CONVERSION_DIRECTIONS: tuple[str, ...] = ("I", "O")


class NotFound(LookupError):
    """Unknown id (HTTP 404)."""


class Conflict(ValueError):
    """The record already exists (HTTP 409)."""


class Invalid(ValueError):
    """The request content is wrong (HTTP 400); the message names what was wrong."""


class ClockAPI(Protocol):
    def now(self) -> dt.datetime:
        """The simulated clock: aware, in the service's UTC offset, whole seconds."""

    def advance(self, seconds: float) -> dt.datetime:
        """Move the clock forward by ``seconds``. Raises Invalid for a negative or non-finite step."""

    def set_to(self, instant: dt.datetime) -> dt.datetime:
        """Move the clock forward to ``instant`` (aware). Raises Invalid for an earlier one."""


class ReaderAPI(Protocol):
    def version(self) -> int:
        """A number that changes on every change of shipment data (lets lookups cache results)."""

    # --- shipments ---------------------------------------------------------------------------
    def shipment_key_rows(self) -> Iterator[Mapping[str, Any]]:
        """One mapping per live shipment: every key of SHIPMENT_KEYS -> its value.

        ID, RUNNING_SEQUENCE_NUMBER and CUSTOMER_ADDRESS_NUMBER are ints; the other values are
        strings (LAST_MODIFIED_DATE ``YYYY-MM-DD``, LAST_MODIFIED_TIME ``HH:MM:SS``, or ``HH:MM:SS.fff`` from a
        clock with ``fractional_stamps``, CREATION_DATE
        ``YYYY-MM-DD``, SHIPMENT_CLOSED ``J``/``N``); ADDRESS_REFERENCE is a tuple of strings (every
        reference value at every address). Must be cheap: no full document is built.
        """

    def get_shipment(self, shipment_id: int) -> dict[str, Any]:
        """The full shipment document. Raises NotFound."""

    def get_base_shipment(self, shipment_id: int) -> dict[str, Any]:
        """The base shipment (assumption A9). Raises NotFound."""

    def get_events(self, shipment_id: int) -> list[dict[str, Any]]:
        """Raises NotFound for an unknown shipment; [] when it has no events."""

    def get_air_main_carriage(self, shipment_id: int) -> list[dict[str, Any]]: ...

    def get_sea_main_carriage(self, shipment_id: int) -> list[dict[str, Any]]: ...

    def record_json(self, endpoint: str, shipment_id: int) -> bytes:
        """The answer of a record endpoint (``shipment``, ``events``, ``airmaincarriage``, ``seamaincarriage``: the
        corruptions' names) as JSON, what ``get_...`` reads. Raises NotFound."""

    # --- memos and code conversions ----------------------------------------------------------
    def memo_rows(self) -> Iterator[dict[str, Any]]:
        """Every memo line, ordered by id (fields of the spec's memo line)."""

    def memo_rows_of(self, client: str, shipment_number: str) -> list[dict[str, Any]]:
        """The memo lines of one shipment (by client and shipment number), ordered by id; cheap."""

    def get_memo(self, memo_id: int) -> dict[str, Any]: ...

    def code_conversion_rows(self) -> Iterator[dict[str, Any]]:
        """Every code conversion record (assumption A14), ordered by id."""

    def get_code_conversion(self, conversion_id: int) -> dict[str, Any]: ...


class EventsAPI(Protocol):
    def create(self, shipment_id: int, event_type: str, event: Mapping[str, Any]) -> dict[str, Any]:
        """Raises NotFound, Conflict (event+type exists), Invalid (bad code/type). Moves last-modified."""

    def update(self, shipment_id: int, code: str, event_type: str, event: Mapping[str, Any]) -> dict[str, Any]:
        """Raises NotFound (shipment or event+type), Invalid. Fields not sent keep their value. Moves last-modified."""


class EFilesAPI(Protocol):
    def store(self, efile: Mapping[str, Any]) -> dict[str, Any]: ...

    def get(self, efile_id: int, cascade: bool = False) -> dict[str, Any]: ...

    def delete(self, efile_id: int) -> dict[str, Any]: ...

    def rows(self, shipment_ids: Iterable[int] | None = None) -> Iterator[dict[str, Any]]:
        """Every E-File with references (no document), for the lookup; with ``shipment_ids``, at
        least those referencing one of them (a store may narrow its scan with an index)."""

    def references(self, efile_id: int) -> list[dict[str, Any]]: ...

    def add_reference(self, efile_id: int, reference: Mapping[str, Any]) -> None: ...

    def delete_reference(self, efile_id: int, reference: Mapping[str, Any]) -> None: ...

    def roles(self, efile_id: int) -> list[dict[str, Any]]: ...

    def add_role(self, efile_id: int, role: str) -> None: ...

    def delete_role(self, efile_id: int, role: Mapping[str, Any]) -> None: ...


class WebhooksAPI(Protocol):
    def record(self, payload: Mapping[str, Any]) -> int:
        """Keep a received webhook payload (a JSON object, else Invalid); its id."""


class ChangesAPI(Protocol):
    """Change over time (Python API; also behind the opt-in HTTP control surface)."""

    def modify_shipments(self, count: int) -> list[int]:
        """Change `count` live shipments (fields, goods added/removed, estimates revised, new events) in one
        second; returns ids."""

    def progress_shipments(self) -> list[int]:
        """New versions of the open shipments with an event come due since their last one (due actuals in,
        estimates revised), in one second; returns ids."""

    def create_shipments(self, count: int) -> list[int]: ...

    def delete_shipments(self, count: int) -> list[int]: ...

    def touch_shipments(self, shipment_ids: list[int]) -> None:
        """Give these shipments a new version, all last modified in one second (A8; for targeted tests)."""

    def move_milestone(self, shipment_id: int, code: str, event_type: str, at: int) -> str:
        """Move one milestone's estimate (ESTIMATED) or actual (ACTUAL) to ``at`` (epoch seconds) in a
        new version (A8; for targeted tests); its ``last_modified_date_time``. Raises NotFound, Invalid."""


class SnapshotsAPI(Protocol):
    """The service's data going back in time, as a test server reset every night does."""

    def take(self) -> dict[str, Any]:
        """Take a snapshot now (one is taken at the start) -> ``{"snapshot_at", "shipments", "efiles"}``."""

    def reset(self) -> dict[str, Any]:
        """The data (and its id counters) back to the snapshot, the clock going on ->
        ``{"snapshot_at", "shipments", "reverted", "vanished", "restored", "ids": {...}}``."""


class StoreAPI(Protocol):
    """What the HTTP layer holds: the store's parts."""

    @property
    def clock(self) -> ClockAPI: ...

    @property
    def reader(self) -> ReaderAPI: ...

    @property
    def events(self) -> EventsAPI: ...

    @property
    def efiles(self) -> EFilesAPI: ...

    @property
    def webhooks(self) -> WebhooksAPI: ...

    @property
    def changes(self) -> ChangesAPI: ...

    @property
    def snapshots(self) -> SnapshotsAPI: ...
