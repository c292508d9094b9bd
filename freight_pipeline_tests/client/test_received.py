"""A reply's JSON pickles as the body received (``_core.received``, ``_core.HeldBody``): what the sync hands
its normalizing worker is the bytes, decoded there into the same values (a held body when it is read), for every
reply the shipments stream reads, by both clients."""

from __future__ import annotations

import math
import pickle
from typing import Any

from freight_pipeline.client import endpoints as ep
from freight_pipeline.client._core import HeldBody, ReceivedArray, ReceivedObject, decoded, loads, received
from freight_pipeline.client.endpoints import Endpoint
from freight_pipeline.sync.parts import DETAIL_PARTS, by_id
from freight_pipeline_tests.client.test_simulator_http import live_ids

PER_SHIPMENT: tuple[Endpoint, ...] = tuple(part.endpoint for part in DETAIL_PARTS if part.fetch is by_id)


def _travels_as_its_body(data: Any) -> None:
    assert isinstance(data, ReceivedObject | ReceivedArray)
    pickled = pickle.dumps(data)
    assert len(pickled) < len(data.body) + 100  # the bytes, not a walk of the values
    copy = pickle.loads(pickled)
    assert type(copy) in (dict, list) and copy == data == loads(data.body)


def test_every_reply_the_shipments_stream_reads_pickles_as_its_body(any_client: Any, fresh_sim: Any) -> None:
    assert set(PER_SHIPMENT) >= {ep.SHIPMENT_EVENTS, ep.SHIPMENT_AIR_MAIN_CARRIAGE, ep.SHIPMENT_SEA_MAIN_CARRIAGE}
    for shipment_id in live_ids(fresh_sim)[:5]:
        _travels_as_its_body(any_client.get_shipment_raw(shipment_id))
        for endpoint in PER_SHIPMENT:
            _travels_as_its_body(any_client.get_records_raw(endpoint, shipment_id))


def test_a_body_only_the_standard_library_reads_comes_back_the_same_and_other_values_stay_as_they_are() -> None:
    body = b'{"weight": NaN, "goods": [{"subgoods": [{"n": 1}]}]}'
    copy = pickle.loads(pickle.dumps(received(loads(body), body)))
    assert math.isnan(copy["weight"]) and copy["goods"] == [{"subgoods": [{"n": 1}]}]
    assert received(7, b"7") == 7 and received(None, b"null") is None


def test_a_held_body_is_the_bytes_with_the_top_level_values_and_comes_back_as_the_json() -> None:
    body = b'{"id": 3, "weight": NaN, "client": "C1", "mode": null, "goods": [{"n": 1}], "employees": {"a": "b"}}'
    held = HeldBody.of(received(loads(body), body))
    assert not isinstance(held, dict | list) and held.body is body
    assert held.top.keys() == {"id", "weight", "client", "mode"} and held.top["client"] == "C1"
    pickled = pickle.dumps(held)
    assert len(pickled) < len(body) + 200  # the bytes and the top-level values, not a walk of the JSON
    travelled = pickle.loads(pickled)  # a worker gets it held as well, and decodes it when it reads it
    assert type(travelled) is HeldBody and travelled.body == body and travelled.top.keys() == held.top.keys()
    for copy in (travelled.decoded(), held.decoded(), decoded(held), decoded(travelled)):
        assert math.isnan(copy["weight"]) and copy["goods"] == [{"n": 1}] and copy["employees"] == {"a": "b"}
    array = HeldBody.of(received(loads(b'[{"n": 1}]'), b'[{"n": 1}]'))
    assert array.top == {} and decoded(pickle.loads(pickle.dumps(array))) == [{"n": 1}] == decoded(array)
    plain = {"decoded": True}
    assert HeldBody.of(plain) is plain and HeldBody.of(7) == 7 and decoded(plain) is plain
