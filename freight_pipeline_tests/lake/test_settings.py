"""Unit tests of lake mode's configuration (``LakeSettings.configured``), the SQL it leads to and one real
DuckLake over a SQLite catalog; secrets must never show in ``repr``, ``describe()`` or error messages."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import duckdb
import pytest

from freight_pipeline.config import LAKE_CATALOG_URI_ENV, LAKE_DATA_URI_ENV, BadSettings, variable
from freight_pipeline.lake import connect
from freight_pipeline.lake.connect import (
    LakeUnavailable,
    attach_sql,
    catalog_secret_sql,
    connect_lake,
    extension_path,
    secret_sql,
)
from freight_pipeline.lake.local import PostgresUnavailable, running_postgres
from freight_pipeline.lake.settings import LakeConfigError, LakeSettings, S3Settings
from freight_pipeline.sync.backfill import BackfillIncomplete, completed_cursor, id_ranges_between, takeover_cursor
from freight_pipeline.sync.cursor import ShipmentKey
from freight_pipeline.warehouse.ddl import literal

LAKE_S3_URL_STYLE_ENV = variable("lake_s3_url_style")
SECRET_KEY = "s3-secret-key-xyz"
S3_ENV = {
    "AWS_ACCESS_KEY_ID": "AKIDEXAMPLE",
    "AWS_SECRET_ACCESS_KEY": SECRET_KEY,
    "AWS_ENDPOINT_URL_S3": "http://127.0.0.1:9000",
}


def lake(catalog: str, data: str, **extra: str) -> LakeSettings:
    settings = LakeSettings.configured({LAKE_CATALOG_URI_ENV: catalog, LAKE_DATA_URI_ENV: data, **extra})
    assert settings is not None
    return settings


def s3_lake(**extra: str) -> LakeSettings:
    return lake("sqlite:///tmp/catalog.sqlite", "s3://bucket/prefix", **{**S3_ENV, **extra})


def test_no_lake_variables_means_no_lake():
    assert LakeSettings.configured({}) is None
    assert LakeSettings.configured({LAKE_CATALOG_URI_ENV: "  ", LAKE_DATA_URI_ENV: "", "OTHER": "x"}) is None


@pytest.mark.parametrize(("given", "missing"),
                         [(LAKE_CATALOG_URI_ENV, LAKE_DATA_URI_ENV), (LAKE_DATA_URI_ENV, LAKE_CATALOG_URI_ENV)])
def test_only_one_lake_variable_names_the_missing_one(given: str, missing: str):
    with pytest.raises(LakeConfigError, match=f"{missing} is not set"):
        LakeSettings.configured({given: "sqlite:///tmp/c.sqlite" if given == LAKE_CATALOG_URI_ENV else "/tmp/data"})


def test_postgres_catalog_uri():
    settings = lake("postgresql://user:pw@host:5432/db", "/tmp/data")
    assert settings.kind == "postgres"
    assert settings.attach_target == "postgres:user='user' host='host' port='5432' dbname='db'"
    assert settings.catalog_password == "pw"
    assert settings.multi_writer


def test_postgres_catalog_uri_without_a_password_is_attached_as_it_is():
    settings = lake("postgresql://user@host:5432/db?sslmode=require", "/tmp/data")
    assert settings.attach_target == "postgres:postgresql://user@host:5432/db?sslmode=require"
    assert settings.catalog_password is None
    assert catalog_secret_sql(settings) is None
    assert "META_SECRET" not in attach_sql(settings)


@pytest.mark.parametrize(("uri", "password", "target"), [
    ("postgresql://us%40er:p%40ss'w%3Ard@[::1]:6543,db2/lake%20x?sslmode=require&application_name=f",
     "p@ss'w:rd", "user='us@er' host='::1,db2' port='6543,' dbname='lake x' sslmode='require' application_name='f'"),
    ("postgresql://user@dbhost/db?password=top%26secret&ssl=true", "top&secret",
     "user='user' host='dbhost' dbname='db' sslmode='require'"),
    ("postgresql://o'brien:se?cr#et@dbhost/db", "se?cr#et", "user='o\\'brien' host='dbhost' dbname='db'"),
])
def test_postgres_catalog_password_goes_to_a_secret_not_the_attach_string(uri: str, password: str, target: str):
    settings = lake(uri, "/tmp/data")
    assert settings.catalog_password == password
    assert settings.attach_target == f"postgres:{target}"
    assert password not in attach_sql(settings)
    assert "META_SECRET 'freight_lake_catalog'" in attach_sql(settings)
    assert catalog_secret_sql(settings) == (
        "CREATE OR REPLACE TEMPORARY SECRET freight_lake_catalog (TYPE postgres, PASSWORD "
        f"{literal(password)})")


def test_sqlite_catalog_uri():
    settings = lake("sqlite:///abs/path.sqlite", "/tmp/data")
    assert settings.kind == "sqlite"
    assert settings.target == "/abs/path.sqlite"
    assert settings.attach_target == "sqlite:/abs/path.sqlite"


def test_duckdb_catalog_uri():
    settings = lake("duckdb:///abs/x.ducklake", "/tmp/data")
    assert settings.kind == "duckdb"
    assert settings.attach_target == "/abs/x.ducklake"
    assert not settings.multi_writer


def test_plain_catalog_path_is_a_duckdb_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.chdir(tmp_path)
    settings = lake("catalog.ducklake", "/tmp/data")
    assert settings.kind == "duckdb"
    assert settings.target == str(tmp_path.resolve() / "catalog.ducklake")


def test_unknown_catalog_scheme_names_the_variable_without_the_password():
    with pytest.raises(LakeConfigError) as raised:
        lake("mysql://user:hunter2@host:3306/db", "/tmp/data")
    assert LAKE_CATALOG_URI_ENV in str(raised.value)
    assert "hunter2" not in str(raised.value)


def test_describe_hides_a_uri_password_and_keeps_the_host():
    text = lake("postgresql://user:secret@dbhost:5432/db", "/tmp/data").describe()
    assert "secret" not in text
    assert "dbhost" in text


def test_describe_hides_a_libpq_password_and_keeps_the_host():
    text = LakeSettings("postgres", "postgresql:dbname=db host=dbhost password=secret", "/tmp/data/").describe()
    assert "secret" not in text
    assert "dbhost" in text


@pytest.mark.parametrize("password", ["se?cret", "se#cret"])
def test_describe_hides_a_uri_password_with_a_question_mark_or_hash(password: str):
    text = lake(f"postgresql://user:{password}@dbhost:5432/db", "/tmp/data").describe()
    assert password not in text


def test_s3_data_uri_gets_a_trailing_slash_and_s3_settings():
    settings = s3_lake()
    assert settings.data_uri == "s3://bucket/prefix/"
    assert settings.s3 == S3Settings(
        endpoint="127.0.0.1:9000", key_id="AKIDEXAMPLE", secret=SECRET_KEY, url_style="path", use_ssl=False
    )


def test_s3_trailing_slash_is_not_doubled():
    assert lake("sqlite:///tmp/c.sqlite", "s3://bucket/prefix/", **S3_ENV).data_uri == "s3://bucket/prefix/"


def test_s3_without_endpoint_uses_vhost_style_and_ssl():
    settings = lake("sqlite:///tmp/c.sqlite", "s3://bucket", AWS_REGION="eu-west-1")
    assert settings.s3 is not None
    assert (settings.s3.endpoint, settings.s3.url_style, settings.s3.use_ssl) == (None, "vhost", True)
    assert settings.s3.region == "eu-west-1"


def test_s3_url_style_can_be_chosen():
    settings = s3_lake(**{LAKE_S3_URL_STYLE_ENV: "VHOST"})
    assert settings.s3 is not None
    assert settings.s3.url_style == "vhost"


def test_bogus_s3_url_style_is_refused():
    with pytest.raises(BadSettings, match=f"{LAKE_S3_URL_STYLE_ENV}='bogus': Input should be 'path' or 'vhost'"):
        s3_lake(**{LAKE_S3_URL_STYLE_ENV: "bogus"})


def test_s3_uri_without_bucket_is_refused():
    with pytest.raises(LakeConfigError, match="names no bucket"):
        lake("sqlite:///tmp/c.sqlite", "s3://", **S3_ENV)


def test_local_data_path_is_absolute_with_trailing_slash(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.chdir(tmp_path)
    settings = lake("sqlite:///tmp/c.sqlite", "data")
    assert settings.data_uri == str(tmp_path.resolve() / "data") + "/"
    assert settings.s3 is None


@pytest.mark.parametrize("catalog", ["~/lake/catalog.ducklake", "duckdb://~/lake/catalog.ducklake",
                                     "sqlite://~/lake/catalog.sqlite"])
def test_a_path_under_the_home_directory_is_expanded(catalog: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """``~`` as the data directory's setting takes it: not a folder named ``~`` in whatever directory a process
    starts in (the Dagster daemon's and a command's would then be two lakes)."""
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.chdir("/")
    settings = lake(catalog, "~/lake/data")
    assert settings.data_uri == f"{tmp_path}/lake/data/"
    assert settings.target == str(tmp_path / "lake" / catalog.rsplit("/", 1)[1])


def test_repr_shows_neither_s3_secret_nor_catalog_password():
    settings = lake("postgresql://user:catpw123@host:5432/db", "s3://bucket/p", AWS_SESSION_TOKEN="tok-456", **S3_ENV)
    assert settings.s3 is not None
    for text in (repr(settings), repr(settings.s3)):
        assert SECRET_KEY not in text
        assert "catpw123" not in text
        assert "tok-456" not in text


def test_secret_sql_is_none_for_local_data():
    assert secret_sql(lake("sqlite:///tmp/c.sqlite", "/tmp/data")) is None


def test_secret_sql_for_s3():
    sql = secret_sql(s3_lake())
    assert sql is not None
    assert "KEY_ID 'AKIDEXAMPLE'" in sql
    assert "ENDPOINT '127.0.0.1:9000'" in sql
    assert "URL_STYLE 'path'" in sql
    assert "USE_SSL false" in sql


def test_attach_sql_read_only_at_a_snapshot():
    sql = attach_sql(lake("sqlite:///abs/c.sqlite", "/abs/data"), read_only=True, snapshot=5)
    assert "'ducklake:sqlite:/abs/c.sqlite'" in sql
    assert "DATA_PATH '/abs/data/'" in sql
    assert "READ_ONLY" in sql
    assert "SNAPSHOT_VERSION 5" in sql


def test_attach_sql_for_writing_has_no_read_only_or_snapshot():
    sql = attach_sql(lake("sqlite:///abs/c.sqlite", "/abs/data"))
    assert "READ_ONLY" not in sql
    assert "SNAPSHOT_VERSION" not in sql


def test_ducklake_extension_ships_with_its_package():
    assert extension_path("ducklake").is_file()


def test_sqlite_catalog_lake_written_then_read_by_a_read_only_connection(tmp_path: Path):
    settings = lake(f"sqlite:///{tmp_path}/catalog.sqlite", str(tmp_path / "data"))
    writer = connect_lake(settings, tmp_path / "scratch", "256MB")
    try:
        writer.execute("CREATE TABLE t (i INT)")
        writer.execute("INSERT INTO t VALUES (42)")
    finally:
        writer.close()
    reader = connect_lake(settings, tmp_path / "scratch", "256MB", read_only=True)
    try:
        assert reader.execute("SELECT i FROM t").fetchall() == [(42,)]
    finally:
        reader.close()


def test_an_extension_file_is_checked_once_a_process_and_again_once_it_changed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first connection has DuckDB check the signatures of the extension files it loads; the process's next
    connections load those same files without the check; a file changed since (its modification time) is checked
    again, and a copy whose bytes were altered is refused by that check."""
    copies = {}
    for name in ("ducklake", "sqlite_scanner"):
        copies[name] = tmp_path / "extensions" / name / f"{name}.duckdb_extension"
        copies[name].parent.mkdir(parents=True)
        shutil.copyfile(extension_path(name), copies[name])
    monkeypatch.setattr(connect, "extension_path", copies.__getitem__)
    monkeypatch.setattr(connect, "_CHECKED", {})
    settings = lake(f"sqlite:///{tmp_path}/catalog.sqlite", str(tmp_path / "data"))

    def unchecked() -> bool:
        """Whether a new connection loaded the extensions without checking them; it works either way."""
        con = connect_lake(settings, tmp_path / "scratch", "256MB")
        try:
            con.execute("CREATE TABLE IF NOT EXISTS t AS SELECT 42 AS i")
            assert con.execute("SELECT i FROM t").fetchall() == [(42,)]
            return bool(con.execute("SELECT current_setting('allow_unsigned_extensions')").fetchone()[0])
        finally:
            con.close()

    assert [unchecked() for _ in range(3)] == [False, True, True]
    later = copies["ducklake"].stat().st_mtime_ns + 10**9
    os.utime(copies["ducklake"], ns=(later, later))
    assert [unchecked(), unchecked()] == [False, True]
    altered = bytearray(copies["sqlite_scanner"].read_bytes())
    altered[len(altered) // 2] ^= 0xFF
    replacement = copies["sqlite_scanner"].with_suffix(".new")  # a new file: the loaded one stays mapped as it was
    replacement.write_bytes(bytes(altered))
    replacement.replace(copies["sqlite_scanner"])
    with pytest.raises(LakeUnavailable, match="cannot open the"):
        connect_lake(settings, tmp_path / "scratch", "256MB")


def test_unreachable_catalog_raises_lake_unavailable_without_the_password(tmp_path: Path):
    settings = lake("postgresql://nobody:topsecret@127.0.0.1:1/x", str(tmp_path / "data"))
    with pytest.raises(LakeUnavailable) as raised:
        connect_lake(settings, tmp_path / "scratch", "256MB")
    assert "topsecret" not in str(raised.value)
    assert "127.0.0.1" in str(raised.value)


def test_unreachable_catalog_hides_a_password_with_a_question_mark(tmp_path: Path):
    settings = lake("postgresql://nobody:top?secret@127.0.0.1:1/x", str(tmp_path / "data"))
    with pytest.raises(LakeUnavailable) as raised:
        connect_lake(settings, tmp_path / "scratch", "256MB")
    assert "top?secret" not in str(raised.value)


def test_a_catalog_gone_mid_run_is_named_without_its_password(tmp_path: Path):
    """The PostgreSQL extension repeats the catalog's connection string in the error of every statement while the
    catalog is unreachable (after the ATTACH succeeded): the password must not be in it."""
    try:
        with running_postgres("gone") as server:
            settings = lake(f"postgresql://{server.user}:top%3Fsecret@127.0.0.1:{server.port}/{server.database}",
                            str(tmp_path / "data"))
            con = connect_lake(settings, tmp_path / "scratch", "256MB")
            con.execute("CREATE TABLE t (a INTEGER)")
    except PostgresUnavailable as exc:
        pytest.skip(str(exc))
    with con, pytest.raises(duckdb.Error) as raised:
        con.execute("SELECT * FROM t").fetchall()
    assert "top" not in str(raised.value) and "secret" not in str(raised.value)
    assert str(server.port) in str(raised.value)  # still says which catalog


def test_the_backfill_boundaries_changed_after_a_partition_was_killed():
    """Partition ``100-`` of the first plan killed half-way, then the boundaries rebalanced (``100-249``, ``250-``)
    and every partition of the new plan completed: the incremental sync takes over (no run could run ``100-`` any
    more: it is no partition of the plan); a gap no completed partition holds still refuses it."""
    old, new = id_ranges_between([100]), id_ranges_between([100, 250])
    low, high = ShipmentKey("2026-11-01", "03:00:00", 7), ShipmentKey("2026-11-02", "03:00:00", 9)
    cursors = {"shipments@0-99": completed_cursor(high, old), "shipments@100-": low.to_json(),
               "shipments@100-249": completed_cursor(high, new), "shipments@250-": completed_cursor(low, new)}
    assert takeover_cursor(cursors) == low
    del cursors["shipments@250-"]
    with pytest.raises(BackfillIncomplete, match=r"partitions 100-, 250- have not"):
        takeover_cursor(cursors)


@pytest.mark.parametrize(("catalog", "data", "extra"), [
    ("sqlite:///tmp/catalog.sqlite", "/tmp/lake-data", {}),
    ("duckdb:///tmp/catalog.duckdb", "/tmp/lake-data", {}),
    ("postgresql://etl:pw%40x@db.example:5432/lake?sslmode=require", "/tmp/lake-data", {}),
    ("sqlite:///tmp/catalog.sqlite", "s3://bucket/prefix", {**S3_ENV, LAKE_S3_URL_STYLE_ENV: "vhost"}),
])
def test_the_variables_handed_to_the_dbt_process_name_the_same_lake(
    catalog: str, data: str, extra: dict[str, str]
) -> None:
    """A lake named by a Dagster resource's fields is in no variable: the dbt process of the ``lake`` target is handed
    the ones that name it (``LakeSettings.dbt_environment``), and reads the same lake from them."""
    named = lake(catalog, data, **extra)
    assert LakeSettings.configured({**named.dbt_environment(), **{k: v for k, v in extra.items()
                                                                    if k.startswith("AWS_")}}) == named
