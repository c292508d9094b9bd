"""Check the Dagster UI in a real browser: the freight assets and dbt models are on the asset graph.

Starts ``freight-pipeline ui`` on free loopback ports with a temporary data dir and DAGSTER_HOME,
waits for the webserver, drives headless Chromium (Debian package ``chromium``) over the DevTools
protocol to the global asset graph, waits until every expected asset name is rendered, saves a
screenshot in a temporary directory and prints its path, then stops everything it started.

    .venv/bin/python scripts/check_ui.py [--timeout 240] [--keep]

Exit 0 when every name was found, 1 when not (or the UI did not come up), 2 without Chromium.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx
from websockets.exceptions import WebSocketException
from websockets.sync.client import ClientConnection, connect

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))

from freight_pipeline.commands.processes import (  # noqa: E402
    LOCALHOST,
    ChildExited,
    free_port,
    start_child,
    stop_child,
    wait_http,
)

CHROMIUM = "/usr/bin/chromium"
EXPECTED = ("shipments", "shipment_events", "shipment_documents", "code_conversions", "fct_shipments",
            "fct_transit_times")
"""Asset names short enough to be shown whole on a graph node (longer ones are shortened with an ellipsis)."""
GRAPH_PATH = "/asset-groups"
SHOULD_SHOW_NUX = "{ shouldShowNux }"
"""The webserver's question whether to show the "community" (newsletter) dialog on a first visit: the
shipped dagster.yaml (``nux: enabled: false``) makes it answer false."""
EXPAND_ALL_GROUPS = "window.dispatchEvent(new KeyboardEvent('keydown', {altKey: true, code: 'KeyE', key: 'e'}))"
"""The graph's shortcut Alt+E (a window keydown listener) toggles between all groups collapsed and expanded."""
CHROMIUM_FLAGS = (
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--window-size=1920,3400", "--remote-debugging-port=0",
)


class NoPageTarget(LookupError):
    """Chromium's DevTools listed no page to drive."""


FAILURES = (ChildExited, TimeoutError, OSError, httpx.HTTPError, json.JSONDecodeError, WebSocketException,
            NoPageTarget)
"""What ends the check with one ``FAILED`` line (UI or browser down, refused, or answering nonsense)."""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--timeout", type=float, default=240, help="seconds to wait for the UI and the graph")
    parser.add_argument("--keep", action="store_true", help="keep the temporary directory (data, logs)")
    args = parser.parse_args()
    chromium = CHROMIUM if Path(CHROMIUM).is_file() else shutil.which("chromium")
    if not chromium:
        print("check_ui: Chromium not found at /usr/bin/chromium: install it with `apt-get install -y chromium`")
        return 2
    work = Path(tempfile.mkdtemp(prefix="freight-check-ui-"))
    ui_port, sim_port = free_port(), free_port()
    url = f"http://{LOCALHOST}:{ui_port}"
    env = {**os.environ, "DAGSTER_HOME": str(work / "dagster_home")}
    argv = [
        sys.executable, "-m", "freight_pipeline.cli", "ui", "--data-dir", str(work / "data"), "--port", str(ui_port),
        "--simulator-port", str(sim_port), "--shipments", "200", "--changes-per-minute", "0",
    ]
    log = open(work / "ui.log", "wb")  # noqa: SIM115 - closed in finally
    print(f"check_ui: starting `freight-pipeline ui` on {url} (simulator port {sim_port}, work dir {work})")
    ui = subprocess.Popen(argv, env=env, cwd=REPO_ROOT, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        seconds = wait_http(f"{url}/server_info", ui, "freight-pipeline ui", args.timeout)
        print(f"check_ui: webserver up after {seconds:.1f} s: {httpx.get(f'{url}/server_info').json()}")
        nux = httpx.post(f"{url}/graphql", json={"query": SHOULD_SHOW_NUX}, timeout=30).json()
        if nux.get("data", {}).get("shouldShowNux") is not False:
            print(f"check_ui: FAILED: the UI would show the community dialog (shouldShowNux: {nux})")
            return 1
        print("check_ui: no community dialog (shouldShowNux: false)")
        shot_dir = Path(tempfile.mkdtemp(prefix="freight-ui-screenshot-"))
        found, missing, screenshot = browse(chromium, url + GRAPH_PATH, shot_dir, args.timeout)
    except FAILURES as exc:
        print(f"check_ui: FAILED: {type(exc).__name__}: {exc}; last lines of the UI's log:")
        print("\n".join((work / "ui.log").read_text(errors="replace").splitlines()[-15:]))
        return 1
    finally:
        stop_child(ui, timeout=60)
        log.close()
        print(f"check_ui: stopped the UI (exit status {ui.returncode})")
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    print(f"check_ui: screenshot: {screenshot}")
    print(f"check_ui: found on {GRAPH_PATH}: {', '.join(found)}")
    if missing:
        print(f"check_ui: FAILED: not rendered: {', '.join(missing)}")
        return 1
    print("check_ui: OK")
    return 0


CHROMIUM_FOLDERS = {"TMPDIR": "tmp", "HOME": "home", "XDG_CONFIG_HOME": "config", "XDG_CACHE_HOME": "cache"}
"""Where Chromium writes outside its profile, each set to a folder of its own home (:func:`start_chromium`):
with the system's, it leaves an ``org.chromium.Chromium.*`` folder (its SingletonSocket) in the temporary
directory at every stop, its crash reports' database in ``~/.config/chromium`` and a dconf cache in
``~/.cache``."""


def start_chromium(chromium: str, flags: Sequence[str], home: Path) -> tuple[subprocess.Popen[bytes], Path]:
    """Chromium on ``about:blank`` with ``flags``, writing only under ``home``: its profile in ``home/profile``
    (returned: it says its DevTools port there) and the rest in :data:`CHROMIUM_FOLDERS`, so that removing
    ``home`` leaves nothing of it behind."""
    folders = {variable: home / name for variable, name in CHROMIUM_FOLDERS.items()}
    profile = home / "profile"
    for folder in (profile, *folders.values()):
        folder.mkdir(parents=True, exist_ok=True)
    browser = start_child([chromium, *flags, f"--user-data-dir={profile}", "about:blank"],
                          {**os.environ, **{variable: str(folder) for variable, folder in folders.items()}},
                          quiet=True)
    return browser, profile


def browse(chromium: str, url: str, shot_dir: Path, timeout: float) -> tuple[list[str], list[str], Path]:
    """Open ``url`` in headless Chromium; wait for the expected names; screenshot. (found, missing, png)."""
    home = Path(tempfile.mkdtemp(prefix="freight-chromium-"))
    browser, profile = start_chromium(chromium, CHROMIUM_FLAGS, home)
    try:
        port = _devtools_port(profile, browser, 30)
        targets = httpx.get(f"http://{LOCALHOST}:{port}/json/list").json()
        page = next((t for t in targets if t.get("type") == "page"), None)
        if page is None:
            raise NoPageTarget(f"chromium's DevTools list no page target: {[t.get('type') for t in targets]}")
        with connect(page["webSocketDebuggerUrl"], max_size=None, open_timeout=30) as ws:
            cdp = _Cdp(ws)
            cdp.call("Page.enable")
            cdp.call("Page.navigate", url=url)
            found = _wait_for_assets(cdp, timeout)
            time.sleep(2)  # let the graph finish its layout animation before the picture
            png = base64.b64decode(cdp.call("Page.captureScreenshot", format="png")["data"])
        screenshot = shot_dir / "asset-graph.png"
        screenshot.write_bytes(png)
        return found, [n for n in EXPECTED if n not in found], screenshot
    finally:
        stop_child(browser, timeout=10)
        shutil.rmtree(home, ignore_errors=True)


def _wait_for_assets(cdp: _Cdp, timeout: float) -> list[str]:
    """Poll the page text until every expected name shows; expand the collapsed groups once meanwhile."""
    # The global lineage starts with every group collapsed to one box: Alt+E expands them all (once: it
    # toggles). The graph renders only the nodes in view, hence the tall window.
    found: list[str] = []
    expanded = False
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        text = cdp.evaluate("document.body ? document.body.innerText : ''")
        found = [name for name in EXPECTED if re.search(rf"(?<!\w){re.escape(name)}(?!\w)", text)]
        if len(found) == len(EXPECTED):
            break
        if not expanded and re.search(r"(?<!\w)freight(?!\w)", text) and "dbt_analytics" in text:
            time.sleep(2)  # the graph's shortcut handler mounts with the graph, after the sidebar
            cdp.evaluate(EXPAND_ALL_GROUPS)
            expanded = True
        time.sleep(1)
    return found


def _devtools_port(profile: Path, browser: subprocess.Popen[bytes], timeout: float) -> int:
    """The port Chromium chose (``--remote-debugging-port=0`` writes it to DevToolsActivePort)."""
    path = profile / "DevToolsActivePort"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if browser.poll() is not None:
            raise ChildExited(f"chromium exited with status {browser.returncode}")
        if path.is_file() and path.read_text().strip():
            return int(path.read_text().splitlines()[0])
        time.sleep(0.2)
    raise TimeoutError("chromium did not open its DevTools port")


class _Cdp:
    """A minimal DevTools protocol client: one request at a time, events skipped."""

    def __init__(self, ws: ClientConnection) -> None:
        self.ws = ws
        self.next_id = 0

    def call(self, method: str, **params: Any) -> dict[str, Any]:
        self.next_id += 1
        self.ws.send(json.dumps({"id": self.next_id, "method": method, "params": params}))
        while True:
            message = json.loads(self.ws.recv(timeout=60))
            if message.get("id") == self.next_id:
                if "error" in message:
                    raise OSError(f"{method}: {message['error']}")
                return dict(message.get("result", {}))

    def evaluate(self, expression: str) -> str:
        result = self.call("Runtime.evaluate", expression=expression, returnByValue=True)
        return str(result.get("result", {}).get("value") or "")


if __name__ == "__main__":
    sys.exit(main())
