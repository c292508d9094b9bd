"""Every setting, declared once: one typed model per concern, with its default and a one-line description,
and where each value comes from.

A setting's name is its field's (its alias where the field has one: a duration's name ends in ``_minutes``).
It is set, the first that sets it winning:

- by a flag of a command, or a field of a Dagster resource (``defs.resources``, whose fields are derived
  from these models);
- by the environment: ``FREIGHT_`` + the name in capitals (``page_size`` -> ``FREIGHT_PAGE_SIZE``); an empty
  variable is unset; one older name is still read (:data:`FORMER_NAMES`);
- by the settings file: ``freight.toml`` in the working directory, or the file ``FREIGHT_SETTINGS_FILE``
  names, one table per concern (``[sync]`` ``page_size = 200``);
- else its default.

:func:`load_settings` reads them all and refuses bad values with one line each (:class:`BadSettings`);
``freight-pipeline settings`` shows the result and where each value came from. The few ``FREIGHT_*``
variables that are not settings (the pipeline sets them for dbt, or they name the settings file) are declared
here too, as ``*_ENV`` constants.
"""

from __future__ import annotations

import datetime as dt
import os
import re
import tomllib
import zoneinfo
from collections.abc import Collection, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal, get_args, get_origin
from urllib.parse import urlsplit

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    SecretStr,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic.fields import FieldInfo

REPO_ROOT = Path(__file__).resolve().parents[1]
"""The checkout the package runs from (editable install): dbt project, workspace.yaml, .dagster_home."""

PREFIX = "FREIGHT_"
SETTINGS_FILE_ENV = "FREIGHT_SETTINGS_FILE"
"""The settings file to read (else ``freight.toml`` in the working directory, when there is one)."""
DEFAULT_SETTINGS_FILE = "freight.toml"
DBT_DATABASE_ENV = "FREIGHT_DBT_DATABASE"
"""Not a setting: the variable ``dbt_models/profiles.yml`` reads the DuckDB path from (set by the pipeline)."""
DBT_TEST_ROWS_ENV = "FREIGHT_DBT_TEST_ROWS"
"""Not a setting: ``changed`` makes the build's data tests on models whose rows change only with their shipment
read the changed shipments' rows only (``dbt_models/macros/test_rows.sql``; set by the pipeline per build,
read at run time, never at parse time); else every row."""
INTERNAL_VARIABLES = (SETTINGS_FILE_ENV, DBT_DATABASE_ENV, DBT_TEST_ROWS_ENV)
"""The ``FREIGHT_*`` variables that are not settings (never reported as unknown)."""


MAX_MINUTES = 100 * 365 * 24 * 60
"""The longest duration a setting takes, in minutes (a hundred years): one longer overflows the date arithmetic of a
run that uses it, half-way (was: a traceback, or a stream failing after the others published)."""
MAX_COUNT = 2**31 - 1
"""The largest count a setting takes: a 32-bit integer, which every library it reaches reads whole (DuckDB's
``INTEGER``, C's ``int``); one beyond 64 bits failed the run half-way."""


def _minutes(value: Any) -> Any:
    """A duration given in whole minutes (a number, or its text) as a timedelta."""
    if isinstance(value, str):
        text = value.strip()
        if not text.isdigit():
            raise ValueError("must be whole minutes (0 or more)")
        value = int(text)
    elif isinstance(value, bool | float):  # a float would be read as seconds
        raise ValueError("must be whole minutes (0 or more)")
    if isinstance(value, int):
        if value < 0:
            raise ValueError("must be whole minutes (0 or more)")
        if value > MAX_MINUTES:
            raise ValueError(f"must be whole minutes from 0 to {MAX_MINUTES} (a hundred years)")
        return dt.timedelta(minutes=value)
    return value


def _switch(value: Any) -> Any:
    if isinstance(value, str):
        text = value.strip().lower()
        if text in ("1", "true", "yes", "on"):
            return True
        if text in ("0", "false", "no", "off"):
            return False
        raise ValueError("must be 1/true/yes/on or 0/false/no/off")
    return value


def _ids(value: Any) -> Any:
    """Comma-separated whole numbers (``20000,40000``) as a tuple."""
    if isinstance(value, str):
        try:
            return tuple(int(part) for part in value.split(",") if part.strip())
        except ValueError:
            raise ValueError("must be shipment ids, comma-separated (20000,40000)") from None
    return value


def start_cursor_text(value: Any) -> Any:
    """A start cursor as ``YYYY-MM-DD HH:MM:SS`` (given as ``YYYY-MM-DD``, with a space or a ``T`` before the time);
    blank: None. Refused here, before a run makes its first request, not when the walk reads it."""
    if not isinstance(value, str):
        return value
    text = value.strip().replace("T", " ")
    if not text:
        return None
    date, _, time = text.partition(" ")
    try:
        day = dt.date.fromisoformat(date)
        at = dt.time.fromisoformat(time.strip() or "00:00:00")
    except ValueError:
        raise ValueError("must be YYYY-MM-DD or YYYY-MM-DD HH:MM:SS (the service's wall clock)") from None
    if len(date) != 10 or at.tzinfo is not None or at.microsecond:
        raise ValueError("must be YYYY-MM-DD or YYYY-MM-DD HH:MM:SS (the service's wall clock)")
    return f"{day.isoformat()} {at:%H:%M:%S}"


def _not_negative(value: dt.timedelta | None) -> dt.timedelta | None:
    if value is not None and value < dt.timedelta(0):
        raise ValueError("must not be negative")
    return value


def _positive(value: dt.timedelta) -> dt.timedelta:
    if value <= dt.timedelta(0):
        raise ValueError("must be positive")
    return value


def _minutes_or_never(value: Any) -> Any:
    """As :func:`_minutes`, or ``never``: None."""
    if isinstance(value, str) and value.strip().lower() == "never":
        return None
    try:
        return _minutes(value)
    except ValueError as exc:
        raise ValueError(f"{exc}, or never") from None


Minutes = Annotated[dt.timedelta, BeforeValidator(_minutes), AfterValidator(_not_negative)]
"""A duration set in whole minutes."""
PositiveMinutes = Annotated[dt.timedelta, BeforeValidator(_minutes), AfterValidator(_positive)]
"""A duration set in whole minutes, above 0 (an age limit: 0 would hold every run too old)."""
MinutesOrNever = Annotated[dt.timedelta | None, BeforeValidator(_minutes_or_never), AfterValidator(_not_negative)]
"""A duration set in whole minutes, or ``never`` (None)."""
OptionalMinutes = Annotated[dt.timedelta | None, BeforeValidator(_minutes), AfterValidator(_not_negative)]
"""A duration set in whole minutes, or unset (None)."""
Switch = Annotated[bool, BeforeValidator(_switch)]
Lowered = BeforeValidator(lambda value: value.strip().lower() if isinstance(value, str) else value)
"""A choice read whatever its case and surrounding blanks (``On``, `` VHOST``)."""
HomePath = Annotated[Path, AfterValidator(Path.expanduser)]
"""A path whose ``~`` is the user's home, however it was set (no shell expands it in a settings file, a systemd
``Environment=`` line or a Dagster resource's field)."""
Share = Annotated[float, Field(ge=0, le=1)]
Count = Annotated[int, Field(ge=0, le=MAX_COUNT)]
Positive = Annotated[int, Field(ge=1, le=MAX_COUNT)]
MAX_WORKERS = 64
"""The most worker processes a sync or a rebuild forks to normalize: each is a process of its own, and a count
beyond any machine's cores only forks toward the system's limit (100,000 made 700 processes in five seconds, and a
rebuild of four seconds did not end in a minute)."""
Workers = Annotated[int, Field(ge=0, le=MAX_WORKERS)]


def http_url(url: str) -> str:
    """``url`` stripped, its scheme in lower case (``HTTPS://`` is ``https://``: schemes are case-insensitive), when it
    is an http(s) URL naming a host (and a port that is a number)."""
    stripped = url.strip()
    parts = urlsplit(stripped)
    if parts.scheme not in ("http", "https"):
        raise ValueError("is not an http(s) URL (e.g. https://tms.example.com)")
    if not parts.hostname:
        raise ValueError("names no host (e.g. https://tms.example.com)")
    try:
        parts.port  # noqa: B018 (a port that is not a number, or out of range, raises here)
    except ValueError:
        raise ValueError("has a port that is not a number from 0 to 65535") from None
    return parts.scheme + stripped[len(parts.scheme):]


class SettingsModel(BaseModel):
    """One concern's settings: a frozen value; its table in the settings file is :attr:`section`."""

    model_config = ConfigDict(frozen=True, populate_by_name=True, extra="forbid", arbitrary_types_allowed=True,
                              allow_inf_nan=False)  # an infinite delay or budget would hang a run
    section: ClassVar[str]

    @classmethod
    def settings_fields(cls) -> dict[str, str]:
        """Each setting's name -> its field's name (a model may add fields that are not settings)."""
        return {
            (info.alias or name): name
            for name, info in cls.model_fields.items()
            if not (info.json_schema_extra or {}).get("runtime")
        }

    @classmethod
    def configured(cls, environ: Mapping[str, str] | None = None) -> Any:
        """This concern's settings as the environment and the settings file say (:func:`load_settings`; only
        this concern's values are checked)."""
        return _load(None, "flag", environ, (cls,))[0][cls.section]

    @field_validator("*", mode="before")
    @classmethod
    def _no_switch_for_a_number(cls, value: Any, info: ValidationInfo) -> Any:
        """``true`` or ``false`` (the settings file's, a resource's) where a number is asked: refused, not read as
        1 or 0 (pydantic would, for an int or a float)."""
        if isinstance(value, bool) and info.field_name is not None and \
                _core_type(cls.model_fields[info.field_name].annotation) in (int, float):
            raise ValueError("must be a number, not true or false")
        return value


class ServiceSettings(SettingsModel):
    """Where the freight service is and who we are there (the password never shown)."""

    section: ClassVar[str] = "service"
    base_url: str = Field(
        "http://127.0.0.1:8765",
        description="base URL of the freight service (the simulator's default port); no user, password, query or "
        "fragment in it",
    )
    username: str = Field("demo", min_length=1, description="user the operator issued")
    password: SecretStr = Field(
        SecretStr(""),
        description="its password: required by a sync; never logged, shown or in Dagster's metadata (in Dagster: the "
        "variable, or `dg.EnvVar`)",
    )

    def __init__(
        self,
        base_url: str | None = None,
        username: str | None = None,
        password: str | SecretStr | None = None,
        **values: Any,
    ) -> None:
        given = {"base_url": base_url, "username": username, "password": password}
        super().__init__(**{name: value for name, value in given.items() if value is not None}, **values)

    @field_validator("base_url")
    @classmethod
    def _http_url(cls, url: str) -> str:
        # an @ anywhere after the scheme, before the address is read: a password holding / ? or # ends the host part
        # early, and its rest would read as a port or a path
        if "@" in url.partition("://")[2]:  # the bearer calls' Authorization cannot go with a URL's credentials
            raise ValueError("holds a user or password (an @ after the scheme): the service's are FREIGHT_USERNAME and "
                             "FREIGHT_PASSWORD (its token request), and the client sends no other")
        url = http_url(url)
        parts = urlsplit(url)
        if parts.query or parts.fragment:
            raise ValueError("has a query or fragment: give the service's address alone (each request's path is "
                             "added to it)")
        return url

    @property
    def secret(self) -> str:
        """The password itself, for the one place that sends it (the token request)."""
        return self.password.get_secret_value()


class SyncTuning(SettingsModel):
    """How a sync run reads the service (``sync.settings.SyncSettings`` adds what each run is handed)."""

    section: ClassVar[str] = "sync"
    page_size: int = Field(
        500, ge=1, le=500, description="rows asked per page of every paged read (the service serves at most 500)"
    )
    request_attempts: Positive = Field(
        5,
        description="attempts per request, the first included (`1`: a failure is not retried; a refusal with "
        "`Retry-After` is no attempt; `client/retry.py`)",
    )
    request_base_delay_seconds: float = Field(
        0.5, ge=0, description="the backoff before a request's first retry, doubling for each next one"
    )
    request_max_delay_seconds: float = Field(30.0, ge=0, description="the longest backoff between two attempts")
    request_jitter: Switch = Field(
        True, description="each backoff drawn at random below it (full jitter); `0`: the exact backoff"
    )
    request_budget_seconds: float = Field(
        120.0, ge=0, description="no retry starts whose wait would end later than this after the first attempt"
    )
    request_retry_after_cap_seconds: float = Field(
        60.0, ge=0, description="the longest `Retry-After` honoured (longer ones are shortened)"
    )
    concurrency: Positive = Field(
        64,
        description="the most requests in flight at once; the limit in force adapts "
        "within it (AIMD, `client/limiter.py`)",
    )
    initial_concurrency: Positive = Field(
        16, description="requests in flight at the start of a run (at most `concurrency`)"
    )
    adaptive_concurrency: Switch = Field(
        True, description="`0`: exactly `concurrency` requests in flight, never adapted"
    )
    hedge_share: Share = Field(
        0.05,
        description="hedged reads: a read (GET or lookup) still unanswered after 3 x the p95 latency of its kind (at "
        "least 100 ms) is sent once more and the first answer wins; at most this share of the reads are "
        "such copies, each within the in-flight limit, none within 2 s of a 429/503 (`client/hedge.py`); "
        "`0`: none",
    )
    overlap: Minutes = Field(
        dt.timedelta(minutes=10),
        alias="overlap_minutes",
        description="how far before the cursor each run re-reads (late commits, clock skew)",
    )
    offset_step_guard: Minutes = Field(
        dt.timedelta(hours=1),
        alias="offset_step_guard_minutes",
        description="how much further back each run re-reads when the service stamps UTC "
        "offsets (the hour a fall-back repeats; [sync.md](sync.md))",
    )
    start_cursor: Annotated[str | None, BeforeValidator(start_cursor_text)] = Field(
        None,
        description="sync only shipments last modified at or after this "
        "`YYYY-MM-DD[ HH:MM:SS]` (service wall clock); unset: all",
    )
    reconcile_interval: MinutesOrNever = Field(
        dt.timedelta(hours=6),
        alias="reconcile_interval_minutes",
        description="how often a run lists every live shipment id to remove deleted ones and refetch missing or stale "
        "ones (`0`: every run, the demo's; `never`)",
    )
    count_attempts: Positive = Field(
        3,
        description="how often a lookup whose rows disagree with `X-Row-Count` is "
        "asked again before its stream fails without writing it",
    )
    fetch_batch_size: Positive = Field(
        250, description="shipments written per transaction, with the cursor of the batch's last"
    )
    fetch_window: Positive = Field(64, description="the most shipments being fetched at once (bounds a run's memory)")
    normalize_workers: Workers | None = Field(
        None, description="worker processes that normalize the shipments stream's batches (forked; `0`: in the "
        "sync's own process); default: one where the machine has a second core, forked once a run has more "
        f"shipments to normalize than `IN_PROCESS_UP_TO` (`sync/workers.py`); at most {MAX_WORKERS}",
    )
    breaker_max_share: Share = Field(
        0.05,
        description="a stream's run stops when more than this share of the records "
        "it read failed (and at least `breaker_min_failures` did): not a record's fault",
    )
    breaker_min_failures: Positive = Field(10, description="failures below this count never trip the breaker")
    retry_after: Minutes = Field(
        dt.timedelta(minutes=10),
        alias="retry_after_minutes",
        description="a quarantined record is retried by the first run after this long, then "
        "after twice as long after each further failure",
    )
    retry_after_max: Minutes = Field(
        dt.timedelta(hours=24),
        alias="retry_after_max_minutes",
        description="the longest wait before a quarantined record is retried",
    )
    documents: Switch = Field(
        True,
        alias="sync_documents",
        description="`0`: the documents stream reads nothing (`freight.shipment_documents` stays as it is)",
    )
    code_conversions: Switch = Field(
        True,
        alias="sync_code_conversions",
        description="`0`: the code-conversions stream reads nothing (an account without the basic-data permission)",
    )
    code_conversion_count: Switch = Field(
        True,
        description="`0`: the code-conversions stream does not check its scroll against the code-conversion "
        "lookup's count (a service whose lookup counts conversions the scroll does not serve; docs/real-services.md)",
    )
    history: Switch = Field(
        True,
        description="`0`: the sync records no versions in `freight_history` (the tables stay as they are); the first "
        "run with it on again brings the history up to the rows held (sync.md, History)",
    )
    documents_chunk: Positive = Field(
        50, description="shipments per E-File lookup of the documents stream (at most half of page_size)"
    )
    documents_relist_interval: MinutesOrNever = Field(
        dt.timedelta(hours=24),
        alias="documents_relist_minutes",
        description="how often the documents stream lists the E-Files of every held shipment, not only of those "
        "written since its last run (`0`: every run; `never`; see A38)",
    )
    document_content: Switch = Field(
        False,
        description="`1`: also copy each document's bytes, once per content, to `<data "
        "dir>/documents/<sha256[:2]>/<sha256>` (path, size and hash in `shipment_documents`); the first run after "
        "a switch, either way, lists every shipment's E-Files again",
    )
    service_timezone: str = Field(
        "UTC",
        min_length=1,
        description="the IANA time zone (`Europe/Berlin`) in which date-times the service sends without a UTC offset "
        "are read: its stamps, E-File dates, DateTime objects whose `zone_offset` is null; every run says "
        "so while the service sends such values (real-services.md, a clock without a UTC offset); and the zone "
        "whose wall clock the shipment lookup's keys hold when the stamps are written at another offset (in UTC)",
    )
    restore_probe: Count = Field(
        50,
        description="the most recently changed shipments held that each run looks up again by id (one lookup): one "
        "that vanished or went back in time means a restore, and the run reconciles at once; `0`: off",
    )
    freshness_sample: Count = Field(
        20,
        description="open shipments whose events and memo lines each run re-reads (those read longest ago) to find "
        "changes the service makes without moving their last-modified instant (`0`: none)",
    )
    events_refresh: Annotated[Literal["auto", "on", "off"], Lowered] = Field(
        "auto",
        description="the rolling re-read of open shipments' events: `auto` (once a sample found such "
        "changes), `on`, `off`",
    )
    events_max_age: PositiveMinutes = Field(
        dt.timedelta(hours=4),
        alias="events_max_age_minutes",
        description="with the rolling re-read on, the most an open shipment's events go unread (a run re-reads those "
        "read three quarters of it ago; the WARN check `events_within_max_age` says when one is older)",
    )
    events_refresh_share: Share = Field(
        1.0,
        description="the rolling re-read's requests in a run: at most this share of "
        "the run's other requests, and at least 200",
    )

    @model_validator(mode="after")
    def _retry_waits_in_order(self) -> SyncTuning:
        if self.retry_after_max < self.retry_after:
            raise ValueError("retry_after_minutes must not be above retry_after_max_minutes")
        return self

    @field_validator("service_timezone")
    @classmethod
    def _known_zone(cls, name: str) -> str:
        try:  # the zone ``datetimes.service_zone`` makes of it
            zoneinfo.ZoneInfo(name.strip())
        except (zoneinfo.ZoneInfoNotFoundError, ValueError):
            raise ValueError(f"{name!r} is not an IANA time zone (such as Europe/Berlin or UTC)") from None
        return name.strip()


PLAIN_SIZE = re.compile(r"\d{1,6}(\.\d+)?\s*(B|KB|MB|GB|TB|KIB|MIB|GIB|TIB)", re.IGNORECASE)
"""A memory size every DuckDB reads (``512MB``, ``1.5GiB``), taken without asking DuckDB: at most six digits before
its unit (a million TB is still one; DuckDB refuses one beyond 64 bits of bytes, ``99999999TB``, asked then)."""


@lru_cache(maxsize=32)
def _duckdb_memory_size(value: str) -> str:
    """``value`` when DuckDB reads it as a memory size (asked once per value unless it is plainly one), else
    ValueError saying why."""
    if PLAIN_SIZE.fullmatch(value):
        return value
    import duckdb

    try:
        duckdb.connect(config={"memory_limit": value}).close()
    except duckdb.Error as exc:
        reason = str(exc).strip().splitlines()[0].removeprefix("Parser Error: ")
        raise ValueError(f"is not a memory size DuckDB reads, e.g. 512MB or 2GB ({reason})") from None
    return value


MemorySize = Annotated[str, AfterValidator(lambda value: _duckdb_memory_size(value.strip()))]
"""A DuckDB ``memory_limit`` (``512MB``, ``2GB``)."""


class StorageSettings(SettingsModel):
    """Where the warehouse lives and how its DuckDB connections are set up (``sync``: the working database's;
    ``publish``: the publish's, maintenance's and readers'), and the published file's storage version
    (checked when used: ``warehouse.ddl.checked_storage_version``)."""

    section: ClassVar[str] = "storage"
    data_dir: HomePath = Field(
        Path("./data"),
        description="everything the pipeline writes: `work/` (private working DB), `warehouse.duckdb`, `parquet/`",
    )
    sync_memory_limit: MemorySize = Field(
        "128MB",
        alias="duckdb_memory_limit",
        min_length=1,
        description="DuckDB `memory_limit` of the sync's connections to the working database (DuckDB's own default is "
        "80 % of the RAM, and its buffer pool keeps what it touched)",
    )
    publish_memory_limit: MemorySize = Field(
        "512MB",
        alias="duckdb_publish_memory_limit",
        min_length=1,
        description="the same for the publish's connections (its Parquet export needs more)",
    )
    storage_version: str = Field(
        "v1.5.0",
        alias="publish_storage_version",
        min_length=1,
        description="the DuckDB storage version of the published `warehouse.duckdb`: `v1.5.0` opens in DuckDB 1.5.0 "
        "and later (the BI tools' engines), `latest` only in 2.0 and later; a new working database is "
        "created in it too, so the publish stays a byte copy (connecting.md)",
    )
    min_free_mb: Count = Field(
        100, description="megabytes the data directory's disk must have free for `sync`, `demo` or `ui` to start"
    )

    def memory_limit(self, purpose: str = "sync") -> str:
        """The memory limit of a connection for ``purpose`` (``sync`` or ``publish``)."""
        return {"sync": self.sync_memory_limit, "publish": self.publish_memory_limit}[purpose]


class ScheduleSettings(SettingsModel):
    """The Dagster schedules and the freshness of the published data."""

    section: ClassVar[str] = "schedules"
    schedules_running: Switch = Field(
        False, description="`1`: the schedules and the freshness sensor start switched on (`make ui` sets it)"
    )
    max_sync_age: PositiveMinutes = Field(
        dt.timedelta(minutes=60),
        alias="max_sync_age_minutes",
        description="the freshness check of `freight/shipments` warns when its last successful sync is older "
        "(evaluated every 5 minutes by `shipments_freshness_sensor`)",
    )
    run_history_retention: MinutesOrNever = Field(
        dt.timedelta(days=30),
        alias="run_history_retention_minutes",
        description="how long Dagster keeps a finished run (30 days): `dagster_history_job` (daily at 04:00 UTC) "
        "deletes older ones with their event and compute logs, never one in progress or holding an asset's or a "
        "check's latest event (Dagster, run history); `never`: none",
    )


class MartsSettings(SettingsModel):
    """How the dbt marts are built."""

    section: ClassVar[str] = "marts"
    dbt_memory_limit: MemorySize = Field(
        "512MB",
        min_length=1,
        description="DuckDB `memory_limit` of the dbt build (`dbt_models/profiles.yml` reads it), and of a build "
        "replayed on the run's connection",
    )
    dbt_replay: Switch = Field(
        True,
        description="a build of a key whose statements dbt sent before on the same catalog replays them on the run's "
        "own connection, without a dbt process; `0`: dbt runs every build (marts.md)",
    )
    dbt_full_refresh: Switch = Field(
        False,
        description="`1`: the next dbt build rebuilds every mart from scratch "
        "(`sync --full-refresh` sets it for one run)",
    )
    full_check_interval: Minutes = Field(
        dt.timedelta(hours=24),
        alias="full_check_interval_minutes",
        description="how often a run is a full check: its dbt build tests every row and the check "
        "`history_matches_current` compares every shipment; between two, only the changed shipments' rows "
        "(`0`: every run; marts.md)",
    )
    on_time_tolerance: OptionalMinutes = Field(
        None,
        alias="on_time_tolerance_minutes",
        description="how late an arrival may be and still count as on time (dbt "
        "var `on_time_tolerance_minutes`); unset: the project's 60",
    )
    dbt_worker_server: str | None = Field(
        None,
        description="the socket of a fork server of dbt workers (`python -m freight_pipeline.marts.worker_server "
        "--socket PATH`: it serves until its input ends when that is a pipe, else until SIGTERM, as a service of its "
        "own; its socket file removed as it ends, a killed one's replaced): each run's dbt worker is forked from it "
        "with dbt imported and the project "
        "parsed (it listens as it starts: a run that asks while it warms up waits for it); unset, or nothing "
        "listening (a warning in the run's log): a new process",
    )


class LakeConfig(SettingsModel):
    """Lake mode (``lake.settings.LakeSettings`` parses it): unset catalog, the embedded DuckDB file."""

    section: ClassVar[str] = "lake"
    lake_catalog_uri: str | None = Field(
        None,
        repr=False,  # it may hold the catalog's password
        description="the DuckLake catalog: `postgresql://user[:password]@host/db`, "
        "`sqlite:///path`, `duckdb:///path`; unset: the embedded DuckDB file",
    )
    lake_data_uri: str | None = Field(
        None,
        description="where the lake's Parquet goes: a path or `s3://bucket/prefix` (with the usual `AWS_*` variables)",
    )
    lake_s3_url_style: Annotated[Literal["path", "vhost"] | None, Lowered] = Field(
        None, description="`path` or `vhost`; unset: `path` with a custom endpoint, else `vhost`"
    )
    lake_retention: Minutes = Field(
        dt.timedelta(days=7),
        alias="lake_retention_minutes",
        description="how long snapshots stay readable (time travel) before maintenance expires them",
    )
    backfill_id_boundaries: Annotated[tuple[int, ...], BeforeValidator(_ids)] = Field(
        (),
        description="comma-separated shipment ids where one backfill partition ends and the next begins "
        "(`20000,40000`: `0-19999`, `20000-39999`, `40000-`); unset: one partition",
    )
    backfill_batch_size: Positive = Field(500, description="shipments per transaction of a backfill partition")

    @field_validator("backfill_id_boundaries")
    @classmethod
    def _increasing(cls, ids: tuple[int, ...]) -> tuple[int, ...]:
        if any(b <= a for a, b in zip((0, *ids), ids, strict=False)):
            raise ValueError("must be increasing shipment ids above 0, comma-separated (20000,40000)")
        return ids


_URL_START = re.compile(r"\s+|,(?=\s*[A-Za-z][A-Za-z0-9+.-]*://)")


def _urls(value: Any) -> Any:
    """Notification URLs separated by spaces, new lines or a comma before the next ``scheme://`` (a comma
    inside a URL, as in ``mailto://...?to=a@x.com,b@x.com``, stays in it)."""
    if isinstance(value, str):
        return tuple(url for url in _URL_START.split(value.strip()) if url)
    return value


def _each_a_url(urls: tuple[str, ...]) -> tuple[str, ...]:
    """``urls`` checked, each once (a destination listed twice gets each message once)."""
    for url in urls:
        if not re.match(r"^[A-Za-z][A-Za-z0-9+.-]*://.", url):
            raise ValueError(f"must be notification URLs (scheme://...), one of them is {masked_url(url)!r}")
    return tuple(dict.fromkeys(urls))


def masked_url(url: str) -> str:
    """A notification URL as messages show it: its scheme only (tokens and passwords sit anywhere after it)."""
    scheme, found, _ = url.partition("://")
    return f"{scheme}://***" if found else "***"


class AlertSettings(SettingsModel):
    """Where the alerts go (docs/operations.md, Alerts): each problem once when it opens, again while it stays
    open, and once when it is resolved."""

    section: ClassVar[str] = "alerts"
    alert_urls: Annotated[tuple[str, ...], BeforeValidator(_urls), AfterValidator(_each_a_url)] = Field(
        (),
        repr=False,  # their tokens and passwords are secrets
        description="notification URLs in Apprise's forms (`json://`, `slack://`, `workflows://` (Teams), "
        "`mailtos://`, ...), separated by spaces; unset: no alerts",
    )
    alert_level: Annotated[Literal["error", "warning"], Lowered] = Field(
        "warning", description="the least severe problem that alerts: `error` or `warning`"
    )
    alert_deployment: str | None = Field(
        None, description="this deployment's name at the head of each message; unset: the machine's host name"
    )
    alert_repeat: MinutesOrNever = Field(
        dt.timedelta(days=1),
        alias="alert_repeat_minutes",
        description="a problem still open alerts again after this long; `never`: only when it opens and closes",
    )
    alert_timeout_seconds: float = Field(
        10.0, gt=0, le=300, description="how long a destination may take to accept one message"
    )
    alert_quarantined_records: Count = Field(
        10, description="quarantined records of a stream that alert: this many or more waiting in the retry queue"
    )
    dagster_url: str | None = Field(
        None, description="the Dagster UI's address (`http://dagster.example.com:3000`): each alert of a Dagster run "
        "links to the run there; unset: no link"
    )

    @field_validator("dagster_url")
    @classmethod
    def _http(cls, value: str | None) -> str | None:
        if not (value and value.strip()):
            return None
        if "@" in value.partition("://")[2]:  # before the address is read, as the service's (a password's / ? #)
            raise ValueError("holds a user or password: each alert's link shows it to everyone who reads the alert")
        return http_url(value).rstrip("/")


CONCERNS: tuple[type[SettingsModel], ...] = (
    ServiceSettings,
    SyncTuning,
    StorageSettings,
    ScheduleSettings,
    MartsSettings,
    LakeConfig,
    AlertSettings,
)
FORMER_NAMES = {"FREIGHT_HEDGE": "hedge_share"}
"""Variables of an earlier release, still read -> the setting they set (the new name wins when both are set)."""


def variable(name: str) -> str:
    """The environment variable of setting ``name``."""
    return PREFIX + name.upper()


def setting_names() -> dict[str, type[SettingsModel]]:
    """Every setting's name -> its concern."""
    return {name: concern for concern in CONCERNS for name in concern.settings_fields()}


def field_of(name: str) -> FieldInfo:
    """The declaration of setting ``name``."""
    concern = setting_names()[name]
    return concern.model_fields[concern.settings_fields()[name]]


SECRET_SETTINGS = tuple(name for name in setting_names()
                        if field_of(name).annotation is SecretStr or field_of(name).repr is False)
"""Settings never shown whole (a secret type, or left out of the repr): the password, the catalog URI."""
PASSWORDS = tuple(name for name in setting_names() if field_of(name).annotation is SecretStr)
"""Settings of a password, taken as given but for a line's end (blanks may be part of one)."""


# The variables other modules name (in messages, in the environment they give a process), derived by the rule
BASE_URL_ENV = variable("base_url")
USERNAME_ENV = variable("username")
PASSWORD_ENV = variable("password")
DATA_DIR_ENV = variable("data_dir")
SERVICE_TIMEZONE_ENV = variable("service_timezone")
RECONCILE_ENV = variable("reconcile_interval_minutes")
DOCUMENTS_ENV = variable("sync_documents")
CODE_CONVERSIONS_ENV = variable("sync_code_conversions")
HISTORY_ENV = variable("history")
DOCUMENT_CONTENT_ENV = variable("document_content")
DOCUMENTS_RELIST_ENV = variable("documents_relist_minutes")
HEDGE_ENV = variable("hedge_share")
NORMALIZE_WORKERS_ENV = variable("normalize_workers")
FRESHNESS_SAMPLE_ENV = variable("freshness_sample")
EVENTS_REFRESH_ENV = variable("events_refresh")
EVENTS_MAX_AGE_ENV = variable("events_max_age_minutes")
DUCKDB_MEMORY_LIMIT_ENV = variable("duckdb_memory_limit")
PUBLISH_MEMORY_LIMIT_ENV = variable("duckdb_publish_memory_limit")
PUBLISH_STORAGE_VERSION_ENV = variable("publish_storage_version")
MIN_FREE_MB_ENV = variable("min_free_mb")
SCHEDULES_RUNNING_ENV = variable("schedules_running")
MAX_SYNC_AGE_ENV = variable("max_sync_age_minutes")
ALERT_URLS_ENV = variable("alert_urls")
ALERT_TIMEOUT_ENV = variable("alert_timeout_seconds")
DBT_MEMORY_LIMIT_ENV = variable("dbt_memory_limit")
DBT_REPLAY_ENV = variable("dbt_replay")
DBT_FULL_REFRESH_ENV = variable("dbt_full_refresh")
FULL_CHECK_ENV = variable("full_check_interval_minutes")
ON_TIME_TOLERANCE_ENV = variable("on_time_tolerance_minutes")
DBT_WORKER_SERVER_ENV = variable("dbt_worker_server")
LAKE_CATALOG_URI_ENV = variable("lake_catalog_uri")
LAKE_DATA_URI_ENV = variable("lake_data_uri")
LAKE_RETENTION_ENV = variable("lake_retention_minutes")


@dataclass(frozen=True)
class Settings:
    """Every concern's settings, and where each value came from (setting name -> ``default``, ``file PATH``,
    ``environment NAME`` or the origin the caller named: ``flag``, ``Dagster resource``)."""

    service: ServiceSettings
    sync: SyncTuning
    storage: StorageSettings
    schedules: ScheduleSettings
    marts: MartsSettings
    lake: LakeConfig
    alerts: AlertSettings
    sources: Mapping[str, str]
    unknown_variables: tuple[str, ...] = ()
    """``FREIGHT_*`` variables that set nothing (a typo, or a name no release had): shown, not refused."""
    set_aside: tuple[str, ...] = ()
    """Bad values of the concerns the caller does not read (``load_settings``'s ``reads``), one line each: their
    concern takes its defaults; said, not refused."""

    def unknown_variable_lines(self) -> list[str]:
        """A warning for each of :attr:`unknown_variables`, as every command (and a Dagster run's log) says it."""
        return [f"{name} is set but is not a setting (a typo?): nothing reads it" for name in self.unknown_variables]


class BadSettings(ValueError):
    """Values that cannot be used: one line each, naming the setting, where it was set, the value and what is
    allowed."""

    def __init__(self, problems: list[str]) -> None:
        self.problems = problems
        super().__init__("\n".join(problems))


def settings_file(environ: Mapping[str, str]) -> Path | None:
    """The settings file to read: ``FREIGHT_SETTINGS_FILE`` (which must exist), else ``./freight.toml`` if any."""
    named = environ.get(SETTINGS_FILE_ENV, "").strip()
    if named:
        return Path(named).expanduser()
    default = Path(DEFAULT_SETTINGS_FILE)
    return default if default.is_file() else None


def _file_values(path: Path | None, problems: list[str],
                 entries: dict[type[SettingsModel], list[str]]) -> dict[str, Any]:
    """The settings file's values by setting name (its tables checked against the concerns): a file that cannot be
    read, a table that is no concern's or a key outside any table is a problem of no concern (in ``problems``: a
    caller that reads every concern refuses it, one that reads some sets it aside); an entry a concern's table does
    not know is that concern's (in ``entries``)."""
    if path is None:
        return {}
    try:
        tables = tomllib.loads(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError as exc:
        problems.append(f"{path} is not TOML: not UTF-8 text (byte {exc.start})")
        return {}
    except OSError as exc:
        problems.append(f"{SETTINGS_FILE_ENV}={str(path)!r} cannot be read: {exc.strerror or exc}")
        return {}
    except tomllib.TOMLDecodeError as exc:
        problems.append(f"{path} is not TOML: {exc}")
        return {}
    sections = {concern.section: concern for concern in CONCERNS}
    values: dict[str, Any] = {}
    for section, table in tables.items():
        concern = sections.get(section)
        if not isinstance(table, dict):
            problems.append(f"{path}: {section} is a key outside any table: each setting is in its table "
                            f"(the tables: {', '.join(sections)})")
            continue
        if concern is None:
            problems.append(f"{path}: [{section}] is not a table of settings (the tables: {', '.join(sections)})")
            continue
        for name, value in table.items():
            if name not in concern.settings_fields():
                entries.setdefault(concern, []).append(
                    f"{path}: [{section}] {name} is not a setting of [{section}] "
                    f"(they are: {', '.join(concern.settings_fields())})"
                )
            else:
                values[name] = value
    return values


def load_settings(
    overrides: Mapping[str, Any] | None = None, *, origin: str = "flag", environ: Mapping[str, str] | None = None,
    reads: Collection[type[SettingsModel]] = CONCERNS,
) -> Settings:
    """Every setting from ``overrides`` (setting name -> value; None: not given, said to come from ``origin``),
    the environment (default: this process's), the settings file and the defaults, validated; BadSettings with
    one line per bad value or file entry of the concerns the caller ``reads`` (those of the others are
    ``Settings.set_aside``, their concern at its defaults: a look at the warehouse is no sync)."""
    built, sources, unknown_variables, aside = _load(overrides, origin, environ, CONCERNS, reads)
    return Settings(**built, sources=sources, unknown_variables=unknown_variables,  # type: ignore[arg-type]
                    set_aside=tuple(aside))


def _load(
    overrides: Mapping[str, Any] | None,
    origin: str,
    environ: Mapping[str, str] | None,
    concerns: tuple[type[SettingsModel], ...],
    reads: Collection[type[SettingsModel]] | None = None,
) -> tuple[dict[str, Any], dict[str, str], tuple[str, ...], list[str]]:
    """``concerns``' settings by section, where each value came from, the unknown ``FREIGHT_*`` variables, and the
    problems of the concerns outside ``reads`` (None: every concern is read), which take their defaults."""
    env = os.environ if environ is None else environ
    problems: list[str] = []
    entries: dict[type[SettingsModel], list[str]] = {}  # each concern's table's unknown entries
    path = settings_file(env)
    unplaced: list[str] = []  # the file's problems of no concern
    from_file = _file_values(path, unplaced, entries)
    names = setting_names()
    from_env = {name: (variable(name), env[variable(name)]) for name in names if env.get(variable(name), "").strip()}
    for former, name in FORMER_NAMES.items():
        if name not in from_env and env.get(former, "").strip():
            from_env[name] = (former, env[former])
    known = {variable(name) for name in names} | set(FORMER_NAMES) | set(INTERNAL_VARIABLES)
    unknown_variables = tuple(sorted(name for name in env if name.startswith(PREFIX) and name not in known))
    given = {name: value for name, value in (overrides or {}).items() if value is not None}
    unknown = sorted(set(given) - set(names))
    if unknown:
        raise ValueError(f"not settings: {', '.join(unknown)}")
    sources: dict[str, str] = {}
    values: dict[type[SettingsModel], dict[str, Any]] = {concern: {} for concern in CONCERNS}
    shown_as: dict[str, str] = {}
    for name, concern in names.items():
        if concern not in concerns:
            continue
        if name in given:
            values[concern][name], sources[name] = given[name], origin
        elif name in from_env:
            env_name, raw = from_env[name]
            # a password keeps its blanks (it may begin or end with one, as in the file): only a line's end is no
            # part of it (a variable read from a file)
            value = raw.strip("\r\n") if name in PASSWORDS else raw.strip()
            values[concern][name], sources[name] = value, f"environment {env_name}"
        elif name in from_file:
            values[concern][name], sources[name] = from_file[name], f"file {path}"
        else:
            sources[name] = "default"
        shown_as[name] = name if sources[name] == "default" else _where(name, sources[name])
    built: dict[str, SettingsModel] = {}
    every = reads is None or set(CONCERNS) <= set(reads)
    # a caller that says it reads some concerns (status, the definitions' schedules, a sensor) is a look, no run: it
    # goes on without them (one concern's ``configured()`` refuses them, as a run does)
    problems += unplaced if every else []
    aside: list[str] = [] if every else [*unplaced]
    for concern in concerns:
        lines = list(entries.get(concern, ()))
        try:
            built[concern.section] = concern.model_validate(values[concern])
        except ValidationError as exc:
            lines += [_problem(error, concern, values[concern], shown_as) for error in exc.errors()]
        if not lines:
            continue
        if reads is None or concern in reads:
            problems += lines
        else:
            aside += lines
            built[concern.section] = concern.model_validate({})
    if problems:
        raise BadSettings(problems)
    return built, sources, unknown_variables, aside


def _problem(error: Any, concern: type[SettingsModel], values: Mapping[str, Any], shown_as: Mapping[str, str]) -> str:
    """One line: where the bad value was set, the value (masked when secret) and what is allowed."""
    name = str(error["loc"][0]) if error["loc"] else ""
    fields = concern.settings_fields()
    if not name:  # a rule between settings: each it names, with where it was set (or its default) and its value
        reason = str(error["msg"]).removeprefix("Value error, ")
        named = [setting for setting in fields if re.search(rf"\b{re.escape(setting)}\b", reason)]
        said = [f"{shown_as[setting]}={values[setting]!r}" if setting in values
                else f"{setting}={default_shown(setting)} (the default)" for setting in named]
        return f"[{concern.section}] {reason}" + (f": {', '.join(said)}" if said else "")
    if name not in fields:  # reported under the field's name
        name = next((setting for setting, field in fields.items() if field == name), name)
    where = shown_as.get(name, f"[{concern.section}]")
    value = values.get(name, error.get("input"))
    shown = "***" if name in SECRET_SETTINGS else repr(_refused(name, value) if isinstance(value, str) else value)
    reason = str(error["msg"]).removeprefix("Value error, ")
    return f"{where}={shown}: {reason}"


LINK_SETTINGS = ("base_url", "dagster_url")
"""The settings that are an HTTP address, refused with a user, a password, a query or a fragment (a key may sit
there): the refusal shows none of them."""


def _refused(name: str, value: str) -> str:
    """A refused text value as its message shows it: any password masked; of an HTTP address
    (:data:`LINK_SETTINGS`), its user part whole, its query and its fragment."""
    if name not in LINK_SETTINGS:
        return without_password(value)
    # a key as the user, a password (with @, /, ? or #: up to the last @)
    value = re.sub(r"^([A-Za-z][A-Za-z0-9+.-]*://).*@", r"\1***@", value, flags=re.DOTALL)
    return re.sub(r"[?#].*", "?***", value, flags=re.DOTALL)


def where_set(settings: Settings, name: str) -> str:
    """Where setting ``name``'s value was set, as a refusal names it: its variable (also when it is the default), the
    settings file's table and key, or its name and origin (a flag, a Dagster resource)."""
    source = settings.sources.get(name, "default")
    return variable(name) if source == "default" else _where(name, source)


def _where(name: str, source: str) -> str:
    """Where setting ``name`` was set by ``source`` (``Settings.sources``: not the default), as a refusal names it."""
    if source.startswith("environment "):
        return source.removeprefix("environment ")
    if source.startswith("file "):
        return f"{source.removeprefix('file ')} [{setting_names()[name].section}] {name}"
    return f"{name} ({source})"


def shown_value(name: str, value: Any) -> str:
    """A setting's value as ``settings`` prints it: secrets masked, durations in minutes, unset as ``-``."""
    if value is None:
        return "never" if or_never(name) else "-"
    if isinstance(value, SecretStr):
        return "***" if value.get_secret_value() else "(not set)"
    if name == "lake_catalog_uri":
        return without_password(str(value))
    if name == "alert_urls":
        return " ".join(map(masked_url, value)) or "-"
    if isinstance(value, dt.timedelta):
        return str(int(value.total_seconds() // 60))
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, tuple):
        return ",".join(map(str, value)) or "-"
    return str(value)


_URI_PASSWORD = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*://[^:@/]*:).*@", re.DOTALL)
"""A URI's password, up to the last @ (an unencoded @, /, ? or # in it)."""


def without_password(target: str) -> str:
    """A catalog location with any password replaced by ``***`` (URI or libpq ``password=`` form).

    Not ``urlsplit``: it ends the user part at a ``?`` or ``#``, which libpq accepts unencoded in a
    password, and would show the rest."""
    target = re.sub(r"(password\s*=\s*)('(?:[^'\\]|\\.)*'|\S+)", r"\1***", target, flags=re.IGNORECASE)
    return _URI_PASSWORD.sub(r"\1***@", target)


def default_shown(name: str) -> str:
    """Setting ``name``'s default as ``settings`` shows a value."""
    concern = setting_names()[name]
    return shown_value(name, getattr(concern.model_construct(), concern.settings_fields()[name]))


def setting_value(settings: Settings, name: str) -> Any:
    """The value of setting ``name`` in ``settings``."""
    concern = setting_names()[name]
    return getattr(getattr(settings, concern.section), concern.settings_fields()[name])


def or_never(name: str) -> bool:
    """Whether setting ``name`` is a duration that can be ``never`` (:data:`MinutesOrNever`)."""
    return any(getattr(check, "func", None) is _minutes_or_never for check in field_of(name).metadata)


def _core_type(annotation: Any) -> Any:
    """A field's type without its ``None`` and its validators: ``int`` for ``Annotated[int, ...] | None``."""
    args = [arg for arg in get_args(annotation) if arg is not type(None)] if get_origin(annotation) else []
    core = args[0] if len(args) == 1 else annotation
    return get_args(core)[0] if get_origin(core) is Annotated else core


def plain_type(concern: type[SettingsModel], name: str) -> Any:
    """The plain type a Dagster resource field of setting ``name`` takes (durations: whole minutes; those that can
    be ``never``: minutes or that word, which Dagster's config takes as ``Any``: it has no union of an int and a
    text, and the model checks the value as any other source's)."""
    if or_never(name):
        return Any
    core = _core_type(concern.model_fields[concern.settings_fields()[name]].annotation)
    if get_origin(core) is Literal:
        return str
    if core is dt.timedelta:
        return int
    if core in (bool, int, float):
        return core  # type: ignore[return-value]
    return str


@contextmanager
def environ(values: dict[str, str]) -> Iterator[None]:
    """Set environment variables for the ``with`` block, then restore the previous ones."""
    before = {name: os.environ.get(name) for name in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for name, value in before.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
