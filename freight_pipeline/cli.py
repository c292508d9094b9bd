"""The ``freight-pipeline`` command: a thin dispatcher; each subcommand lives with the code it drives."""

from __future__ import annotations

import argparse
import contextlib
import importlib
import signal
import sys
from collections.abc import Sequence

from freight_pipeline.process_end import (
    exit_now,
    forked_children_ended,
    signal_exit_code,
    stop_signal,
    terminated_as_interrupted,
)

# subcommand -> (module, one-line help). Each module offers add_arguments(parser) and run(args) -> int.
SUBCOMMANDS: dict[str, tuple[str, str]] = {
    "simulator": ("freight_pipeline.simulator.cli", "serve the bundled freight-service simulator"),
    "sync": ("freight_pipeline.commands.sync", "run the sync job once, headless, against the configured service"),
    "rebuild": ("freight_pipeline.commands.rebuild",
                "re-derive every table from the raw records held (no request to the service), build, publish"),
    "settings": ("freight_pipeline.commands.settings",
                 "every effective setting, its value (secrets masked) and where it came from"),
    "status": ("freight_pipeline.commands.status", "cursors, last runs and row counts of the published warehouse"),
    "demo": ("freight_pipeline.commands.demo", "simulator, full sync, changes, incremental sync, summary"),
    "ui": ("freight_pipeline.commands.ui", "the simulator and the Dagster UI with the schedules running"),
    "dashboard": ("freight_pipeline.commands.dashboard", "the BI dashboard (Streamlit) over the published warehouse"),
}

DESCRIPTION = ("A scheduled, incremental sync of a freight forwarder's service into a DuckDB warehouse published as "
               "DuckDB and Parquet, with dbt marts; `freight-pipeline COMMAND --help` for each command.")
"""What ``freight-pipeline --help`` says of the command (not this module's docstring, which is for its readers)."""
INTERRUPTED = signal_exit_code(signal.SIGINT)
"""Exit code of a command stopped by Ctrl-C (SIGINT): 130."""
TERMINATED = signal_exit_code(signal.SIGTERM)
"""Exit code of a command stopped by SIGTERM (a service manager's stop, ``kill``, ``timeout``): 143."""
HUNG_UP = signal_exit_code(signal.SIGHUP)
"""Exit code of a command its terminal's going away stopped (SIGHUP): 129."""
STOPPED_HOW = {signal.SIGINT: "interrupted (Ctrl-C)", signal.SIGTERM: "terminated (SIGTERM)",
               signal.SIGHUP: "hung up (SIGHUP)"}
"""How a stopped command says it was stopped, by the signal that stopped it."""


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The parser of every subcommand; given ``command``, only that one's module is imported (the
    others are listed by name and help): a run of ``sync`` does not pay for importing the dashboard."""
    parser = argparse.ArgumentParser(prog="freight-pipeline", description=DESCRIPTION)
    sub = parser.add_subparsers(dest="command", required=True)
    for name, (module_name, help_text) in SUBCOMMANDS.items():
        sub_parser = sub.add_parser(name, help=help_text, description=help_text)
        if command is None or name == command:
            module = importlib.import_module(module_name)
            module.add_arguments(sub_parser)
            sub_parser.set_defaults(_run=module.run)
    return parser


def command_named(argv: Sequence[str]) -> str | None:
    """The subcommand ``argv`` names (its first word that is not an option), if it is one."""
    word = next((arg for arg in argv if not arg.startswith("-")), None)
    return word if word in SUBCOMMANDS else None


OWN_STOPS = frozenset({"simulator", "ui", "dashboard"})
"""The subcommands whose servers stop on SIGINT and SIGTERM by handlers of their own (uvicorn's, Dagster's,
Streamlit's), started with SIGINT ignored too: :func:`~freight_pipeline.process_end.terminated_as_interrupted`'s
mask would keep Ctrl-C from them."""


def main(argv: Sequence[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    own = command_named(argv) in OWN_STOPS
    with contextlib.nullcontext() if own else terminated_as_interrupted():  # SIGTERM as Ctrl-C, from the imports on
        try:
            return _dispatched(argv)
        except KeyboardInterrupt as stop:  # the blocks it left have let go of their locks and workers; no traceback
            return _stopped(" ".join(filter(None, ["freight-pipeline", command_named(argv)])), stop)


def _dispatched(argv: Sequence[str]) -> int:
    """The subcommand ``argv`` names run (its module imported first: a second or more), its exit code."""
    from freight_pipeline.lake.connect import LakeUnavailable

    args = build_parser(command_named(argv)).parse_args(argv)
    try:
        return int(args._run(args) or 0)
    except LakeUnavailable as exc:  # a configuration to fix, not a bug: its message, no traceback
        print(f"freight-pipeline {args.command}: {exc}", file=sys.stderr)
        return 2


def _stopped(program: str, stop: KeyboardInterrupt) -> int:
    """What ``program`` (``freight-pipeline sync``) stopped by Ctrl-C, SIGTERM or SIGHUP says in one line on stderr
    (where its run was, and what of it is kept, when it says: ``StoppedIn``); its exit code."""
    from freight_pipeline.commands.common import StoppedIn

    signum = stop_signal() or signal.SIGINT  # none noted: Ctrl-C, as the interpreter's own KeyboardInterrupt
    how, code = STOPPED_HOW[signum], signal_exit_code(signum)
    where = f" {stop}" if isinstance(stop, StoppedIn) else ""
    print(f"{program}: {how}{where}; exit {code}", file=sys.stderr)
    forked_children_ended()
    return code


def entry() -> None:
    """The ``freight-pipeline`` program: :func:`main`, then the process's end without the interpreter's teardown
    (:func:`~freight_pipeline.process_end.exit_now`). Tests call :func:`main` in their own process."""
    exit_now(main())


if __name__ == "__main__":
    entry()
