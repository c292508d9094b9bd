"""``freight-pipeline settings``: every effective setting, its value (secrets masked) and where it came from.

Read as ``sync`` and ``rebuild`` read them (``commands.preflight.check_settings``: the flags, the environment,
the settings file, the defaults, and the probes); exit 2 with one line per bad value, before any request.
``--markdown``: the table of every setting in the docs (``docs/operations.md`` holds it; a test compares).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from freight_pipeline.commands.common import add_data_dir_argument, resolve_data_dir, say_bad, say_unknown
from freight_pipeline.commands.preflight import BadSetup, check_data_dir, check_settings, data_dir_setting
from freight_pipeline.commands.text_table import format_table
from freight_pipeline.config import (
    CONCERNS,
    DEFAULT_SETTINGS_FILE,
    FORMER_NAMES,
    SETTINGS_FILE_ENV,
    Settings,
    default_shown,
    setting_value,
    shown_value,
    variable,
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_data_dir_argument(parser)
    parser.add_argument("--markdown", action="store_true",
                        help="print the reference table of every setting (name, variable, default, meaning) instead")
    parser.epilog = (f"Each setting is read from a flag, else its FREIGHT_* variable, else the settings file "
                     f"({SETTINGS_FILE_ENV}, else ./{DEFAULT_SETTINGS_FILE}), else its default.")


def run(args: argparse.Namespace) -> int:
    if args.markdown:
        print(reference_table())
        return 0
    try:
        settings = check_settings({"data_dir": args.data_dir} if args.data_dir is not None else None)
        storage = settings.storage  # the data directory probed as `sync` probes it (a file, not writable, full)
        check_data_dir(resolve_data_dir(storage.data_dir), data_dir_setting(args.data_dir), storage.min_free_mb)
    except BadSetup as exc:
        say_bad("settings", exc)
        return 2
    print(effective_table(settings))
    say_unknown("settings", settings)
    return 0


def effective_table(settings: Settings) -> str:
    """Every setting of ``settings``: its table in the file, name, value (secrets masked) and source."""
    rows = []
    for concern in CONCERNS:
        for name in concern.settings_fields():
            value = setting_value(settings, name)
            shown = str(resolve_data_dir(Path(value))) if name == "data_dir" else shown_value(name, value)
            rows.append([f"[{concern.section}]", name, shown, settings.sources[name]])
    return format_table(["table", "setting", "value", "from"], rows, indent="")


def reference_table() -> str:
    """The docs' table of every setting: its name (its table in the file), variable, default and meaning."""
    former = {name: variable_name for variable_name, name in FORMER_NAMES.items()}
    lines = ["| setting | variable | default | meaning |", "|---|---|---|---|"]
    for concern in CONCERNS:
        for name, field in concern.settings_fields().items():
            info = concern.model_fields[field]
            names = f"`{variable(name)}`" + (f" (or `{former[name]}`)" if name in former else "")
            default = default_shown(name)
            shown = "unset" if default == "-" else "—" if default == "(not set)" else f"`{default}`"
            lines.append(f"| `{name}` [{concern.section}] | {names} | {shown} | {info.description} |")
    return "\n".join(lines)
