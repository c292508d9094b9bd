"""Lake mode's configuration: where the DuckLake catalog and its Parquet data live, parsed from the settings
(``config.LakeConfig``) and, for S3, the usual AWS variables.

Unset ``lake_catalog_uri``: no lake, the embedded DuckDB warehouse (the default).
Secrets (the catalog's password, the S3 secret key) never appear in ``repr``, messages or logs:
:meth:`LakeSettings.describe` is what may be shown.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import unquote, urlsplit

from freight_pipeline.config import LAKE_CATALOG_URI_ENV, LAKE_DATA_URI_ENV, LakeConfig, variable, without_password

S3_ENDPOINT_ENVS = ("AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL")
S3_KEY_ENV = "AWS_ACCESS_KEY_ID"
S3_SECRET_ENV = "AWS_SECRET_ACCESS_KEY"
S3_SESSION_TOKEN_ENV = "AWS_SESSION_TOKEN"
S3_REGION_ENVS = ("AWS_REGION", "AWS_DEFAULT_REGION")
LAKE_ALIAS = "lake"
"""The name the lake is attached under in every DuckDB connection (the dbt ``lake`` target uses it too)."""
LAKE_METADATA = f"__ducklake_metadata_{LAKE_ALIAS}"
"""The lake's catalog database as DuckLake attaches it beside the lake (its own tables: snapshots, statistics)."""

_CATALOG_KINDS = {"postgresql": "postgres", "postgres": "postgres", "sqlite": "sqlite", "duckdb": "duckdb"}


LAKE_DBT_TARGET = "lake"
"""The dbt profile's target that builds the marts in the lake (``dbt_models/profiles.yml``)."""


class LakeConfigError(ValueError):
    """A lake variable that cannot be used; the message names the variable."""


@dataclass(frozen=True)
class S3Settings:
    """The S3 connection of the lake's data path (the usual AWS variables)."""

    endpoint: str | None = None
    key_id: str | None = None
    secret: str | None = field(default=None, repr=False)
    session_token: str | None = field(default=None, repr=False)
    region: str = "us-east-1"
    url_style: str = "vhost"
    use_ssl: bool = True


@dataclass(frozen=True)
class LakeSettings:
    """A DuckLake: catalog database ``kind`` (postgres, sqlite, duckdb) at ``target``, data under ``data_uri``."""

    kind: str
    target: str = field(repr=False)
    data_uri: str
    s3: S3Settings | None = None

    @classmethod
    def configured(cls, environ: Mapping[str, str] | None = None) -> LakeSettings | None:
        """The lake the settings name (None: none), with the S3 connection of ``environ`` (default: this
        process's environment); LakeConfigError naming the setting when it cannot be used."""
        env = os.environ if environ is None else environ
        return cls.of(LakeConfig.configured(env), env)

    @classmethod
    def of(cls, config: LakeConfig, environ: Mapping[str, str]) -> LakeSettings | None:
        catalog = (config.lake_catalog_uri or "").strip()
        data = (config.lake_data_uri or "").strip()
        if not catalog and not data:
            return None
        if not catalog or not data:
            missing = LAKE_CATALOG_URI_ENV if not catalog else LAKE_DATA_URI_ENV
            raise LakeConfigError(
                f"lake mode needs both {LAKE_CATALOG_URI_ENV} and {LAKE_DATA_URI_ENV}; {missing} is not set")
        kind, target = _parse_catalog(catalog)
        data_uri = _data_uri(data)
        s3 = _s3_of(config, environ) if data_uri.startswith("s3://") else None
        return cls(kind, target, data_uri, s3)

    @property
    def attach_target(self) -> str:
        """What follows ``ducklake:`` in ``ATTACH``: never the catalog's password (:attr:`catalog_password`), which
        the PostgreSQL extension would repeat in the error of every statement while the catalog is unreachable."""
        if self.kind == "duckdb":
            return self.target
        return f"{self.kind}:{_libpq_parts(self.target)[0] if self.kind == 'postgres' else self.target}"

    @property
    def catalog_password(self) -> str | None:
        """The PostgreSQL catalog's password (of the URI's user part or its ``password`` parameter), given to the
        extension in a secret (``connect.catalog_secret_sql``): never log it."""
        return _libpq_parts(self.target)[1] if self.kind == "postgres" else None

    def dbt_environment(self) -> dict[str, str]:
        """The variables that name this lake to the dbt process of the ``lake`` target (its plugin reads them:
        ``lake.dbt_plugin``), whatever named it here: a Dagster resource's fields, the settings file, the
        environment. Secrets included (the catalog's password): for a child's environment only, never a message."""
        catalog = self.target if self.kind == "postgres" else f"{self.kind}://{self.target}"
        env = {LAKE_CATALOG_URI_ENV: catalog, LAKE_DATA_URI_ENV: self.data_uri}
        if self.s3 is not None:
            env[variable("lake_s3_url_style")] = self.s3.url_style
        return env

    def describe(self) -> str:
        """Catalog and data location for messages, without any password."""
        return f"DuckLake catalog {self.kind}:{without_password(self.target)}, data {self.data_uri}"

    @property
    def multi_writer(self) -> bool:
        """Several processes may write at once (a DuckDB catalog file has one writer)."""
        return self.kind != "duckdb"


def _parse_catalog(uri: str) -> tuple[str, str]:
    scheme, _, rest = uri.partition(":")
    kind = _CATALOG_KINDS.get(scheme.lower()) if rest else None
    if kind is None:
        if "://" in uri or re.match(r"^[A-Za-z][A-Za-z0-9+.-]*:[^\\/]", uri):
            raise LakeConfigError(
                f"{LAKE_CATALOG_URI_ENV} must start with postgresql://, sqlite:/// or duckdb:///, "
                f"got {without_password(uri)!r}"
            )
        return "duckdb", str(Path(uri).expanduser().resolve())
    if kind == "postgres":
        if not rest.startswith("//"):
            raise LakeConfigError(f"{LAKE_CATALOG_URI_ENV} must be postgresql://user@host:port/dbname")
        return kind, "postgresql:" + rest
    path = rest[2:] if rest.startswith("//") else rest
    if not path:
        raise LakeConfigError(f"{LAKE_CATALOG_URI_ENV} names no {kind} catalog file")
    return kind, str(Path(path).expanduser().resolve())


_LIBPQ_URI = re.compile(r"^postgres(?:ql)?://(?:(?P<user>[^@/]*)@)?(?P<hosts>[^/?]*)(?:/(?P<dbname>[^?]*))?"
                        r"(?:\?(?P<query>.*))?$", re.DOTALL)


def _libpq_parts(target: str) -> tuple[str, str | None]:
    """A PostgreSQL catalog's connection string without its password, and the password (None: none).

    A ``postgresql://`` URI with a password becomes libpq's ``key=value`` form, which is what the extension adds a
    secret's password to (a URI cannot take it); anything else is returned as it is, with no password."""
    match = _LIBPQ_URI.match(target)
    if match is None:
        return target, None
    options: dict[str, str] = {}
    password: str | None = None
    user, _, secret = (match["user"] or "").partition(":")
    if user:
        options["user"] = unquote(user)
    if secret:
        password = unquote(secret)
    hosts: list[str] = []
    ports: list[str] = []
    for spec in match["hosts"].split(",") if match["hosts"] else ():
        host, _, port = spec[1:].partition("]") if spec.startswith("[") else spec.partition(":")  # [IPv6]:port
        hosts.append(unquote(host))
        ports.append(unquote(port.removeprefix(":")))
    if any(hosts):
        options["host"] = ",".join(hosts)
    if any(ports):
        options["port"] = ",".join(ports)
    if match["dbname"]:
        options["dbname"] = unquote(match["dbname"])
    for parameter in (match["query"] or "").split("&"):
        key, _, value = parameter.partition("=")
        key, value = unquote(key), unquote(value)
        if key == "password":
            password = value or password
        elif key == "ssl" and value == "true":  # libpq's URI-only alias
            options["sslmode"] = "require"
        elif key:
            options[key] = value
    if password is None:
        return target, None
    return " ".join(f"{key}={_libpq_quoted(value)}" for key, value in options.items()), password


def _libpq_quoted(value: str) -> str:
    escaped = value.replace("\\", "\\\\").replace("'", "\\'")
    return f"'{escaped}'"


def _data_uri(data: str) -> str:
    if data.startswith("s3://"):
        bucket = data[5:].split("/", 1)[0]
        if not bucket:
            raise LakeConfigError(f"{LAKE_DATA_URI_ENV} {data!r} names no bucket")
        return data.rstrip("/") + "/"
    if "://" in data:
        raise LakeConfigError(f"{LAKE_DATA_URI_ENV} must be a local path or s3://bucket/prefix, got {data!r}")
    return str(Path(data).expanduser().resolve()) + "/"  # ~ as the data directory's


def _first(env: Mapping[str, str], names: tuple[str, ...]) -> str | None:
    return next((env[name].strip() for name in names if env.get(name, "").strip()), None)


def _s3_of(config: LakeConfig, env: Mapping[str, str]) -> S3Settings:
    endpoint = _first(env, S3_ENDPOINT_ENVS)
    use_ssl = True
    if endpoint:
        parts = urlsplit(endpoint if "://" in endpoint else f"https://{endpoint}")
        use_ssl = parts.scheme != "http"
        endpoint = parts.netloc
    style = config.lake_s3_url_style or ("path" if endpoint else "vhost")
    return S3Settings(
        endpoint=endpoint,
        key_id=env.get(S3_KEY_ENV) or None,
        secret=env.get(S3_SECRET_ENV) or None,
        session_token=env.get(S3_SESSION_TOKEN_ENV) or None,
        region=_first(env, S3_REGION_ENVS) or "us-east-1",
        url_style=style,
        use_ssl=use_ssl,
    )


def dbt_target_from_env() -> str | None:
    """The dbt target of the storage the configuration names (``lake.backend.storage_from_env``'s
    choice, known without building it: a dbt worker starts before the storage's modules are imported):
    ``lake`` when the settings name a lake, else None (the profile's default)."""
    return None if LakeSettings.configured() is None else LAKE_DBT_TARGET
