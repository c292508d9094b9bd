"""Write the blocking client from the asyncio one: ``client/async_client.py`` is the source,
``client/sync_client.py`` is generated (the idea of encode/httpcore's ``unasync``).

    .venv/bin/python scripts/unasync.py          # rewrite sync_client.py
    .venv/bin/python scripts/unasync.py --check  # exit 1 when sync_client.py is stale

Both clients are thin drivers of the sans-I/O ``ClientCore``; every endpoint is written once, in the
async source. What differs is said by the rules below (asyncio -> threading and time, aiohttp's
transport -> httpx's own, ``AdaptiveLimit`` -> ``BlockingLimit``), plus ruff's import sorting.
``freight_pipeline_tests/client/test_unasync.py`` fails when the generated file is stale.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SOURCE = ROOT / "freight_pipeline" / "client" / "async_client.py"
TARGET = ROOT / "freight_pipeline" / "client" / "sync_client.py"

DOCSTRING = '''"""``FreightClient``: the blocking client.

A thin driver of :class:`~freight_pipeline.client._core.ClientCore`.

GENERATED from ``async_client.py`` by ``scripts/unasync.py``: edit that file, then run the script.
Same methods as :class:`~freight_pipeline.client.async_client.AsyncFreightClient`, blocking.
Thread-safe: at most ``max_concurrency`` requests are in flight at once (default 8), in any threads.
"""'''

RULES: list[tuple[str, str]] = [
    (r"^import asyncio$", "import threading\nimport time"),
    (r"^from freight_pipeline\.client\.transport import AiohttpTransport\n", ""),
    (r"transport or AiohttpTransport\(max_concurrency\)", "transport"),
    (r"asyncio\.Lock\(\)", "threading.Lock()"),
    (r"asyncio\.sleep\(", "time.sleep("),
    (r"\bAdaptiveLimit\b", "BlockingLimit"),
    (r"an adaptive ``limit`` \(AIMD\)", "a ``BlockingLimit``"),
    (r"httpx\.AsyncBaseTransport", "httpx.BaseTransport"),
    (r"httpx\.AsyncClient", "httpx.Client"),
    (r"\bAsyncFreightClient\b", "FreightClient"),
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


def generate() -> str:
    text = SOURCE.read_text()
    body = text[text.index('"""', 3) + 3 :]  # after the source's module docstring
    for pattern, replacement in RULES:
        body = re.sub(pattern, replacement, body, flags=re.MULTILINE)
    out = DOCSTRING + body
    fixed = subprocess.run(
        [str(Path(sys.executable).parent / "ruff"), "check", "--fix", "--select", "I,F401,UP", "--quiet",
         "--stdin-filename", str(TARGET), "-"],
        input=out, capture_output=True, text=True, cwd=ROOT,
    )
    return fixed.stdout if fixed.stdout else out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only say whether sync_client.py is current")
    args = parser.parse_args()
    text = generate()
    if args.check:
        if TARGET.read_text() != text:
            print(f"{TARGET.relative_to(ROOT)} is stale: run .venv/bin/python scripts/unasync.py")
            return 1
        return 0
    TARGET.write_text(text)
    print(f"wrote {TARGET.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
