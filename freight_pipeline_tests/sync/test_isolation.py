"""The breaker between one record's fault and the service's: which error ends a stream, and when."""

from __future__ import annotations

import pytest

from freight_pipeline.client.errors import ProtocolError, ServerError
from freight_pipeline.sync.isolation import Breaker, CircuitOpen, RecordFailure, StreamUnreachable, record_failure


def failures(count: int, status: int | None) -> list[RecordFailure]:
    return [RecordFailure("refused", f"POST /service/efile/lookup#{i}", status) for i in range(count)]


@pytest.mark.parametrize("status", [403, 404])
def test_a_stream_refused_on_every_record_is_unreachable_and_names_its_switch(status: int) -> None:
    breaker = Breaker("documents", 0.05, 10, switch="FREIGHT_SYNC_DOCUMENTS")
    breaker.count(6, 6, failures(6, status))  # below min_failures: nothing yet
    with pytest.raises(StreamUnreachable, match=rf"\({status} on every call, e.g. POST /service/efile/lookup#0\)"
                       r".*FREIGHT_SYNC_DOCUMENTS=0") as raised:
        breaker.count(6, 6, failures(6, status))
    assert raised.value.stream == "documents" and raised.value.status == status


def test_a_stream_that_reached_its_endpoints_once_opens_the_circuit_instead() -> None:
    breaker = Breaker("documents", 0.05, 10, switch="FREIGHT_SYNC_DOCUMENTS")
    breaker.count(5, 0)  # read fine: the account can reach the stream
    with pytest.raises(CircuitOpen, match="documents: 12 of 17 records failed"):
        breaker.count(12, 12, failures(12, 403))


def test_other_failures_open_the_circuit_as_before() -> None:
    breaker = Breaker("shipments", 0.05, 10)
    with pytest.raises(CircuitOpen, match="shipments: 12 of 12 records failed"):
        breaker.count(12, 12, failures(12, 500))


@pytest.mark.parametrize("failed", [
    ServerError("POST /auth/token failed with HTTP 500", status_code=500, method="POST", path="/auth/token"),
    ProtocolError("POST /auth/token answered no token", status_code=200, method="POST", path="/auth/token"),
])
def test_a_login_that_failed_within_a_records_call_is_no_fault_of_the_record(failed: Exception) -> None:
    """The token is renewed inside whichever call found it expired: a login the service failed (after the retry
    policy's attempts) fails the stream, loudly, instead of quarantining the shipment whose call renewed it."""
    assert record_failure(failed) is None
    same_on_a_record = ServerError("POST /service/shipment/lookup failed with HTTP 500", status_code=500,
                                   method="POST", path="/service/shipment/lookup")
    assert isinstance(record_failure(same_on_a_record), RecordFailure)


def test_a_stopped_run_names_the_commonest_reason_its_records_failed_for_and_a_request() -> None:
    """Its line said how many failed and nothing of why (E-File roles sent as one object: 26 of 30 failed, the
    quarantine not written, `sync -v` silent): the commonest reason of the run's failures, its first request."""
    breaker = Breaker("documents", 0.05, 10)
    breaker.count(4, 2, [RecordFailure("roles: not a list\nsent: {...}", "GET /service/efile/1/role"),
                         RecordFailure("HTTP 500", "GET /service/efile/9/reference", 500)])
    with pytest.raises(CircuitOpen) as raised:  # reasons alike but for a record's numbers are one
        breaker.count(11, 11, [RecordFailure(f"roles of E-File {n}: not a list", f"GET /service/efile/{n}/role")
                               for n in range(2, 12)] + [RecordFailure("HTTP 500", "GET /service/efile/9/role", 500)])
    assert str(raised.value).endswith(
        "; the commonest failure (10 of 13): roles of E-File 2: not a list (GET /service/efile/2/role)"), raised.value
