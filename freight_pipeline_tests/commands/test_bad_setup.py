"""Every bad setup refused before anything runs: through the real CLI, exit 2 and one line on stderr per bad
value, naming the setting (its variable, or its place in the settings file), the value and what is allowed, no
traceback, nothing written to the data directory.

A case per command runs ``freight-pipeline`` in a process of its own (:data:`IN_A_PROCESS`: the exit
status and stderr a user sees); the rest call the same entry point, :func:`freight_pipeline.cli.main`,
in this process with the same environment (a child process costs seconds of imports, ~40 of them a
minute of the suite)."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import redirect_stderr, redirect_stdout
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from freight_pipeline.cli import main
from freight_pipeline.config import MAX_WORKERS, REPO_ROOT
from freight_pipeline.lake.local import free_port

SECRETS = ("tok3n", "a:b@")
"""Parts of the cases' URLs that are secrets (a token, a user and password): never in what a refusal says."""
UNREACHABLE = "http://127.0.0.1:9"
"""Nothing listens there: a case that got past the checks would fail on the service, not exit 2."""


@dataclass(frozen=True)
class Case:
    id: str
    env: dict[str, str] = field(default_factory=dict)
    says: str = ""
    """What the one line holds (``{data}``: the data directory, ``{file}``: a plain file)."""
    args: tuple[str, ...] = ("sync",)
    data: str = "{tmp}/data"
    """The data directory (``FREIGHT_DATA_DIR``, or ``--data-dir`` when ``args`` has it)."""
    file: str | None = None
    """The settings file ``{tmp}/freight.toml`` holds."""
    lines: int = 1
    """Lines on stderr: one per bad value."""


A_FILE = "{tmp}/a-file"
READ_ONLY = "/sys/freight-data" if os.geteuid() == 0 else "{tmp}/read-only/data"
"""A directory this process cannot create: sysfs refuses new files even to root; otherwise mode 0o500."""

CASES = [
    Case("data dir is a file", data=A_FILE, says="FREIGHT_DATA_DIR={tmp}/a-file is a file, not a directory"),
    Case("data dir under a file", data=A_FILE + "/data",
         says="FREIGHT_DATA_DIR={tmp}/a-file/data is under {tmp}/a-file, which is a file, not a directory"),
    Case("--data-dir is a file", args=("sync", "--data-dir", A_FILE), data="",
         says="--data-dir={tmp}/a-file is a file, not a directory"),
    Case("data dir DuckDB cannot use", data="{tmp}/what?/data",
         says="FREIGHT_DATA_DIR={tmp}/what?/data: DuckDB cannot open the database "
              "{tmp}/what?/data/work/warehouse.duckdb: its path has '?' (DuckDB reads it as the start of options)"),
    Case("data dir not writable", data=READ_ONLY, says=f"FREIGHT_DATA_DIR={READ_ONLY} is not writable"),
    Case("disk too full", env={"FREIGHT_MIN_FREE_MB": "2000000000"},
         says="MB free on its disk, less than the 2000000000 MB a run needs at least (FREIGHT_MIN_FREE_MB)"),
    Case("free-space floor not a number", env={"FREIGHT_MIN_FREE_MB": "lots"},
         says="FREIGHT_MIN_FREE_MB='lots': Input should be a valid integer"),
    Case("base URL not a URL", env={"FREIGHT_BASE_URL": "not-a-url"},
         says="FREIGHT_BASE_URL='not-a-url': is not an http(s) URL"),
    Case("base URL without host", env={"FREIGHT_BASE_URL": "https://"},
         says="FREIGHT_BASE_URL='https://': names no host"),
    Case("base URL bad port", env={"FREIGHT_BASE_URL": "http://tms:port"},
         says="FREIGHT_BASE_URL='http://tms:port': has a port that is not a number from 0 to 65535"),
    Case("base URL port out of range", env={"FREIGHT_BASE_URL": "http://tms:99999"},
         says="FREIGHT_BASE_URL='http://tms:99999': has a port that is not a number from 0 to 65535"),
    Case("no password", env={"FREIGHT_PASSWORD": ""}, says="FREIGHT_PASSWORD is not set"),
    Case("reconcile not minutes", env={"FREIGHT_RECONCILE_INTERVAL_MINUTES": "soon"},
         says="FREIGHT_RECONCILE_INTERVAL_MINUTES='soon': must be whole minutes (0 or more), or never"),
    Case("reconcile negative", env={"FREIGHT_RECONCILE_INTERVAL_MINUTES": "-5"},
         says="FREIGHT_RECONCILE_INTERVAL_MINUTES='-5': must be whole minutes (0 or more), or never"),
    Case("relist not minutes", env={"FREIGHT_DOCUMENTS_RELIST_MINUTES": "daily"},
         says="FREIGHT_DOCUMENTS_RELIST_MINUTES='daily': must be whole minutes (0 or more), or never"),
    Case("max sync age not minutes", env={"FREIGHT_MAX_SYNC_AGE_MINUTES": "1h"},
         says="FREIGHT_MAX_SYNC_AGE_MINUTES='1h': must be whole minutes (0 or more)"),
    Case("start cursor not a date", env={"FREIGHT_START_CURSOR": "01/02/2026"},
         says="FREIGHT_START_CURSOR='01/02/2026': must be YYYY-MM-DD or YYYY-MM-DD HH:MM:SS"),
    # an age limit of 0 holds every run too old: an alert, or a re-read, that never ends
    *(Case(f"{name} zero", env={name: "0"}, says=f"{name}='0': must be positive")
      for name in ("FREIGHT_MAX_SYNC_AGE_MINUTES", "FREIGHT_EVENTS_MAX_AGE_MINUTES")),
    Case("on-time tolerance not minutes", env={"FREIGHT_ON_TIME_TOLERANCE_MINUTES": "an hour"},
         says="FREIGHT_ON_TIME_TOLERANCE_MINUTES='an hour': must be whole minutes (0 or more)"),
    Case("service time zone unknown", env={"FREIGHT_SERVICE_TIMEZONE": "Mars/Olympus_Mons"},
         says="FREIGHT_SERVICE_TIMEZONE='Mars/Olympus_Mons': 'Mars/Olympus_Mons' is not an IANA time zone"),
    Case("hedge share not a share", env={"FREIGHT_HEDGE_SHARE": "lots"},
         says="FREIGHT_HEDGE_SHARE='lots': Input should be a valid number"),
    Case("hedge share by its former name", env={"FREIGHT_HEDGE": "2"},
         says="FREIGHT_HEDGE='2': Input should be less than or equal to 1"),
    Case("page size above the service's", env={"FREIGHT_PAGE_SIZE": "501"},
         says="FREIGHT_PAGE_SIZE='501': Input should be less than or equal to 500"),
    Case("events refresh mode", env={"FREIGHT_EVENTS_REFRESH": "sometimes"},
         says="FREIGHT_EVENTS_REFRESH='sometimes': Input should be 'auto', 'on' or 'off'"),
    Case("two bad values, a line each", env={"FREIGHT_PAGE_SIZE": "0", "FREIGHT_FETCH_WINDOW": "none"}, lines=2,
         says="FREIGHT_FETCH_WINDOW='none': Input should be a valid integer"),
    Case("retry waits out of order", env={"FREIGHT_RETRY_AFTER_MINUTES": "90", "FREIGHT_RETRY_AFTER_MAX_MINUTES": "60"},
         says="[sync] retry_after_minutes must not be above retry_after_max_minutes: "
         "FREIGHT_RETRY_AFTER_MINUTES='90', FREIGHT_RETRY_AFTER_MAX_MINUTES='60'"),
    Case("retry wait above its maximum's default", env={"FREIGHT_RETRY_AFTER_MINUTES": "3000"},
         says="[sync] retry_after_minutes must not be above retry_after_max_minutes: "
         "FREIGHT_RETRY_AFTER_MINUTES='3000', retry_after_max_minutes=1440 (the default)"),
    Case("settings file: a bad value", env={"FREIGHT_SETTINGS_FILE": "{tmp}/freight.toml"},
         file="[sync]\nconcurrency = 0\n", says="{tmp}/freight.toml [sync] concurrency=0: Input should be greater"),
    Case("settings file: not a setting", env={"FREIGHT_SETTINGS_FILE": "{tmp}/freight.toml"},
         file="[sync]\npagesize = 10\n", says="{tmp}/freight.toml: [sync] pagesize is not a setting of [sync]"),
    Case("settings file: not TOML", env={"FREIGHT_SETTINGS_FILE": "{tmp}/freight.toml"},
         file="[sync\n", says="{tmp}/freight.toml is not TOML"),
    Case("settings file missing", env={"FREIGHT_SETTINGS_FILE": "{tmp}/nowhere.toml"},
         says="FREIGHT_SETTINGS_FILE='{tmp}/nowhere.toml' cannot be read: No such file or directory"),
    Case("lake retention not minutes", env={"FREIGHT_LAKE_RETENTION_MINUTES": "7d"},
         says="FREIGHT_LAKE_RETENTION_MINUTES='7d': must be whole minutes (0 or more)"),
    *(Case(f"{name} not a flag", env={name: "maybe"},
           says=f"{name}='maybe': must be 1/true/yes/on or 0/false/no/off")
      for name in ("FREIGHT_SYNC_DOCUMENTS", "FREIGHT_SYNC_CODE_CONVERSIONS", "FREIGHT_HISTORY",
                   "FREIGHT_DOCUMENT_CONTENT", "FREIGHT_SCHEDULES_RUNNING", "FREIGHT_DBT_FULL_REFRESH")),
    *(Case(f"{name} not a size", env={name: "lots"}, says=f"{name}='lots': is not a memory size DuckDB reads")
      for name in ("FREIGHT_DUCKDB_MEMORY_LIMIT", "FREIGHT_DUCKDB_PUBLISH_MEMORY_LIMIT", "FREIGHT_DBT_MEMORY_LIMIT")),
    Case("storage version unknown", env={"FREIGHT_PUBLISH_STORAGE_VERSION": "v1.5"},
         says="FREIGHT_PUBLISH_STORAGE_VERSION='v1.5': is not a storage version duckdb"),
    Case("storage version unknown in the settings file", env={"FREIGHT_SETTINGS_FILE": "{tmp}/freight.toml"},
         file='[storage]\npublish_storage_version = "v1.50"\n',  # was blamed on the variable, which is not set
         says="{tmp}/freight.toml [storage] publish_storage_version='v1.50': is not a storage version duckdb"),
    Case("lake catalog without data", env={"FREIGHT_LAKE_CATALOG_URI": "sqlite:///{tmp}/c.sqlite"},
         says="lake mode needs both FREIGHT_LAKE_CATALOG_URI and FREIGHT_LAKE_DATA_URI; "
         "FREIGHT_LAKE_DATA_URI is not set"),
    Case("lake catalog scheme", env={"FREIGHT_LAKE_CATALOG_URI": "mysql://h/db", "FREIGHT_LAKE_DATA_URI": "{tmp}/lake"},
         says="FREIGHT_LAKE_CATALOG_URI must start with postgresql://, sqlite:/// or duckdb:///"),
    Case("lake catalog scheme in the settings file", env={"FREIGHT_SETTINGS_FILE": "{tmp}/freight.toml"},
         file='[lake]\nlake_catalog_uri = "mysql://h/db"\nlake_data_uri = "{tmp}/lake"\n',
         says="FREIGHT_LAKE_CATALOG_URI must start with postgresql://, sqlite:/// or duckdb:///, got 'mysql://h/db' "
         "(the lake's settings from file {tmp}/freight.toml)"),
    Case("lake S3 URL style", env={"FREIGHT_LAKE_CATALOG_URI": "sqlite:///{tmp}/c.sqlite",
                                   "FREIGHT_LAKE_DATA_URI": "s3://bucket/x", "FREIGHT_LAKE_S3_URL_STYLE": "sideways"},
         says="FREIGHT_LAKE_S3_URL_STYLE='sideways': Input should be 'path' or 'vhost'"),
    Case("backfill boundaries", env={"FREIGHT_BACKFILL_ID_BOUNDARIES": "500,200"},
         says="FREIGHT_BACKFILL_ID_BOUNDARIES='500,200': must be increasing shipment ids above 0"),
    Case("demo: data dir is a file", args=("demo", "--shipments", "10"), data=A_FILE,
         says="FREIGHT_DATA_DIR={tmp}/a-file is a file, not a directory"),
    Case("ui: data dir is a file", args=("ui", "--port", str(free_port()), "--simulator-port", str(free_port())),
         data=A_FILE, says="FREIGHT_DATA_DIR={tmp}/a-file is a file, not a directory"),
    Case("ui: two bad values, a line each", args=("ui", "--port", str(free_port()), "--simulator-port",
                                                   str(free_port())), env={"FREIGHT_PAGE_SIZE": "0",
                                                                            "FREIGHT_HISTORY": "maybe"}, lines=2,
         says="FREIGHT_HISTORY='maybe': must be 1/true/yes/on or 0/false/no/off"),
    # beyond any machine's cores, a count of worker processes only forks toward the system's limit
    Case("normalize workers beyond the bound", env={"FREIGHT_NORMALIZE_WORKERS": str(MAX_WORKERS + 1)},
         says=f"FREIGHT_NORMALIZE_WORKERS='{MAX_WORKERS + 1}': Input should be less than or equal to {MAX_WORKERS}"),
    Case("rebuild: --workers beyond the bound", args=("rebuild", "--workers", str(MAX_WORKERS + 1)),
         says=f"--workers must be from 0 to {MAX_WORKERS}"),
    Case("rebuild: a bad value", args=("rebuild",), env={"FREIGHT_DBT_REPLAY": "sometimes"},
         says="FREIGHT_DBT_REPLAY='sometimes': must be 1/true/yes/on or 0/false/no/off"),
    Case("alert URL of no kind Apprise knows", env={"FREIGHT_ALERT_URLS": "json://127.0.0.1:9/hook slak://T1/A1/tok3n"},
         says="FREIGHT_ALERT_URLS: slak://*** is not a notification URL Apprise knows"),
    Case("alert URL in the settings file", env={"FREIGHT_SETTINGS_FILE": "{tmp}/freight.toml"},
         file='[alerts]\nalert_urls = ["mailto2://a:b@smtp.example.com"]\n',
         says="{tmp}/freight.toml [alerts] alert_urls: mailto2://*** is not a notification URL Apprise knows"),
    Case("Dagster URL with a password", env={"FREIGHT_DAGSTER_URL": "https://ops:a:b@dagster.example.com"},
         says="FREIGHT_DAGSTER_URL='https://***@dagster.example.com': holds a user or password"),
    Case("status: a bad value", args=("status",), env={"FREIGHT_MIN_FREE_MB": "-1"},
         says="FREIGHT_MIN_FREE_MB='-1': Input should be greater than or equal to 0"),
    # the readers too (was: a traceback, NotADirectoryError, from the run log under a file)
    *(Case(f"{' '.join(args[:2])}: data dir {kind}", args=args, data=data,
           says=f"FREIGHT_DATA_DIR={data} {said}, not a directory")
      for args in (("status",), ("status", "--json"), ("dashboard", "--port", str(free_port())))
      for kind, data, said in (("is a file", A_FILE, "is a file"),
                               ("under a file", A_FILE + "/data", "is under {tmp}/a-file, which is a file"))),
    *(Case(f"dashboard: {what}", args=("dashboard", "--port", str(free_port())), env=env, file=file, says=says)
      for what, env, file, says in (  # was: a traceback (BadSettings)
          ("a bad value", {"FREIGHT_DUCKDB_MEMORY_LIMIT": "lots"}, None,
           "FREIGHT_DUCKDB_MEMORY_LIMIT='lots': is not a memory size DuckDB reads"),
          ("a bad storage value", {"FREIGHT_MIN_FREE_MB": "-1"}, None,
           "FREIGHT_MIN_FREE_MB='-1': Input should be greater than or equal to 0"))),
    Case("status --alert: a bad value", args=("status", "--alert"), env={"FREIGHT_ALERT_LEVEL": "loud"},
         says="FREIGHT_ALERT_LEVEL='loud': Input should be"),
    # was: status --alert took it, queued a message no destination could get and exited 0, every look
    Case("status --alert: an alert URL of no kind Apprise knows", args=("status", "--alert"),
         env={"FREIGHT_ALERT_URLS": "jsn://127.0.0.1:9/hook"},
         says="FREIGHT_ALERT_URLS: jsn://*** is not a notification URL Apprise knows"),
    Case("DAGSTER_HOME is a file", env={"DAGSTER_HOME": A_FILE},
         says="DAGSTER_HOME={tmp}/a-file is a file, not a directory"),
    Case("demo: DAGSTER_HOME is a file", args=("demo", "--shipments", "10"), env={"DAGSTER_HOME": A_FILE},
         says="DAGSTER_HOME={tmp}/a-file is a file, not a directory"),
    Case("no such --job", args=("sync", "--job", "nope"),
         says="--job nope: no job 'nope' in freight_pipeline.definitions (jobs: "),
    Case("--partition of a job without partitions", args=("sync", "--partition", "0-99"),
         says="--partition 0-99: the job freight_sync_job has no partitions"),
    Case("settings: data dir is a file", args=("settings",), data=A_FILE,
         says="FREIGHT_DATA_DIR={tmp}/a-file is a file, not a directory"),
    Case("settings: disk too full", args=("settings", "--data-dir", "{tmp}/data"),
         env={"FREIGHT_MIN_FREE_MB": "2000000000"}, says="MB free on its disk, less than the 2000000000 MB"),
    Case("demo: disk too full", args=("demo", "--shipments", "10"), env={"FREIGHT_MIN_FREE_MB": "2000000000"},
         says="(FREIGHT_MIN_FREE_MB)"),
]
IN_A_PROCESS = frozenset({"data dir is a file", "base URL not a URL", "demo: data dir is a file",
                          "ui: data dir is a file"})
"""The cases run as a user runs them, ``python -m freight_pipeline.cli`` in a child process: one per command
and kind of check; the others call ``main`` in this process."""


def clean_env(tmp: Path, case: Case) -> dict[str, str]:
    """This process's environment without any pipeline setting, then the case's (``{tmp}`` filled in)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("FREIGHT_", "AWS_")) and k != "DAGSTER_HOME"}
    env.update(FREIGHT_BASE_URL=UNREACHABLE, FREIGHT_PASSWORD="x")
    if case.data:
        env["FREIGHT_DATA_DIR"] = case.data.format(tmp=tmp)
    env.update({name: value.format(tmp=tmp) for name, value in case.env.items()})
    return env


Refusals = dict[str, tuple[Path, subprocess.CompletedProcess[str]]]


def prepare(case: Case, tmp: Path) -> list[str]:
    """The case's files under ``tmp`` and its command line."""
    (tmp / "a-file").write_text("not a directory\n")
    if case.file is not None:
        (tmp / "freight.toml").write_text(case.file)
    if READ_ONLY.startswith("{tmp}"):
        (tmp / "read-only").mkdir(mode=0o500)
    return [arg.format(tmp=tmp) for arg in case.args]


def in_this_process(case: Case, tmp: Path) -> subprocess.CompletedProcess[str]:
    """``main`` called with the case's environment (and nothing else of the pipeline's) in ``os.environ``."""
    args = prepare(case, tmp)
    out, err = io.StringIO(), io.StringIO()
    with pytest.MonkeyPatch.context() as patch:
        for name in list(os.environ):
            patch.delenv(name)
        for name, value in clean_env(tmp, case).items():
            patch.setenv(name, value)
        with redirect_stdout(out), redirect_stderr(err):
            code = main(args)
    return subprocess.CompletedProcess(args, code, out.getvalue(), err.getvalue())


@pytest.fixture(scope="module")
def refusals(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Refusals]:
    """Every case run through the CLI (each in a temporary directory of its own): those of
    :data:`IN_A_PROCESS` through ``freight-pipeline`` in child processes, four at a time, the rest
    through ``main`` here meanwhile."""
    tmps = {c.id: tmp_path_factory.mktemp("bad_setup") for c in CASES}

    def run(case: Case) -> tuple[Path, subprocess.CompletedProcess[str]]:
        tmp = tmps[case.id]
        done = subprocess.run([sys.executable, "-m", "freight_pipeline.cli", *prepare(case, tmp)],
                              env=clean_env(tmp, case), cwd=REPO_ROOT, capture_output=True, text=True, timeout=120,
                              check=False)
        return tmp, done

    with ThreadPoolExecutor(max_workers=4) as pool:
        children = {c.id: pool.submit(run, c) for c in CASES if c.id in IN_A_PROCESS}
        here = {c.id: (tmps[c.id], in_this_process(c, tmps[c.id])) for c in CASES if c.id not in IN_A_PROCESS}
        yield {**here, **{name: child.result() for name, child in children.items()}}


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_a_bad_setup_is_refused_in_one_line_with_exit_2(case: Case, refusals: Refusals) -> None:
    tmp, done = refusals[case.id]
    command = case.args[0]
    assert (done.returncode, done.stdout) == (2, ""), done.stderr
    assert "Traceback" not in done.stderr
    assert done.stderr.count("\n") == case.lines, done.stderr
    assert all(line.startswith(f"{command}: ") for line in done.stderr.splitlines()), done.stderr
    assert done.stderr.startswith(f"{command}: ") and case.says.format(tmp=tmp) in done.stderr, done.stderr
    assert not (tmp / "data").exists(), "nothing may be written before the setup is checked"
    assert not any(secret in done.stderr for secret in SECRETS)
