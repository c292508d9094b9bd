"""The ``freight-pipeline`` command: a thin dispatcher; each subcommand lives with the code it drives."""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from freight_pipeline.lake.connect import LakeUnavailable

# subcommand -> (module, one-line help). Each module offers add_arguments(parser) and run(args) -> int.
SUBCOMMANDS: dict[str, tuple[str, str]] = {
    "simulator": ("freight_pipeline.simulator.cli", "serve the bundled freight-service simulator"),
    "sync": ("freight_pipeline.commands.sync", "run the sync job once, headless, against the configured service"),
    "status": ("freight_pipeline.commands.status", "cursors, last runs and row counts of the published warehouse"),
    "demo": ("freight_pipeline.commands.demo", "simulator, full sync, changes, incremental sync, summary"),
    "ui": ("freight_pipeline.commands.ui", "the simulator and the Dagster UI with the schedules running"),
    "dashboard": ("freight_pipeline.commands.dashboard", "the BI dashboard (Streamlit) over the published warehouse"),
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="freight-pipeline", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    for name, (module_name, help_text) in SUBCOMMANDS.items():
        module = importlib.import_module(module_name)
        sub_parser = sub.add_parser(name, help=help_text, description=help_text)
        module.add_arguments(sub_parser)
        sub_parser.set_defaults(_run=module.run)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args._run(args) or 0)
    except LakeUnavailable as exc:  # a configuration to fix, not a bug: its message, no traceback
        print(f"freight-pipeline {args.command}: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
