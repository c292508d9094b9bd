"""``freight-pipeline ui``: the bundled simulator and ``dagster dev`` (schedules running) until Ctrl-C.

Both run as child processes of this one; Ctrl-C or SIGTERM stops both (and what they started).
The simulator's control surface is on, and unless ``--changes-per-minute 0`` this process modifies a
few shipments every minute through it, so each scheduled run has changes to pick up.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import threading
from pathlib import Path

import httpx

from freight_pipeline.commands.common import add_data_dir_argument, resolve_data_dir, say, say_unknown
from freight_pipeline.commands.dagster_home import BadInstance, dagster_home, prepare_instance
from freight_pipeline.commands.preflight import BadSetup, check_setup, data_dir_setting
from freight_pipeline.commands.processes import (
    LOCALHOST,
    ChildExited,
    Stop,
    port_in_use,
    raise_stop_on_signals,
    restore_signals,
    start_child,
    stop_child,
    wait_http,
)
from freight_pipeline.config import (
    BASE_URL_ENV,
    DATA_DIR_ENV,
    PASSWORD_ENV,
    REPO_ROOT,
    SCHEDULES_RUNNING_ENV,
    USERNAME_ENV,
    BadSettings,
)
from freight_pipeline.simulator.cli import shipment_count
from freight_pipeline.text import port_parser

WORKSPACE = "workspace.yaml"
QUIET_DEV_WARNING = "ignore:Function `dev_command` is superseded"
"""``dagster dev`` warns on every start that ``dg dev`` supersedes it; the project uses ``dagster dev``."""


_port = port_parser(1)
"""argparse type of ``--port`` and ``--simulator-port``: a port this command knows (not 0, which picks one)."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_data_dir_argument(parser)
    parser.add_argument("--port", type=_port, default=3000, help="Dagster UI port (default 3000)")
    parser.add_argument("--simulator-port", type=_port, default=8765, help="simulator port (default 8765)")
    parser.add_argument("--shipments", type=shipment_count, default=2000,
                        help="shipments in the simulator (default 2000)")
    parser.add_argument("--seed", type=int, default=42, help="simulator data seed (default 42)")
    parser.add_argument(
        "--changes-per-minute", type=int, default=5,
        help="shipments the simulator modifies every minute, 0 for none (default 5)",
    )


def run(args: argparse.Namespace) -> int:
    problem = _preflight(args)
    if problem:
        for line in problem.splitlines():  # a bad setup: a line per bad setting
            say(f"ui: {line}")
        return 2
    from freight_pipeline.simulator.config import DEFAULT_PASSWORD, DEFAULT_USERNAME

    data_dir = resolve_data_dir(args.data_dir)
    home = dagster_home(REPO_ROOT / ".dagster_home")
    try:
        written = prepare_instance(home)  # before the webserver and daemon start: a CLI run may be creating it too
    except BadInstance as bad:
        say(f"ui: {bad}")
        return 2
    if written:
        say(f"ui: wrote {home / 'dagster.yaml'} (queued runs one at a time, telemetry and the community dialog off)")
    base_url = f"http://{LOCALHOST}:{args.simulator_port}"
    ui_url = f"http://{LOCALHOST}:{args.port}"
    env = {
        **os.environ,
        "DAGSTER_HOME": str(home),
        BASE_URL_ENV: base_url,
        USERNAME_ENV: DEFAULT_USERNAME,
        PASSWORD_ENV: DEFAULT_PASSWORD,
        DATA_DIR_ENV: str(data_dir),
        SCHEDULES_RUNNING_ENV: "1",
        "PYTHONWARNINGS": ",".join(filter(None, [os.environ.get("PYTHONWARNINGS"), QUIET_DEV_WARNING])),
    }
    children: list[subprocess.Popen[bytes]] = []
    stopping = threading.Event()
    grace = 0.0
    previous = raise_stop_on_signals()
    try:
        simulator = start_child(_simulator_argv(args), env, mute_stdout=True)  # its banner lists the passwords
        children.append(simulator)
        seconds = wait_http(f"{base_url}/_control/clock", simulator, "simulator", 300)
        say(f"ui: simulator ready at {base_url} in {seconds:.1f} s")
        dagster = start_child(_dagster_argv(args.port), env, cwd=REPO_ROOT)
        children.append(dagster)
        seconds = wait_http(f"{ui_url}/server_info", dagster, "dagster dev", 300)
        say(f"ui: Dagster UI ready in {seconds:.1f} s at {ui_url}  (data dir {data_dir}, DAGSTER_HOME {home})")
        churn = f"changes {args.changes_per_minute} shipments a minute" if args.changes_per_minute > 0 else "stays put"
        say(f"ui: schedules are running; the simulator {churn} (control surface {base_url}/_control/stats). "
            "Ctrl-C stops everything.")
        _start_changer(base_url, args.changes_per_minute, stopping)
        while all(child.poll() is None for child in children):
            stopping.wait(0.5)
        say("ui: a child process exited; stopping the other")
        return 1
    except Stop as stop:
        grace = 10.0 if stop.signum == signal.SIGINT else 0.0  # Ctrl-C reached the children as well
        say(f"ui: {stop}: stopping the Dagster UI and the simulator ...")
        return 0
    except (ChildExited, TimeoutError) as exc:
        say(f"ui: {exc}")
        return 1
    finally:
        stopping.set()
        def stop_children() -> None:
            for child in reversed(children):
                stop_child(child, grace=grace)

        restore_signals(previous, stop_children)
        say("ui: stopped")


def _preflight(args: argparse.Namespace) -> str | None:
    if not (REPO_ROOT / WORKSPACE).is_file():
        return f"{REPO_ROOT / WORKSPACE} not found: run the UI from a checkout of the repository"
    if _dagster_executable() is None:
        return "the `dagster` command is not installed next to this Python (run `make setup`)"
    if args.port == args.simulator_port:  # the simulator would take it, and the UI fail to bind while its daemon runs
        return f"--port and --simulator-port are both {args.port}: the Dagster UI and the simulator need a port each"
    for flag, port in (("--port", args.port), ("--simulator-port", args.simulator_port)):
        if port_in_use(port):
            return f"port {port} on {LOCALHOST} is in use: stop what listens there or pass {flag}"
    try:  # the UI brings its own simulator: the service's settings are its
        configured = check_setup(resolve_data_dir(args.data_dir), data_dir_setting(args.data_dir))
    except (BadSetup, BadSettings) as exc:
        return str(exc)
    say_unknown("ui", configured)
    return None


def _simulator_argv(args: argparse.Namespace) -> list[str]:
    return [
        sys.executable, "-m", "freight_pipeline.cli", "simulator", "--host", LOCALHOST,
        "--port", str(args.simulator_port), "--shipments", str(args.shipments), "--seed", str(args.seed), "--control",
    ]


def _dagster_executable() -> str | None:
    beside = Path(sys.executable).with_name("dagster")
    return str(beside) if beside.is_file() else shutil.which("dagster")


def _dagster_argv(port: int) -> list[str]:
    return [_dagster_executable() or "dagster", "dev", "-w", WORKSPACE, "-h", LOCALHOST, "-p", str(port)]


def _start_changer(base_url: str, per_minute: int, stopping: threading.Event) -> None:
    """Every minute: bring the shipments up to the clock (events come due, estimates revised) and modify
    ``per_minute`` of them (the served simulator's clock follows real time)."""
    if per_minute <= 0:
        return

    def loop() -> None:
        while not stopping.wait(60):
            try:
                # the simulator this command started: never through a proxy the environment names
                httpx.post(f"{base_url}/_control/shipments/progress", timeout=30, trust_env=False)
                httpx.post(f"{base_url}/_control/shipments/modify", params={"count": per_minute}, timeout=30,
                           trust_env=False)
            except httpx.HTTPError:
                continue

    threading.Thread(target=loop, name="simulator-changes", daemon=True).start()
