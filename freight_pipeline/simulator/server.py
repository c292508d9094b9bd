"""Run the simulator with uvicorn on 127.0.0.1, in a background thread, on a free port.

``running_simulator(...)`` is the context manager every test of the project uses::

    with running_simulator(shipments=200, seed=1) as sim:
        httpx.post(f"{sim.base_url}/auth/token", json={"username": sim.username, "password": sim.password})
        sim.modify_shipments(5)
        assert sim.request_count("/auth/token", status=200) == 1

``start_simulator(...)`` returns the same :class:`RunningSimulator` for fixtures that outlive a
``with`` block; call ``.stop()``. ``serve_forever`` runs in the foreground (the CLI).
"""

from __future__ import annotations

import datetime as dt
import signal
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import uvicorn

from freight_pipeline.simulator.app import SimulatorApp, create_app
from freight_pipeline.simulator.auth import Authenticator
from freight_pipeline.simulator.clock import parse_instant
from freight_pipeline.simulator.config import (
    DEFAULT_PASSWORD,
    DEFAULT_USERNAME,
    DEFAULT_WEBHOOK_PASSWORD,
    DEFAULT_WEBHOOK_USERNAME,
    WEBHOOK_ROLE,
    FaultConfig,
    SimulatorConfig,
)
from freight_pipeline.simulator.faults import FaultInjector, RequestStats
from freight_pipeline.simulator.releases import check_release
from freight_pipeline.simulator.store_api import StoreAPI

LOCALHOST = "127.0.0.1"


def make_store(config: SimulatorConfig) -> StoreAPI:
    """The real generated store, sized, seeded and clocked by the config."""
    from freight_pipeline.simulator.store import SimulatorStore

    return SimulatorStore(
        shipments=config.shipments,
        seed=config.seed,
        start=config.start_instant(),
        utc_offset=config.utc_offset,
        offset_changes=config.offset_changes,
        wall_clock=config.wall_clock,
        naive_clock=config.naive_clock,
        fractional_stamps=config.fractional_stamps,
        utc_stamps=config.utc_stamps,
    )


def bind_socket(host: str = LOCALHOST, port: int = 0) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(2048)  # connections made before uvicorn starts wait in the backlog
    return sock


def uvicorn_config(app: SimulatorApp) -> uvicorn.Config:
    return uvicorn.Config(
        app,
        log_config=None,  # leave the host's logging alone
        log_level="warning",
        access_log=False,
        lifespan="off",
        server_header=False,
        timeout_graceful_shutdown=2,
        timeout_keep_alive=30,
    )


class RunningSimulator:
    """A simulator serving in a background thread; the handle tests and benchmarks use."""

    def __init__(self, app: SimulatorApp, sock: socket.socket, startup_timeout: float = 10.0) -> None:
        self.app = app
        self.host, self.port = sock.getsockname()[:2]
        self.base_url = f"http://{self.host}:{self.port}"
        self._server = uvicorn.Server(uvicorn_config(app))
        self._thread = threading.Thread(
            target=self._server.run, kwargs={"sockets": [sock]}, name=f"freight-simulator-{self.port}", daemon=True
        )
        self._thread.start()
        deadline = time.monotonic() + startup_timeout
        while not self._server.started:
            if not self._thread.is_alive():
                raise RuntimeError("the simulator server thread ended during startup")
            if time.monotonic() > deadline:
                self.stop()
                raise TimeoutError(f"the simulator did not start within {startup_timeout} s")
            time.sleep(0.005)

    # --- identity ---------------------------------------------------------------------------------

    @property
    def store(self) -> StoreAPI:
        return self.app.state.store

    @property
    def config(self) -> SimulatorConfig:
        return self.app.state.config

    @property
    def username(self) -> str:
        """The first configured user (``demo`` by default)."""
        users = [u for u in self.config.users if WEBHOOK_ROLE not in u.roles] or list(self.config.users)
        return users[0].username if users else DEFAULT_USERNAME

    @property
    def password(self) -> str:
        user = self.config.user(self.username)
        return user.password if user is not None else DEFAULT_PASSWORD

    @property
    def webhook_username(self) -> str:
        users = [u for u in self.config.users if WEBHOOK_ROLE in u.roles]
        return users[0].username if users else DEFAULT_WEBHOOK_USERNAME

    @property
    def webhook_password(self) -> str:
        user = self.config.user(self.webhook_username)
        return user.password if user is not None else DEFAULT_WEBHOOK_PASSWORD

    def __repr__(self) -> str:
        return f"RunningSimulator(base_url={self.base_url!r}, username={self.username!r})"

    # --- request accounting ---------------------------------------------------------------------------

    @property
    def stats(self) -> RequestStats:
        return self.app.state.stats

    def request_count(self, path: str | None = None, method: str | None = None, status: int | None = None) -> int:
        """Answered requests, by path template (``/service/shipment/{id}``), method and status.

        A dropped connection counts with status ``faults.DROPPED`` (0).
        """
        return self.stats.count(path, method, status)

    def reset_stats(self) -> None:
        self.stats.reset()

    # --- faults and auth ---------------------------------------------------------------------------------

    @property
    def faults(self) -> FaultInjector:
        return self.app.state.faults

    @property
    def auth(self) -> Authenticator:
        return self.app.state.auth

    def set_faults(self, **changes: Any) -> FaultConfig:
        return self.faults.update(**changes)

    def reset_faults(self, config: FaultConfig | None = None) -> FaultConfig:
        return self.faults.reset(config)

    def script_fault(self, kind: str, count: int = 1, path: str | None = None, status: int | None = None) -> None:
        """Make the next ``count`` requests (to ``path``) fail: ``drop``, ``rate_limit``, ``server_error``
        (``status``: only for this kind) or ``malformed`` (see :meth:`FaultInjector.enqueue`)."""
        self.faults.enqueue(kind, count, path, status)

    @property
    def release(self) -> str:
        """The release of the interface answered now (``releases.py``)."""
        return self.app.state.release

    def set_release(self, release: str) -> None:
        """Answer in ``release`` from now on (ValueError for one the simulator does not play)."""
        self.app.state.release = check_release(release)

    def set_token_lifetime(self, seconds: float) -> None:
        self.auth.token_lifetime_s = float(seconds)

    def revoke_tokens(self) -> None:
        self.auth.revoke_all_tokens()

    def issue_token(self) -> str:
        """A valid bearer token for ``username`` (without an HTTP request)."""
        return str(self.auth.issue_token({"username": self.username, "password": self.password})["access_token"])

    # --- data changes --------------------------------------------------------------------------------------

    def modify_shipments(self, count: int) -> list[int]:
        return self.store.changes.modify_shipments(count)

    def change_in_background(self, count: int) -> list[int]:
        """Upcoming estimates of ``count`` open shipments moved without a new last-modified instant."""
        return self.store.changes.change_in_background(count)

    def revise_arrivals_in_background(self, count: int) -> list[int]:
        """The main carriage's estimated arrival of ``count`` open AIR or SEA shipments moved (their legs and
        documents with it) without a new last-modified instant."""
        return self.store.changes.revise_arrivals_in_background(count)

    def progress_shipments(self) -> list[int]:
        return self.store.changes.progress_shipments()

    def create_shipments(self, count: int) -> list[int]:
        return self.store.changes.create_shipments(count)

    def delete_shipments(self, count: int) -> list[int]:
        return self.store.changes.delete_shipments(count)

    def touch_shipments(self, shipment_ids: list[int]) -> None:
        self.store.changes.touch_shipments(shipment_ids)

    def move_milestone(self, shipment_id: int, code: str, event_type: str, at: dt.datetime | str) -> str:
        """Move a shipment's milestone estimate (``ESTIMATED``) or actual (``ACTUAL``) to ``at`` (aware, or
        ISO 8601 text with its offset) in a new version; its ``last_modified_date_time``."""
        instant = parse_instant(at) if isinstance(at, str) else at
        if instant.tzinfo is None:
            raise ValueError(f"at must be aware (carry its UTC offset), got {instant!r}")
        return self.store.changes.move_milestone(shipment_id, code, event_type, int(instant.timestamp()))

    def take_snapshot(self) -> dict[str, Any]:
        """A snapshot of the data now, for :meth:`reset_to_snapshot` (one is taken at the start)."""
        return self.store.snapshots.take()

    def reset_to_snapshot(self) -> dict[str, Any]:
        """The data and its id counters back to the snapshot, the clock going on (a nightly reset);
        what changed (``store_snapshot.StoreSnapshots.reset``)."""
        return self.store.snapshots.reset()

    def advance_clock(self, seconds: float) -> dt.datetime:
        return self.store.clock.advance(seconds)

    def set_clock(self, instant: dt.datetime | str) -> dt.datetime:
        """Move the simulated clock forward to ``instant`` (aware, or ISO 8601 text with its offset)."""
        return self.store.clock.set_to(parse_instant(instant) if isinstance(instant, str) else instant)

    # --- lifecycle -----------------------------------------------------------------------------------------

    @property
    def running(self) -> bool:
        return self._thread.is_alive()

    def stop(self, timeout: float = 5.0) -> None:
        self._server.should_exit = True
        self._thread.join(timeout)
        if self._thread.is_alive():
            self._server.force_exit = True
            self._thread.join(timeout)

    def __enter__(self) -> RunningSimulator:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _resolve(
    store: StoreAPI | SimulatorConfig | None,
    config: SimulatorConfig | None,
    overrides: dict[str, Any],
) -> tuple[StoreAPI, SimulatorConfig]:
    if isinstance(store, SimulatorConfig):
        store, config = None, store if config is None else config
    config = config or SimulatorConfig()
    changes = {k: v for k, v in overrides.items() if v is not None}
    if store is not None and changes.get("naive_clock") is not None:
        raise ValueError("naive_clock shapes the store it builds: pass SimulatorStore(naive_clock=...) instead")
    if store is not None and changes.get("fractional_stamps"):
        raise ValueError("fractional_stamps shapes the store it builds: pass SimulatorStore(fractional_stamps=True) "
                         "instead")
    if changes:
        config = config.replace(**changes)
    return (store if store is not None else make_store(config)), config


def start_simulator(
    store: StoreAPI | SimulatorConfig | None = None,
    config: SimulatorConfig | None = None,
    *,
    shipments: int | None = None,
    seed: int | None = None,
    faults: FaultConfig | None = None,
    control: bool | None = None,
    token_lifetime_s: float | None = None,
    naive_clock: str | None = None,
    fractional_stamps: bool | None = None,
    host: str = LOCALHOST,
    port: int = 0,
    startup_timeout: float = 10.0,
) -> RunningSimulator:
    """Start serving in a background thread; ``store`` defaults to a generated one (``naive_clock``:
    an IANA zone; that store's date-times then come without a UTC offset; ``fractional_stamps``: its
    shipments' stamps carry milliseconds; see ``SimulatorConfig``)."""
    overrides = {
        "shipments": shipments,
        "seed": seed,
        "faults": faults,
        "control": control,
        "token_lifetime_s": token_lifetime_s,
        "naive_clock": naive_clock,
        "fractional_stamps": fractional_stamps,
    }
    resolved_store, resolved_config = _resolve(store, config, overrides)
    sock = bind_socket(host, port)
    try:
        return RunningSimulator(create_app(resolved_store, resolved_config), sock, startup_timeout)
    except BaseException:
        sock.close()
        raise


@contextmanager
def running_simulator(
    store: StoreAPI | SimulatorConfig | None = None,
    config: SimulatorConfig | None = None,
    *,
    shipments: int | None = None,
    seed: int | None = None,
    faults: FaultConfig | None = None,
    control: bool | None = None,
    token_lifetime_s: float | None = None,
    naive_clock: str | None = None,
    fractional_stamps: bool | None = None,
    host: str = LOCALHOST,
    port: int = 0,
    startup_timeout: float = 10.0,
) -> Iterator[RunningSimulator]:
    """Serve for the duration of the ``with`` block; see :func:`start_simulator`."""
    sim = start_simulator(
        store,
        config,
        shipments=shipments,
        seed=seed,
        faults=faults,
        control=control,
        token_lifetime_s=token_lifetime_s,
        naive_clock=naive_clock,
        fractional_stamps=fractional_stamps,
        host=host,
        port=port,
        startup_timeout=startup_timeout,
    )
    try:
        yield sim
    finally:
        sim.stop()


def serve_forever(app: SimulatorApp, sock: socket.socket, ready: Callable[[], None]) -> None:
    """Serve in the foreground until SIGINT or SIGTERM, then exit cleanly. ``ready`` (which says where it
    serves) is called only after both signals are set to stop the server: one sent right after it, while
    uvicorn starts and before it handles them itself, stops the server as it starts (the handler was a no-op
    then: a simulator stopped that soon served on for ever)."""
    server = uvicorn.Server(uvicorn_config(app))

    def stop(*_: Any) -> None:
        server.should_exit = True

    for stopping in (signal.SIGINT, signal.SIGTERM):
        signal.signal(stopping, stop)  # also what uvicorn re-raises the signal to once it shut down
    ready()
    server.run(sockets=[sock])
