"""The content hash a shipment is kept with (``assemble.content_hash``) stays what warehouses hold: each detail
answer's JSON is written once (for its raw part too), and the hash of the pieces put together is the hash of the
canonical JSON of every part, as it was computed before; a part only the fallback can write has no hash."""

from __future__ import annotations

import datetime as dt
import hashlib
import random
from typing import Any

import orjson
import pytest

from freight_pipeline.datetimes import ServiceZone
from freight_pipeline.sync.assemble import assemble, content_hash
from freight_pipeline.sync.bundle import GONE, NOT_APPLICABLE, Bundle, Work
from freight_pipeline.sync.cursor import BEGINNING, is_shipment
from freight_pipeline.sync.parts import ALL_PARTS, DETAIL_PARTS, DOCUMENT, Ref
from freight_pipeline_tests.normalize import samples


def _held_hash(answers: dict[str, Any], document_text: str) -> str:
    """The hash as every warehouse holds it: of the canonical JSON of ``[[stream, answer or "n/a"], ...]``."""
    details = [[s, "n/a" if answers[s] is NOT_APPLICABLE else answers[s]] for s in sorted(answers) if s != DOCUMENT]
    content = orjson.dumps(details, option=orjson.OPT_SORT_KEYS)
    return hashlib.blake2b(document_text.encode() + b"\0" + content, digest_size=16).hexdigest()


def _value(rng: random.Random, depth: int = 0) -> Any:
    roll = rng.random()
    if depth > 3 or roll < 0.3:
        return rng.choice([1, 2.5, -3e10, "é☃ \"quoted\"", "", None, True, False])
    if roll < 0.6:
        return [_value(rng, depth + 1) for _ in range(rng.randint(0, 3))]
    return {rng.choice("zaqbk") + str(i): _value(rng, depth + 1) for i in range(rng.randint(0, 4))}


def _bundle(answers: dict[str, Any]) -> Bundle:
    return Bundle(Work(Ref(1), ALL_PARTS, BEGINNING), Ref(1), answers)


def test_the_content_hash_is_the_one_warehouses_hold_for_every_part_and_kind_of_answer() -> None:
    rng = random.Random(56)
    for _ in range(200):
        answers: dict[str, Any] = {DOCUMENT: {"id": 1}}
        for part in DETAIL_PARTS:
            answers[part.stream] = NOT_APPLICABLE if rng.random() < 0.2 else [_value(rng) for _ in range(3)]
        assert content_hash(_bundle(answers), '{"id":1}') == _held_hash(answers, '{"id":1}')


def test_a_part_only_the_fallback_can_write_or_that_failed_leaves_no_hash() -> None:
    answers: dict[str, Any] = {DOCUMENT: {"id": 1}, **{part.stream: [] for part in DETAIL_PARTS}}
    assert content_hash(_bundle(answers), "{}") is not None
    for part in DETAIL_PARTS:
        for answer in ([{"note": "\ud800"}], [2**70], GONE):  # a lone surrogate, an integer beyond 64 bits
            assert content_hash(_bundle({**answers, part.stream: answer}), "{}") is None, (part.stream, answer)


def test_a_document_whose_id_comes_as_text_is_the_shipment_asked_for_as_its_column_reads_it() -> None:
    """A service that sends ids as text (``"id": "1"``): the column read 1, but the check that the document is the
    one asked for compared the text with the number, and quarantined every shipment (the breaker then stopped)."""
    document = {**samples.shipment(1), "id": "1"}
    answers: dict[str, Any] = {DOCUMENT: document, **{part.stream: NOT_APPLICABLE for part in DETAIL_PARTS}}
    done = assemble([_bundle(answers)], dt.datetime(2026, 11, 3, tzinfo=dt.UTC), None, ServiceZone())
    assert done.write.quarantined == [] and done.failed_new == 0
    assert done.write.tables["shipments"].column("shipment_id").to_pylist() == [1]


@pytest.mark.parametrize(("item", "shipment"), [({"id": 7}, True), ({"id": "7"}, True), ({"id": 7.0}, True),
                                                 ({"id": "S-7"}, False), ({"id": 8}, False), ({}, False), (7, False)])
def test_a_lookup_row_is_a_shipment_s_by_its_id_as_the_column_reads_it(item: Any, shipment: bool) -> None:
    assert is_shipment(item, 7) is shipment
