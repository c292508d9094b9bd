"""Write the blocking client from the asyncio one (the idea of encode/httpcore's ``unasync``): each
hand-written asyncio module of ``freight_pipeline/client/`` has a generated blocking twin.

    ``_async_driver.py`` -> ``_sync_driver.py``  (``AsyncDriver`` -> ``SyncDriver``: transport, limit, token)
    ``async_client.py``  -> ``sync_client.py``   (``AsyncFreightClient`` -> ``FreightClient``: the endpoints)

    .venv/bin/python scripts/unasync.py          # rewrite both generated modules
    .venv/bin/python scripts/unasync.py --check  # exit 1 when one is stale, naming it

Both clients are thin drivers of the sans-I/O ``ClientCore``; every endpoint is written once, in the
async source. What differs is said by the rules below (asyncio -> threading and time, aiohttp's
transport -> httpx's own, ``AdaptiveLimit`` -> ``BlockingLimit``), plus ruff's import sorting.
``freight_pipeline_tests/client/test_unasync.py`` fails when a generated module is stale.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CLIENT = ROOT / "freight_pipeline" / "client"

DRIVER_DOCSTRING = '''"""``SyncDriver``: the driver half of the blocking client, the base of
:class:`~freight_pipeline.client.sync_client.FreightClient`.

GENERATED from ``_async_driver.py`` by ``scripts/unasync.py``: edit that file, then run the script.
It carries out the actions of the sans-I/O :class:`~freight_pipeline.client._core.ClientCore` (send
with ``httpx.Client``, ``time.sleep``, fetch a token under a lock) within a
:class:`~freight_pipeline.client.limiter.BlockingLimit` (the token is checked, and renewed if due,
once a request holds its slot; the token call itself does not wait for a slot), and holds the
client's lifecycle, properties, ``authenticate`` and the shared helpers of the endpoint methods
(``_one``, ``_many``, ``_optional``, ``_page``, ``_pages``, ...). The endpoint methods are in
``sync_client.py``.
"""'''

CLIENT_DOCSTRING = '''"""``FreightClient``: the blocking client.

A thin driver of :class:`~freight_pipeline.client._core.ClientCore`.

GENERATED from ``async_client.py`` by ``scripts/unasync.py``: edit that file, then run the script.
Same methods as :class:`~freight_pipeline.client.async_client.AsyncFreightClient`, blocking.
Thread-safe: at most ``max_concurrency`` requests are in flight at once (default 8), in any threads.

This module holds the endpoint methods, each a line or two; the driver they run on (transport,
limit, token, lifecycle, the shared helpers) is the base class,
:class:`~freight_pipeline.client._sync_driver.SyncDriver` (generated too).
"""'''


@dataclass(frozen=True)
class Pair:
    """One generated module: ``target`` is ``source`` rewritten by ``RULES``, under its own docstring."""

    source: Path
    target: Path
    docstring: str


PAIRS = (
    Pair(CLIENT / "_async_driver.py", CLIENT / "_sync_driver.py", DRIVER_DOCSTRING),
    Pair(CLIENT / "async_client.py", CLIENT / "sync_client.py", CLIENT_DOCSTRING),
)

RULES: list[tuple[str, str]] = [
    (r"(?s)\n[ \t]*# asyncio only \{\n.*?# \}\n", "\n"),  # hedged reads (client.hedge): asyncio only
    (r"^import asyncio$", "import threading\nimport time"),
    (r"^from freight_pipeline\.client\.transport import AiohttpTransport, DirectAsyncClient\n", ""),
    (r"\bDirectAsyncClient\(", "httpx.Client("),  # the blocking client is not the sync's hot path
    (r"transport or AiohttpTransport\(max_concurrency[^)]*\)", "transport"),
    (r"^(\s*)trust_env=False,", r"\1proxy=self._core.proxy and self._core.proxy.for_httpx(),\n\1trust_env=False,"),
    (r"asyncio\.Lock\(\)", "threading.Lock()"),
    (r"asyncio\.sleep\(", "time.sleep("),
    (r"\bAdaptiveLimit\b", "BlockingLimit"),
    (r"an adaptive ``limit`` \(AIMD\)", "a ``BlockingLimit``"),
    (r"httpx\.AsyncBaseTransport", "httpx.BaseTransport"),
    (r"httpx\.AsyncClient", "httpx.Client"),
    (r"\bAsyncFreightClient\b", "FreightClient"),
    (r"\bAsyncDriver\b", "SyncDriver"),
    (r"\b_async_driver\b", "_sync_driver"),
    (r"\bAsyncIterator\b", "Iterator"),
    (r"Awaitable\[([^\[\]]*(?:\[[^\[\]]*\])?)\]", r"\1"),
    (r"\basync def\b", "def"),
    (r"\basync with\b", "with"),
    (r"\basync for\b", "for"),
    (r"\bawait ", ""),
    (r"\b__aenter__\b", "__enter__"),
    (r"\b__aexit__\b", "__exit__"),
    (r"\baclose\b", "close"),
    (r"\baread\b", "read"),
    (r"Asyncio client", "Blocking client"),
    (r"for item in (page\.\w+):\n\s+yield item", r"yield from \1"),  # async generators cannot yield from
]


def generate(pair: Pair) -> str:
    """The text ``pair.target`` should have."""
    text = pair.source.read_text()
    body = text[text.index('"""', 3) + 3 :]  # after the source's module docstring
    for pattern, replacement in RULES:
        body = re.sub(pattern, replacement, body, flags=re.MULTILINE)
    out = pair.docstring + body
    ruff = str(Path(sys.executable).parent / "ruff")
    fixed = subprocess.run(
        [ruff, "check", "--fix", "--select", "I,F401,UP", "--quiet", "--stdin-filename", str(pair.target), "-"],
        input=out,
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    return fixed.stdout if fixed.stdout else out


def shown(path: Path) -> Path:
    return path.relative_to(ROOT)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only say whether the generated modules are current")
    args = parser.parse_args()
    if args.check:
        stale = [pair for pair in PAIRS if not pair.target.exists() or pair.target.read_text() != generate(pair)]
        for pair in stale:
            print(f"{shown(pair.target)} is stale (from {shown(pair.source)}): run .venv/bin/python scripts/unasync.py")
        return 1 if stale else 0
    for pair in PAIRS:
        pair.target.write_text(generate(pair))
        print(f"wrote {shown(pair.target)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
