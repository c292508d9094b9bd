"""Local stand-ins of the lake's services, for the demo and the tests: an S3-compatible server (moto's S3,
of the ``lake`` extra) and a throwaway PostgreSQL server (Debian's ``postgresql`` package), each on a free
loopback port, each stopped when its block ends. Nothing is written outside the given folder.
"""

from __future__ import annotations

import logging
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from freight_pipeline.config import LAKE_CATALOG_URI_ENV, LAKE_DATA_URI_ENV
from freight_pipeline.lake.settings import S3_ENDPOINT_ENVS, S3_KEY_ENV, S3_REGION_ENVS, S3_SECRET_ENV

if TYPE_CHECKING:
    from werkzeug.serving import BaseWSGIServer

log = logging.getLogger(__name__)

S3_STOP_GRACE_S = 10.0
"""How long the local S3 server of its own process has to end after SIGTERM before it is killed (in one CI
on a loaded machine it still served 30 s after it). ``commands.processes.stop_child`` does the same for the
commands' children, a layer this package may not import (``test_import_graph.py``)."""

POSTGRES_BIN_DIRS = ("/usr/lib/postgresql/17/bin", "/usr/lib/postgresql/16/bin", "/usr/lib/postgresql/15/bin")
LOCAL_S3_KEY = "freight-local"
LOCAL_S3_SECRET = "freight-local-secret"  # a local test server's, not a real credential


class PostgresUnavailable(RuntimeError):
    """No PostgreSQL server binaries here (install Debian's ``postgresql`` package)."""


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@dataclass(frozen=True)
class LocalS3:
    endpoint: str
    bucket: str

    def env(self, prefix: str = "lake") -> dict[str, str]:
        """The S3 variables of this server, and the lake's data URI under ``prefix``."""
        return {
            LAKE_DATA_URI_ENV: f"s3://{self.bucket}/{prefix}",
            S3_ENDPOINT_ENVS[0]: self.endpoint,
            S3_KEY_ENV: LOCAL_S3_KEY,
            S3_SECRET_ENV: LOCAL_S3_SECRET,
            S3_REGION_ENVS[0]: "us-east-1",
        }

    def keys(self, prefix: str = "") -> list[str]:
        """Every object key under ``prefix`` (boto3, which moto brings)."""
        import boto3

        client = boto3.client("s3", endpoint_url=self.endpoint, aws_access_key_id=LOCAL_S3_KEY,
                              aws_secret_access_key=LOCAL_S3_SECRET, region_name="us-east-1")
        found: list[str] = []
        for page in client.get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix=prefix):
            found.extend(item["Key"] for item in page.get("Contents", []))
        return found


@contextmanager
def running_s3(bucket: str = "freight-lake", *, own_process: bool = False) -> Iterator[LocalS3]:
    """moto's S3 server on a free loopback port with ``bucket`` created; stopped afterwards. In a
    thread of this process, or (``own_process``: benchmarks) a process of its own, off this GIL."""
    import boto3

    port = free_port()
    endpoint = f"http://127.0.0.1:{port}"
    with _s3_process(port) if own_process else _s3_thread(port):
        boto3.client("s3", endpoint_url=endpoint, aws_access_key_id=LOCAL_S3_KEY,
                     aws_secret_access_key=LOCAL_S3_SECRET, region_name="us-east-1").create_bucket(Bucket=bucket)
        yield LocalS3(endpoint, bucket)


def s3_only_server(port: int) -> BaseWSGIServer:
    """moto's S3 application alone behind a threaded loopback server. moto's own server (``moto.server``,
    ``ThreadedMotoServer``) dispatches each request among its services under one lock, listing its
    package's folders every time: a third of the S3 server's CPU in a lake test."""
    from moto.moto_server.werkzeug_app import MotoRequestHandler, create_backend_app
    from werkzeug.serving import make_server

    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # one line per request otherwise
    return make_server("127.0.0.1", port, create_backend_app("s3"), threaded=True, request_handler=MotoRequestHandler)


@contextmanager
def _s3_thread(port: int) -> Iterator[None]:
    server = s3_only_server(port)
    thread = threading.Thread(target=server.serve_forever, name="local-s3", daemon=True)
    thread.start()
    try:
        yield
    finally:
        server.shutdown()
        thread.join()
        server.server_close()


@contextmanager
def _s3_process(port: int) -> Iterator[None]:
    proc = subprocess.Popen([sys.executable, "-m", __name__, str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("the local S3 server did not start") from None
                time.sleep(0.1)
        yield
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=S3_STOP_GRACE_S)
        except subprocess.TimeoutExpired:
            log.warning("the local S3 server (pid %d) outlived its SIGTERM by %g s: killed", proc.pid,
                        S3_STOP_GRACE_S)
            proc.kill()
            proc.wait(timeout=30)


def postgres_bin() -> Path | None:
    for folder in POSTGRES_BIN_DIRS:
        if (Path(folder) / "pg_ctl").exists():
            return Path(folder)
    found = shutil.which("pg_ctl")
    return Path(found).resolve().parent if found else None


@dataclass(frozen=True)
class LocalPostgres:
    port: int
    database: str
    user: str = "freight"

    @property
    def uri(self) -> str:
        return f"postgresql://{self.user}@127.0.0.1:{self.port}/{self.database}"

    def env(self) -> dict[str, str]:
        return {LAKE_CATALOG_URI_ENV: self.uri}

    def new_database(self, name: str) -> LocalPostgres:
        """Another, empty database on this server (a fresh catalog)."""
        bin_dir = postgres_bin()
        if bin_dir is None:
            raise PostgresUnavailable("no PostgreSQL client here: install Debian's postgresql package")
        subprocess.run([str(bin_dir / "createdb"), "-h", "127.0.0.1", "-p", str(self.port), "-U", self.user, name],
                       check=True, capture_output=True, timeout=60)
        return LocalPostgres(self.port, name, self.user)


@contextmanager
def running_postgres(database: str = "freight_lake") -> Iterator[LocalPostgres]:
    """A throwaway PostgreSQL cluster in a temporary folder on a free loopback port (trust auth, no
    fsync); stopped and removed afterwards. As root it runs as the ``postgres`` user (PostgreSQL
    refuses root)."""
    bin_dir = postgres_bin()
    if bin_dir is None:
        raise PostgresUnavailable("no PostgreSQL server here: install Debian's postgresql package")
    as_user = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
    folder = Path(tempfile.mkdtemp(prefix="freight-pg-"))
    folder.chmod(0o777)
    data = folder / "data"
    port = free_port()

    def tool(name: str, *args: str) -> None:
        subprocess.run([*as_user, str(bin_dir / name), *args], check=True, capture_output=True, timeout=120)

    started = False
    try:
        tool("initdb", "-D", str(data), "-U", "freight", "--auth=trust", "-E", "UTF8", "--no-sync")
        tool("pg_ctl", "-D", str(data), "-w", "-l", str(folder / "server.log"),
             "-o", f"-h 127.0.0.1 -p {port} -k {folder} -F -c max_connections=200", "start")
        started = True
        tool("createdb", "-h", "127.0.0.1", "-p", str(port), "-U", "freight", database)
        yield LocalPostgres(port, database)
    finally:
        if started:
            subprocess.run([*as_user, str(bin_dir / "pg_ctl"), "-D", str(data), "-m", "immediate", "stop"],
                           capture_output=True, timeout=60)
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":  # the S3 server of running_s3(own_process=True), until terminated
    s3_only_server(int(sys.argv[1])).serve_forever()
