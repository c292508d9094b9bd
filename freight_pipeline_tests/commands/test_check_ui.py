"""``scripts/check_ui.py``'s browser step against a fake Chromium whose DevTools answer badly: each
failure is one the script reports as a clean ``FAILED`` line (no traceback, no StopIteration). And
``freight-pipeline ui``'s ports refused before anything starts."""

from __future__ import annotations

import importlib.util
import json
import stat
import sys
import tempfile
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import ModuleType

import pytest
from websockets.exceptions import WebSocketException

from freight_pipeline.cli import build_parser
from freight_pipeline.commands import ui
from freight_pipeline.config import REPO_ROOT
from freight_pipeline_tests.serving import serving


def _check_ui() -> ModuleType:
    spec = importlib.util.spec_from_file_location("check_ui", REPO_ROOT / "scripts" / "check_ui.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class _DevTools(BaseHTTPRequestHandler):
    """``/json/list`` answers what the test put in ``server.answer``; anything else (the page's
    WebSocket) is a plain 404, no upgrade."""

    def do_GET(self) -> None:
        answer = self.server.answer  # type: ignore[attr-defined]
        status, body = answer if self.path == "/json/list" else (404, "no such page")
        data = (body if isinstance(body, str) else json.dumps(body)).encode()
        self.send_response(status)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def devtools() -> Iterator[ThreadingHTTPServer]:
    with serving(ThreadingHTTPServer(("127.0.0.1", 0), _DevTools)) as server:
        yield server


def _fake_chromium(tmp_path: Path, port: int) -> str:
    """An executable that, like Chromium with --remote-debugging-port=0, writes the DevTools port to
    ``<user-data-dir>/DevToolsActivePort``, then idles until stopped; it notes its profile and its environment
    in ``tmp_path/seen.json``."""
    path = tmp_path / "chromium"
    path.write_text(
        f"#!{sys.executable}\n"
        "import json, os, pathlib, sys, time\n"
        "profile = next(a.split('=', 1)[1] for a in sys.argv if a.startswith('--user-data-dir='))\n"
        f"pathlib.Path({str(tmp_path / 'seen.json')!r}).write_text(json.dumps([profile, dict(os.environ)]))\n"
        f"pathlib.Path(profile, 'DevToolsActivePort').write_text('{port}\\n/devtools/browser/x\\n')\n"
        "time.sleep(60)\n"
    )
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return str(path)


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        ((200, [{"type": "service_worker"}]), LookupError),  # no page to drive: was a bare StopIteration
        ((500, "internal error"), json.JSONDecodeError),  # DevTools answering nonsense
        # the page's WebSocket refuses the upgrade
        ((200, [{"type": "page", "webSocketDebuggerUrl": "ws://{host}/devtools/page/1"}]), WebSocketException),
    ],
)
def test_browser_failures_are_reported_not_raised(
    tmp_path: Path, devtools: ThreadingHTTPServer, answer: tuple[int, object], expected: type[Exception]
) -> None:
    check_ui = _check_ui()
    host = f"127.0.0.1:{devtools.server_address[1]}"
    status, body = answer
    devtools.answer = (status, json.loads(json.dumps(body).replace("{host}", host)))  # type: ignore[attr-defined]
    chromium = _fake_chromium(tmp_path, devtools.server_address[1])

    with pytest.raises(check_ui.FAILURES) as raised:
        check_ui.browse(chromium, "http://127.0.0.1:1/asset-groups", tmp_path, timeout=5)

    assert isinstance(raised.value, expected), repr(raised.value)


def test_chromium_writes_only_in_a_folder_of_its_own_removed_after_it(
    tmp_path: Path, devtools: ThreadingHTTPServer
) -> None:
    """Its profile and every folder it writes in besides (``check_ui.CHROMIUM_FOLDERS``: its temporary files,
    its crash reports, its caches) in one folder, not the system's, and that folder gone once the browser step
    ends."""
    check_ui = _check_ui()
    devtools.answer = (200, [{"type": "service_worker"}])  # type: ignore[attr-defined]
    with pytest.raises(check_ui.FAILURES):
        check_ui.browse(_fake_chromium(tmp_path, devtools.server_address[1]), "http://127.0.0.1:1/", tmp_path, 5)

    profile, environment = json.loads((tmp_path / "seen.json").read_text())
    home = Path(profile).parent
    assert home != Path(tempfile.gettempdir()) and not home.exists()
    assert {variable: environment.get(variable) for variable in check_ui.CHROMIUM_FOLDERS} == {
        variable: str(home / name) for variable, name in check_ui.CHROMIUM_FOLDERS.items()}


def test_ui_refuses_one_port_for_both_and_ports_out_of_range(capsys: pytest.CaptureFixture[str]) -> None:
    """One port for the UI and the simulator: said before anything starts (the simulator took it, the webserver
    failed to bind while the daemon ran on, and the command waited 300 s). A port out of range, or 0: an
    argparse error naming the flag, no traceback."""
    parser = build_parser("ui")
    args = parser.parse_args(["ui", "--port", "18960", "--simulator-port", "18960"])
    assert ui._preflight(args) == (
        "--port and --simulator-port are both 18960: the Dagster UI and the simulator need a port each")
    for flag, value in (("--port", "70000"), ("--simulator-port", "0")):
        with pytest.raises(SystemExit) as exited:
            parser.parse_args(["ui", flag, value])
        assert exited.value.code == 2
        assert f"argument {flag}: must be between 1 and 65535, got {value}" in capsys.readouterr().err
