"""The settings (``freight_pipeline.config``): every field of every model set through the environment, the
settings file and the Dagster resources, read back in a run's effective settings with its source; the order
of the sources; secrets never shown; ``freight-pipeline settings``."""

from __future__ import annotations

import datetime as dt
import io
import json
import os
import re
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path
from typing import Any

import pytest

from freight_pipeline.cli import main
from freight_pipeline.config import (
    CONCERNS,
    FORMER_NAMES,
    LINK_SETTINGS,
    MAX_COUNT,
    MAX_MINUTES,
    MAX_WORKERS,
    BadSettings,
    ScheduleSettings,
    Settings,
    SettingsModel,
    load_settings,
    or_never,
    plain_type,
    setting_names,
    setting_value,
    shown_value,
    variable,
    without_password,
)
from freight_pipeline.defs.resources import FreightServiceResource, WarehouseResource, run_settings
from freight_pipeline.sync.settings import SyncSettings

TEXT_SAMPLES: dict[str, str] = {
    "base_url": "http://tms.example:8080",
    "username": "etl-user",
    "password": "s3cret-pw",
    "start_cursor": "2026-01-02 03:04:05",
    "service_timezone": "Europe/Berlin",
    "events_refresh": "on",
    "data_dir": "/tmp/freight-settings-test",
    "duckdb_memory_limit": "300MB",
    "duckdb_publish_memory_limit": "700MB",
    "publish_storage_version": "latest",
    "dbt_memory_limit": "1GB",
    "dbt_worker_server": "/tmp/dbt-worker.sock",
    "lake_catalog_uri": "sqlite:///tmp/freight-settings-test/catalog.sqlite",
    "lake_data_uri": "/tmp/freight-settings-test/lake",
    "lake_s3_url_style": "path",
    "backfill_id_boundaries": "100,200",
    "normalize_workers": "2",
    "alert_urls": "json://127.0.0.1:9/hook mailto://alerts:pw@smtp.example.com?to=a@example.com,b@example.com",
    "alert_level": "error",
    "alert_deployment": "prod-eu",
    "dagster_url": "http://dagster.example:3000",
}
"""A value of each setting whose type alone does not give one (text, a choice, a path, a list)."""
NOT_IN_A_RESOURCE = {name for name in ScheduleSettings.settings_fields()}
"""Read when the Dagster definitions load (the schedules' default status, the freshness check's age), before any
resource exists: the environment and the settings file set them."""
RESOURCES = (FreightServiceResource, WarehouseResource)


def default_of(concern: type[SettingsModel], name: str) -> Any:
    return getattr(concern.model_construct(), concern.settings_fields()[name])


def sample(concern: type[SettingsModel], name: str) -> str | int | float | bool:
    """A valid value of setting ``name`` that is not its default, in its plain form (a duration: minutes)."""
    if name in TEXT_SAMPLES:
        return TEXT_SAMPLES[name]
    default = default_of(concern, name)
    if isinstance(default, bool):
        return not default
    if isinstance(default, int):
        return default // 2 + 1
    if isinstance(default, float):
        return 0.25 if default != 0.25 else 0.5
    if isinstance(default, dt.timedelta):
        return int(default.total_seconds() // 60) + 7
    if default is None and "minutes" in name:
        return 45
    raise AssertionError(f"no sample value for the setting {name}: add one to TEXT_SAMPLES")


def as_variable(value: str | int | float | bool) -> str:
    return ("1" if value else "0") if isinstance(value, bool) else str(value)


def as_toml(value: str | int | float | bool) -> str:
    return ("true" if value else "false") if isinstance(value, bool) else json.dumps(value)


def run_cli(monkeypatch: pytest.MonkeyPatch, argv: list[str], **env: str) -> tuple[int, str, str]:
    """``freight-pipeline <argv>`` in this process with no ``FREIGHT_*`` variable but ``env``: exit code, stdout,
    stderr."""
    for name in list(os.environ):
        if name.startswith("FREIGHT_"):
            monkeypatch.delenv(name)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        code = main(argv)
    return code, out.getvalue(), err.getvalue()


EVERY = [(concern, name) for concern in CONCERNS for name in concern.settings_fields()]


def expected(concern: type[SettingsModel], name: str) -> str:
    """How ``settings`` shows the sample (its value once validated)."""
    value = sample(concern, name)
    if name == "password":
        return "***"
    if name == "alert_urls":  # each shown by its scheme: tokens and passwords sit anywhere after it
        return "json://*** mailto://***"
    if name == "backfill_id_boundaries":
        return str(value)
    return as_variable(value)


def check_read_back(settings: Settings, source: str) -> None:
    for concern, name in EVERY:
        value = setting_value(settings, name)
        assert value != default_of(concern, name), name
        assert shown_value(name, value) == expected(concern, name), name
        assert settings.sources[name] == source(name), name
    assert settings.service.secret == TEXT_SAMPLES["password"]
    assert settings.alerts.alert_urls == tuple(TEXT_SAMPLES["alert_urls"].split())  # the comma stays in its URL
    run = SyncSettings.of(settings.sync)  # what a run of the sync is handed
    fields = settings.sync.settings_fields().values()
    assert all(getattr(run, field) == getattr(settings.sync, field) for field in fields)
    assert run.zone.name == TEXT_SAMPLES["service_timezone"]
    retry = run.retry_policy  # what the run's client is handed
    assert (retry.max_attempts, retry.jitter, retry.total_budget) == (
        settings.sync.request_attempts, settings.sync.request_jitter, settings.sync.request_budget_seconds)


def test_every_setting_has_one_variable_and_one_name() -> None:
    names = [name for concern in CONCERNS for name in concern.settings_fields()]
    assert len(names) == len(set(names)) == len(setting_names())
    assert not set(FORMER_NAMES) & {variable(name) for name in names}  # a former name is no setting's variable


def test_every_setting_is_read_from_the_environment() -> None:
    env = {variable(name): as_variable(sample(concern, name)) for concern, name in EVERY}
    check_read_back(load_settings(environ=env), lambda name: f"environment {variable(name)}")


def test_every_setting_is_read_from_the_settings_file(tmp_path: Path) -> None:
    file = tmp_path / "freight.toml"
    file.write_text("\n".join(f"[{concern.section}]\n" + "\n".join(
        f"{name} = {as_toml(sample(concern, name))}" for name in concern.settings_fields()) for concern in CONCERNS))
    check_read_back(load_settings(environ={"FREIGHT_SETTINGS_FILE": str(file)}), lambda name: f"file {file}")


def test_every_setting_is_read_from_the_dagster_resources(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each resource's fields are the settings of its concerns (derived, not copied); a run reads both."""
    covered = {name for resource in RESOURCES for concern in resource.concerns for name in concern.settings_fields()}
    assert covered == set(setting_names()) - NOT_IN_A_RESOURCE
    assert all(set(resource.model_fields) == {name for concern in resource.concerns for name in
                                              concern.settings_fields()} for resource in RESOURCES)
    given = {concern: {name: sample(concern, name) for name in concern.settings_fields()} for concern in CONCERNS}
    freight_service, warehouse = (resource(**{name: value for concern in resource.concerns
                                              for name, value in given[concern].items()}) for resource in RESOURCES)
    for name in NOT_IN_A_RESOURCE:  # the definitions read these from the environment
        monkeypatch.setenv(variable(name), as_variable(given[ScheduleSettings][name]))
    check_read_back(run_settings(freight_service, warehouse),
                    lambda name: f"environment {variable(name)}" if name in NOT_IN_A_RESOURCE else "Dagster resource")


def test_never_is_set_through_the_dagster_resources_as_through_any_source() -> None:
    """Enumerated from the declarations: every duration that can be ``never`` takes the word in its resource's field
    (the launchpad's YAML), and whole minutes still."""
    nevers = [(resource, name) for resource in RESOURCES for concern in resource.concerns
              for name in concern.settings_fields() if or_never(name)]
    assert {name for _, name in nevers} >= {"reconcile_interval_minutes", "documents_relist_minutes",
                                            "alert_repeat_minutes"}
    for resource, name in nevers:
        assert setting_value(resource(**{name: "never"}).settings(), name) is None, name
        assert setting_value(resource(**{name: 90}).settings(), name) == dt.timedelta(minutes=90), name
        with pytest.raises(BadSettings, match=rf"{name} \(Dagster resource \w+\)='sometimes': must be whole minutes"):
            resource(**{name: "sometimes"}).settings()


def test_a_flag_wins_over_the_environment_which_wins_over_the_file(tmp_path: Path) -> None:
    file = tmp_path / "settings.toml"
    file.write_text('[sync]\npage_size = 100\nfetch_window = 8\n\n[storage]\ndata_dir = "/from/the/file"\n')
    env = {"FREIGHT_SETTINGS_FILE": str(file), "FREIGHT_PAGE_SIZE": "200", "FREIGHT_DATA_DIR": "/from/env"}
    settings = load_settings({"data_dir": Path("/from/a/flag")}, environ=env)
    assert (settings.sync.page_size, settings.sync.fetch_window, settings.storage.data_dir) == (
        200, 8, Path("/from/a/flag"))
    assert [settings.sources[name] for name in ("data_dir", "page_size", "fetch_window", "concurrency")] == [
        "flag", "environment FREIGHT_PAGE_SIZE", f"file {file}", "default"]


def test_a_former_variable_is_read_and_the_new_one_wins() -> None:
    for former, name in FORMER_NAMES.items():
        assert load_settings(environ={former: "0.5"}).sources[name] == f"environment {former}"
        both = load_settings(environ={former: "0.5", variable(name): "0.25"})
        assert (setting_value(both, name), both.sources[name]) == (0.25, f"environment {variable(name)}")


def test_freight_toml_in_the_working_directory_is_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "freight.toml").write_text("[sync]\nrestore_probe = 0\n")
    monkeypatch.chdir(tmp_path)
    settings = load_settings(environ={})
    assert (settings.sync.restore_probe, settings.sources["restore_probe"]) == (0, "file freight.toml")


def test_never_and_empty_values() -> None:
    settings = load_settings(environ={"FREIGHT_RECONCILE_INTERVAL_MINUTES": "never", "FREIGHT_PAGE_SIZE": "  "})
    assert settings.sync.reconcile_interval is None and settings.sync.page_size == 500
    assert settings.sources["page_size"] == "default"  # an empty variable is unset


def test_secrets_are_never_shown(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    env = {"FREIGHT_PASSWORD": "pw-never-shown", "FREIGHT_LAKE_CATALOG_URI": "postgresql://etl:cat-pw@db:5432/lake",
           "FREIGHT_LAKE_DATA_URI": str(tmp_path / "lake"), "FREIGHT_DATA_DIR": str(tmp_path / "data")}
    settings = load_settings(environ=env)
    for name, value in env.items():  # a Dagster run's settings: its resources over this process's environment
        monkeypatch.setenv(name, value)
    resources = (FreightServiceResource(password="pw-never-shown"),
                 WarehouseResource(lake_catalog_uri=env["FREIGHT_LAKE_CATALOG_URI"]))
    for shown in (repr(settings), str(settings), *(repr(r) for r in resources), repr(run_settings(*resources))):
        assert "pw-never-shown" not in shown and "cat-pw" not in shown
    code, out, err = run_cli(monkeypatch, ["settings"], **env)
    assert code == 0 and "pw-never-shown" not in out + err and "cat-pw" not in out + err
    assert "postgresql://etl:***@db:5432/lake" in out


@pytest.mark.parametrize("catalog", [
    "host=db user=etl password='top secret' dbname=lake",
    "host=db user=etl password = 'it\\'s secret' dbname=lake",
    "host=db user=etl password=secret dbname=lake",
])
def test_a_libpq_password_quoted_or_not_is_masked_whole(catalog: str) -> None:
    shown = without_password(catalog)
    assert "secret" not in shown and shown.startswith("host=db user=etl password") and shown.endswith(" dbname=lake")


def test_a_scheme_in_capitals_is_the_same_scheme() -> None:
    """Schemes are case-insensitive (RFC 3986): the setup check accepted ``HTTPS://`` and the client refused it."""
    settings = load_settings(environ={"FREIGHT_BASE_URL": " HTTPS://Tms.example.com/api "})
    assert settings.service.base_url == "https://Tms.example.com/api"


def test_a_settings_file_that_is_not_utf8_is_named_not_a_traceback(tmp_path: Path) -> None:
    bad = tmp_path / "freight.toml"
    bad.write_bytes(b"\xff\xfe[sync]\n")
    with pytest.raises(BadSettings, match=r"freight.toml is not TOML: not UTF-8 text \(byte 0\)"):
        load_settings(environ={"FREIGHT_SETTINGS_FILE": str(bad)})


HOLDING_A_USER = [
    ("https://etl:url-pw-never-shown@tms.example.com/api", "https://***@tms.example.com/api"),
    ("https://url-pw-never-shown@tms.example.com/api", "https://***@tms.example.com/api"),  # a key as the user
    ("https://etl:url-pw@never-shown@tms.example.com/api", "https://***@tms.example.com/api"),  # a password with an @
    # a password with / ? or #, which ends the host part early (was shown whole as "a port that is not a number",
    # or in part, or taken as host etl, port 2024 and a path)
    ("https://etl:url-pw/never-shown@tms.example.com/api", "https://***@tms.example.com/api"),
    ("https://etl:url-pw?never-shown@tms.example.com/api", "https://***@tms.example.com/api"),
    ("https://etl:url-pw#never-shown@tms.example.com/api", "https://***@tms.example.com/api"),
    ("https://etl:2024/url-pw-never-shown@tms.example.com/api", "https://***@tms.example.com/api"),
]


@pytest.mark.parametrize(("name", "address", "shown", "reason"), [
    *((name, address, shown, "holds a user or password") for name in LINK_SETTINGS
      for address, shown in HOLDING_A_USER),
    ("base_url", "https://tms.example.com/api?api_key=url-pw-never-shown", "https://tms.example.com/api?***",
     "has a query or fragment"),
    ("base_url", "https://tms.example.com/api#url-pw-never-shown", "https://tms.example.com/api?***",
     "has a query or fragment"),
])
def test_an_address_holding_a_user_or_a_key_is_refused_and_the_refusal_masks_it(
        name: str, address: str, shown: str, reason: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every place shows the service's address (settings, the sync's first line, Dagster's log), and each alert
    the Dagster UI's: one holding a password, or a key as its user, is refused, and the refusal masks it (the UI's
    was shown whole when a key was its user); so is a service address whose query or fragment every path would
    follow, the query and fragment masked (an API key may sit there)."""
    code, out, err = run_cli(monkeypatch, ["settings"], **{variable(name): address})
    assert code == 2 and err.startswith(f"settings: {variable(name)}={shown!r}: {reason}"), err
    assert "url-pw-never-shown" not in out + err


def test_the_settings_command_shows_each_value_and_its_source(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    file = tmp_path / "freight.toml"
    file.write_text("[sync]\nfetch_window = 9\n")
    code, out, err = run_cli(monkeypatch, ["settings", "--data-dir", str(tmp_path / "d")],
                             FREIGHT_SETTINGS_FILE=str(file), FREIGHT_HISTORY="0", FREIGHT_PAGESIZE="10")
    assert code == 0
    rows = {line.split()[1]: line.split(None, 3)[2:] for line in out.splitlines()[1:]}
    assert len(rows) == len(setting_names())
    assert rows["fetch_window"] == ["9", f"file {file}"]
    assert rows["history"] == ["0", "environment FREIGHT_HISTORY"]
    assert rows["data_dir"] == [str(tmp_path / "d"), "flag"]
    assert rows["page_size"] == ["500", "default"]
    assert err == "settings: FREIGHT_PAGESIZE is set but is not a setting (a typo?): nothing reads it\n"


def test_the_docs_example_of_refused_values_is_what_sync_prints(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """``docs/operations.md``'s example of bad values, as ``sync`` prints it (the file's path as the docs show it)."""
    text = (Path(__file__).resolve().parents[1] / "docs" / "operations.md").read_text()
    shown = text.split("the value\nand what is allowed, e.g.\n\n```text\n", 1)[1].split("```", 1)[0]
    file = tmp_path / "freight.toml"
    file.write_text('[sync]\nreconcile_interval_minutes = "hourly"\n')
    code, _, err = run_cli(monkeypatch, ["sync", "--data-dir", str(tmp_path / "data")],
                           FREIGHT_SETTINGS_FILE=str(file), FREIGHT_PAGE_SIZE="900")
    assert code == 2 and err.replace(str(file), "/srv/freight/freight.toml") == shown


@pytest.mark.parametrize(("given", "read"), [
    ("2026-01-02", "2026-01-02 00:00:00"),
    ("2026-01-02T03:04:05", "2026-01-02 03:04:05"),
    (" 2026-01-02 03:04 ", "2026-01-02 03:04:00"),
    ("", None),
])
def test_a_start_cursor_is_read_in_each_documented_form(given: str, read: str | None) -> None:
    assert load_settings(environ={"FREIGHT_START_CURSOR": given}).sync.start_cursor == read


@pytest.mark.parametrize("given", [
    "01/02/2026", "2026-13-01", "20260102", "2026-01-02 25:00:00", "2026-01-02 03:04:05+02:00", "yesterday"])
def test_a_start_cursor_in_any_other_form_is_refused_up_front(given: str) -> None:
    """Refused with the other settings before a run's first request, not by the walk after other streams ran
    (``commands/test_bad_setup.py``: what the commands print)."""
    with pytest.raises(BadSettings) as refused:
        load_settings(environ={"FREIGHT_START_CURSOR": given})
    assert str(refused.value) == (f"FREIGHT_START_CURSOR={given!r}: must be YYYY-MM-DD or YYYY-MM-DD HH:MM:SS "
                                  "(the service's wall clock)")


def test_a_destination_listed_twice_gets_each_message_once() -> None:
    """Listed twice (in one variable, or the file's list), a URL is one destination: two would share the outbox's
    key and stop every alert."""
    hook, mail = "json://127.0.0.1:9/hook", "mailto://alerts:pw@smtp.example.com?to=a@example.com"
    settings = load_settings(environ={"FREIGHT_ALERT_URLS": f"{hook} {mail},{hook}\n{mail}"})
    assert settings.alerts.alert_urls == (hook, mail)


NUMBERS = [(concern, name) for concern, name in EVERY if plain_type(concern, name) in (int, float)]


@pytest.mark.parametrize(("concern", "name"), NUMBERS, ids=[name for _, name in NUMBERS])
def test_true_or_false_for_a_number_is_refused_not_read_as_1_or_0(
        concern: type[SettingsModel], name: str, tmp_path: Path) -> None:
    """Enumerated from the declarations: every setting of a number (a count, a share, minutes) given ``true`` in
    the settings file or a resource is refused where it was set."""
    file = tmp_path / "freight.toml"
    file.write_text(f"[{concern.section}]\n{name} = true\n")
    with pytest.raises(BadSettings) as refused:
        load_settings(environ={"FREIGHT_SETTINGS_FILE": str(file)})
    assert str(refused.value).startswith(f"{file} [{concern.section}] {name}=True: must be "), str(refused.value)


WHOLE_NUMBERS = [(concern, name) for concern, name in EVERY
                 if plain_type(concern, name) is int or (or_never(name) and name != "alert_urls")]
FRACTIONS = [(concern, name) for concern, name in EVERY if plain_type(concern, name) is float]


@pytest.mark.parametrize(("concern", "name"), WHOLE_NUMBERS, ids=[name for _, name in WHOLE_NUMBERS])
def test_a_number_too_large_for_any_run_is_refused_up_front(concern: type[SettingsModel], name: str) -> None:
    """Enumerated from the declarations: every count and duration given 20 digits is refused in one line naming its
    variable (was: a traceback from ``settings`` and ``status``, the definitions failing to load, or a run failing
    half-way: ``OverflowError`` in the shipments stream after the others published, an INT64 overflow in DuckDB)."""
    environ = {variable(name): "99999999999999999999"}
    with pytest.raises(BadSettings) as refused:
        load_settings(environ=environ)
    (line,) = refused.value.problems
    assert line.startswith(f"{variable(name)}='99999999999999999999': "), line
    assert re.search(rf"\b({MAX_MINUTES}|{MAX_COUNT}|{MAX_WORKERS}|500)\b", line), line  # the largest it takes, said


@pytest.mark.parametrize(("concern", "name"), FRACTIONS, ids=[name for _, name in FRACTIONS])
@pytest.mark.parametrize("value", ["inf", "nan"])
def test_an_infinite_or_undefined_fraction_is_refused(concern: type[SettingsModel], name: str, value: str) -> None:
    """An infinite backoff or budget would hang a run: every float setting refuses it, naming its variable."""
    with pytest.raises(BadSettings, match=rf"^{variable(name)}='{value}': "):
        load_settings(environ={variable(name): value})


@pytest.mark.parametrize("password", [" pass phrase ", "\tpw\t", "pw "])
def test_a_password_keeps_its_blanks_from_the_environment_as_from_the_file(password: str, tmp_path: Path) -> None:
    """Was: the environment's lost its leading and trailing blanks (a 401), the file's kept them; a line's end (a
    variable read from a file) is no part of it, and a password of blanks alone is none."""
    file = tmp_path / "freight.toml"
    file.write_text(f"[service]\npassword = {json.dumps(password)}\n")
    from_file = load_settings(environ={"FREIGHT_SETTINGS_FILE": str(file)})
    from_env = load_settings(environ={"FREIGHT_PASSWORD": password})
    assert from_env.service.secret == from_file.service.secret == password
    assert load_settings(environ={"FREIGHT_PASSWORD": password + "\n"}).service.secret == password
    assert load_settings(environ={"FREIGHT_PASSWORD": "   "}).sources["password"] == "default"


def test_a_data_dir_under_the_home_is_the_same_directory_for_the_commands_and_the_dagster_resources(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``data_dir = "~/freight"`` in the settings file (no shell expands it there): was the home's for the commands,
    ``<cwd>/~/freight`` for a Dagster run, so ``status`` read another warehouse than the runs wrote."""
    monkeypatch.setenv("HOME", str(tmp_path))
    file = tmp_path / "freight.toml"
    file.write_text('[storage]\ndata_dir = "~/freight"\n')
    monkeypatch.setenv("FREIGHT_SETTINGS_FILE", str(file))
    assert load_settings().storage.data_dir == tmp_path / "freight"
    assert WarehouseResource().path == tmp_path / "freight"
    assert WarehouseResource(data_dir="~/other").path == tmp_path / "other"


@pytest.mark.parametrize("name", [name for name in setting_names() if name.endswith("memory_limit")])
def test_a_memory_size_beyond_what_duckdb_reads_is_refused_up_front(name: str) -> None:
    """``99999999TB``: was taken unasked, and the run failed half-way (its publish, or its marts: "Memory value out
    of range"), every run; a size DuckDB reads, however large, is taken."""
    with pytest.raises(BadSettings, match=rf"^{variable(name)}='99999999TB': is not a memory size DuckDB reads"):
        load_settings(environ={variable(name): "99999999TB"})
    load_settings(environ={variable(name): "1000000TB"})
