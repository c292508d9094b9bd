"""The local S3 server of the demo and the tests (``lake.local.running_s3``): in a thread of this process or
in a process of its own, it serves what an S3 client of the lake asks (a bucket, a put, a ranged get, a
listing), and nothing listens on its port once its block ends."""

from __future__ import annotations

import logging
import signal
import socket

import boto3
import pytest

from freight_pipeline.lake import local
from freight_pipeline.lake.local import LOCAL_S3_KEY, LOCAL_S3_SECRET, running_s3


@pytest.mark.parametrize("own_process", [False, True])
def test_the_local_s3_server_serves_objects_and_stops(own_process: bool) -> None:
    with running_s3("a-bucket", own_process=own_process) as s3:
        client = boto3.client("s3", endpoint_url=s3.endpoint, aws_access_key_id=LOCAL_S3_KEY,
                              aws_secret_access_key=LOCAL_S3_SECRET, region_name="us-east-1")
        client.put_object(Bucket="a-bucket", Key="lake/main/part-1.parquet", Body=b"0123456789")
        part = client.get_object(Bucket="a-bucket", Key="lake/main/part-1.parquet", Range="bytes=2-5")
        assert part["Body"].read() == b"2345"
        assert s3.keys("lake/") == ["lake/main/part-1.parquet"]
        assert s3.keys("other/") == []
        port = int(s3.endpoint.rsplit(":", 1)[1])
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", port), timeout=1).close()


def test_a_server_process_that_outlives_its_sigterm_is_killed(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(local, "S3_STOP_GRACE_S", 0.5)
    previous = signal.signal(signal.SIGTERM, signal.SIG_IGN)  # what the child inherits: SIGTERM ignored
    try:
        with caplog.at_level(logging.WARNING, logger=local.__name__), running_s3("a-bucket", own_process=True) as s3:
            port = int(s3.endpoint.rsplit(":", 1)[1])
    finally:
        signal.signal(signal.SIGTERM, previous)
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
    assert "outlived its SIGTERM by 0.5 s: killed" in caplog.text
