"""``freight-pipeline dashboard``: the BI dashboard (Streamlit) over the published warehouse, until Ctrl-C.

Streamlit runs as a child process on 127.0.0.1 (``--port``, default 8501), headless, without
usage statistics and without a file watcher; the page opens ``$FREIGHT_DATA_DIR/warehouse.duckdb``
(in lake mode, ``FREIGHT_LAKE_*`` set: the lake's published snapshot) read-only on each load, so it
never holds up a sync or a publish. Ctrl-C or SIGTERM stops it.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
from pathlib import Path

from freight_pipeline.commands.common import add_data_dir_argument, resolve_data_dir, say, say_bad
from freight_pipeline.commands.preflight import data_dir_setting, not_a_directory
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
from freight_pipeline.commands.status import READS
from freight_pipeline.config import DATA_DIR_ENV, BadSettings, load_settings
from freight_pipeline.lake.backend import storage_of
from freight_pipeline.lake.settings import LakeConfigError
from freight_pipeline.text import port_parser

APP = Path(__file__).resolve().parents[1] / "dashboard" / "app.py"
DEFAULT_PORT = 8501
HEALTH_PATH = "/_stcore/health"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_data_dir_argument(parser)
    parser.add_argument("--port", type=port_parser(1), default=DEFAULT_PORT,
                        help=f"dashboard port (default {DEFAULT_PORT})")


def streamlit_argv(port: int) -> list[str]:
    """``streamlit run`` of the page on loopback: headless, no usage statistics, no file watcher, no
    "magic" (a bare string in the page's module would be printed on the page)."""
    return [
        sys.executable, "-m", "streamlit", "run", str(APP),
        "--server.address", LOCALHOST,
        "--server.port", str(port),
        "--server.headless", "true",
        "--browser.gatherUsageStats", "false",
        "--server.fileWatcherType", "none",
        "--server.runOnSave", "false",
        "--runner.magicEnabled", "false",
        "--global.developmentMode", "false",
        "--client.toolbarMode", "viewer",
        "--theme.base", "light",
    ]


def run(args: argparse.Namespace) -> int:
    if port_in_use(args.port):
        say(f"dashboard: port {args.port} on {LOCALHOST} is in use: stop what listens there or pass --port")
        return 2
    try:  # a bad setting: one line each, as every command says it, not a traceback
        configured = load_settings(reads=READS)  # a look, as status's: what only a sync reads is not refused
        data_dir = resolve_data_dir(args.data_dir, configured)
        backend = storage_of(configured)
    except (BadSettings, LakeConfigError) as exc:
        say_bad("dashboard", exc)
        return 2
    if problem := not_a_directory(data_dir, data_dir_setting(args.data_dir)):
        say(f"dashboard: {problem}")
        return 2
    for line in configured.set_aside:
        say(f"dashboard: {line} (a sync refuses it; the dashboard does not read it)")
    source = backend.published_where(data_dir)
    if backend.nothing_published(data_dir):
        say(f"dashboard: no published warehouse {source} yet; the page says so until one is (run `make demo`)")
    url = f"http://{LOCALHOST}:{args.port}"
    env = {**os.environ, DATA_DIR_ENV: str(data_dir), "STREAMLIT_BROWSER_GATHER_USAGE_STATS": "false"}
    previous = raise_stop_on_signals()
    child: subprocess.Popen[bytes] | None = None
    grace = 0.0
    try:
        child = start_child(streamlit_argv(args.port), env, mute_stdout=True)  # its banner repeats the URL
        seconds = wait_http(url + HEALTH_PATH, child, "streamlit", 120)
        say(f"dashboard: ready in {seconds:.1f} s at {url}  (reads the published warehouse {source}, read-only). "
            "Ctrl-C stops it.")
        child.wait()
        say(f"dashboard: streamlit exited with status {child.returncode}")
        return 1
    except Stop as stop:
        grace = 5.0 if stop.signum == signal.SIGINT else 0.0  # Ctrl-C reached streamlit as well
        say(f"dashboard: {stop}: stopping ...")
        return 0
    except (ChildExited, TimeoutError) as exc:
        say(f"dashboard: {exc}")
        return 1
    finally:
        def stop_streamlit() -> None:
            if child is not None:
                stop_child(child, grace=grace)

        restore_signals(previous, stop_streamlit)
        say("dashboard: stopped")
