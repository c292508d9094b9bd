"""SimulatorStore behaviour: bursts, change over time, events, memos, code conversions, E-Files."""

from __future__ import annotations

import base64
import datetime as dt
import threading
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest

from freight_pipeline.simulator.clock import SimClock
from freight_pipeline.simulator.config import MAX_SHIPMENTS
from freight_pipeline.simulator.data_goods import INT32_MAX, MAX_SHIPMENT_ID, item_id
from freight_pipeline.simulator.data_identity import derive_identity
from freight_pipeline.simulator.generator import build_document, new_state
from freight_pipeline.simulator.store import SimulatorStore
from freight_pipeline.simulator.store_api import Conflict, Invalid, NotFound, StoreAPI
from freight_pipeline.simulator.store_seed import bulk_import_size


@pytest.fixture
def store() -> SimulatorStore:
    return SimulatorStore(shipments=300, seed=11)


def seconds(store: SimulatorStore) -> Counter[tuple[str, str]]:
    return Counter((r["LAST_MODIFIED_DATE"], r["LAST_MODIFIED_TIME"]) for r in store.reader.shipment_key_rows())


def test_set_clock_moves_the_clock_forward_only(store: SimulatorStore) -> None:
    api: StoreAPI = store  # what the server holds
    start = api.clock.now()
    later = start + dt.timedelta(hours=1, seconds=15)
    assert api.clock.set_to(later) == later and api.clock.now() == later
    assert api.clock.set_to(later) == later  # the same instant again is no move back
    with pytest.raises(Invalid):
        api.clock.set_to(later - dt.timedelta(seconds=1))
    assert api.clock.now() == later


def test_the_parts_work_on_one_store(store: SimulatorStore) -> None:
    """What one part changes (clock, changes, events, E-Files) is what the others read and stamp."""
    api: StoreAPI = store  # what the server holds
    shipment_id = int(next(iter(api.reader.shipment_key_rows()))["ID"])
    now = api.clock.set_to(api.clock.now() + dt.timedelta(minutes=5))
    version = api.reader.version()
    api.changes.touch_shipments([shipment_id])
    assert api.reader.version() != version
    assert api.reader.get_base_shipment(shipment_id)["last_modified_date_time"] == now.isoformat()

    code = next(c for c in ("DIFF_BL_DATE", "VGM_CLOSING", "GATE_OUT")
                if (c, "ACTUAL") not in {(e["event"], e["type"]) for e in api.reader.get_events(shipment_id)})
    written = api.events.create(shipment_id, "ACTUAL", {"event": code})
    assert written in api.reader.get_events(shipment_id)
    assert api.reader.get_base_shipment(shipment_id)["last_modified_date_time"] == (
        now + dt.timedelta(seconds=1)).isoformat()  # after the touch's second, the clock standing still

    filed = api.efiles.store({"document": base64.b64encode(b"pod").decode(),
                              "references": [{"type": "SHIPMENT", "value": str(shipment_id)}]})
    assert filed["created_date_time"] == now.isoformat()  # stamped by the store's clock
    assert filed["id"] in {row["id"] for row in api.efiles.rows([shipment_id])}

    number = (api.reader.get_base_shipment(shipment_id)["client"],
              api.reader.get_base_shipment(shipment_id)["shipment_number"])
    assert store.changes.delete_shipment_ids([shipment_id]) == [shipment_id]
    with pytest.raises(NotFound):
        api.reader.get_shipment(shipment_id)
    with pytest.raises(NotFound):
        api.events.update(shipment_id, code, "ACTUAL", {})
    assert api.reader.memo_rows_of(*number) == []
    assert store.reader.deleted_shipment_ids() == [shipment_id]
    assert filed["id"] in {row["id"] for row in api.efiles.rows()}  # E-Files outlive their shipments
    assert api.webhooks.record({"event": "deleted", "id": shipment_id}) == 1
    assert store.webhooks.payloads() == [{"id": 1, "payload": {"event": "deleted", "id": shipment_id}}]


def test_every_part_waits_for_the_one_store_lock(store: SimulatorStore) -> None:
    """Each part's calls take the store's one lock: none runs while another caller holds it."""
    shipment_id = store.reader.live_shipment_ids()[0]
    code = next(c for c in ("DIFF_BL_DATE", "VGM_CLOSING", "GATE_OUT")
                if (c, "ACTUAL") not in {(e["event"], e["type"]) for e in store.reader.get_events(shipment_id)})
    calls: list[Callable[[], Any]] = [
        store.clock.now,
        store.reader.version,
        lambda: store.reader.get_shipment(shipment_id),
        lambda: store.events.create(shipment_id, "ACTUAL", {"event": code}),
        lambda: store.changes.touch_shipments([shipment_id]),
        store.efiles.count,
        lambda: store.webhooks.record({"n": 1}),
    ]
    for call in calls:
        done = threading.Event()
        thread = threading.Thread(target=lambda call=call, done=done: (call(), done.set()))
        with store.data.lock:
            thread.start()
            assert not done.wait(0.2), call  # still waiting for the lock
        thread.join(10)
        assert done.is_set(), call


def test_clock_starts_fixed_and_moves_forward(store: SimulatorStore) -> None:
    assert store.clock.now().isoformat() == "2026-11-01T08:00:00+01:00"
    assert store.clock.advance(0.6).isoformat() == "2026-11-01T08:00:00+01:00"
    assert store.clock.advance(0.6).isoformat() == "2026-11-01T08:00:01+01:00"
    with pytest.raises(Invalid):
        store.clock.advance(-1)
    assert all(r["LAST_MODIFIED_DATE"] + "T" + r["LAST_MODIFIED_TIME"] < "2026-11-01T08:00:00"
               for r in store.reader.shipment_key_rows())


def test_initial_data_has_seconds_shared_by_more_than_a_page(store: SimulatorStore) -> None:
    top = seconds(store).most_common(2)
    assert top[0][1] > 50
    assert top[1][1] > 1


def test_from_2000_shipments_a_second_holds_more_than_a_500_row_page() -> None:
    store = SimulatorStore(shipments=2000, seed=3)
    (_, largest), (_, second) = seconds(store).most_common(2)
    assert largest > 500
    assert second > 50  # the mass update
    assert [bulk_import_size(n) for n in (1, 30, 120, 300, 1000, 2000, 10_000, 100_000)] == [
        1, 10, 40, 100, 260, 520, 2600, 2600
    ]


def test_every_change_moves_last_modified_even_with_the_clock_standing_still(store: SimulatorStore) -> None:
    a, b, c = store.reader.live_shipment_ids()[:3]
    store.clock.advance(60)
    now = store.clock.now()

    def modified(shipment_id: int) -> dt.datetime:
        return dt.datetime.fromisoformat(store.reader.get_base_shipment(shipment_id)["last_modified_date_time"])

    store.changes.touch_shipments([a])
    assert modified(a) == now
    store.changes.touch_shipments([a, b, c])  # one batch, one second: after a's previous second
    assert modified(a) == modified(b) == modified(c) == now + dt.timedelta(seconds=1)
    store.changes.touch_shipments([b])
    assert modified(b) == now + dt.timedelta(seconds=2)
    changed = store.changes.modify_shipments(len(store.reader.live_shipment_ids()))  # a, b, c among them
    assert {modified(i) for i in changed} == {now + dt.timedelta(seconds=3)}  # one second, after b's
    store.clock.advance(30)
    store.changes.touch_shipments([a, b])
    assert modified(a) == modified(b) == store.clock.now()  # the clock passed them: back to now
    assert store.clock.now() == now + dt.timedelta(seconds=30)


def test_no_change_is_stamped_earlier_than_one_issued_before(store: SimulatorStore) -> None:
    """Touching one shipment three times runs last-modified 2 s ahead of the standing clock; every
    later write (create, modify, event create / update) of any shipment is stamped no earlier."""
    a, b, c = store.reader.live_shipment_ids()[:3]
    code = next(c for c in ("DIFF_BL_DATE", "VGM_CLOSING", "GATE_OUT")
                if (c, "ACTUAL") not in {(e["event"], e["type"]) for e in store.reader.get_events(b)})
    store.clock.advance(60)
    writes: list[Callable[[], Any]] = [
        lambda: store.changes.touch_shipments([a]),
        lambda: store.changes.touch_shipments([a]),
        lambda: store.changes.touch_shipments([a]),
        lambda: store.changes.create_shipments(2),
        lambda: store.changes.modify_shipments(3),
        lambda: store.events.create(b, "ACTUAL", {"event": code}),
        lambda: store.events.update(b, code, "ACTUAL", {}),
        lambda: store.changes.touch_shipments([c]),
        lambda: store.changes.create_shipments(1),
    ]
    newest = dt.datetime.min.replace(tzinfo=dt.UTC)
    for write in writes:
        before = store.reader.snapshot_ids_and_versions()
        write()
        after = store.reader.snapshot_ids_and_versions()
        stamps = {dt.datetime.fromisoformat(stamp) for i, (_, stamp) in after.items() if before.get(i) != after[i]}
        assert stamps and min(stamps) >= newest, (write, sorted(stamps), newest)
        newest = max(stamps)
    assert newest >= store.clock.now() + dt.timedelta(seconds=2)  # the clock stood still throughout


def test_version_changes_on_every_change_of_shipment_data(store: SimulatorStore) -> None:
    shipment_id = store.reader.live_shipment_ids()[5]
    code = next(c for c in ("DIFF_BL_DATE", "VGM_CLOSING", "GATE_OUT")
                if (c, "ACTUAL") not in {(e["event"], e["type"]) for e in store.reader.get_events(shipment_id)})
    changes: list[Callable[[], Any]] = [
        lambda: store.changes.modify_shipments(2),
        lambda: store.changes.create_shipments(1),
        lambda: store.changes.delete_shipments(1),
        lambda: store.changes.touch_shipments([shipment_id]),
        lambda: store.events.create(shipment_id, "ACTUAL", {"event": code}),
        lambda: store.events.update(shipment_id, code, "ACTUAL", {}),
    ]
    seen = [store.reader.version()]
    for change in changes:
        list(store.reader.shipment_key_rows())
        store.reader.get_shipment(shipment_id)
        assert store.reader.version() == seen[-1]  # reads change nothing
        change()
        seen.append(store.reader.version())
    assert len(set(seen)) == len(seen)


def test_memo_rows_of_one_shipment_follow_changes(store: SimulatorStore) -> None:
    def reference(client: str, number: str) -> list[dict[str, Any]]:
        return [m for m in store.reader.memo_rows() if (m["client"], m["shipment_number"]) == (client, number)]

    def key(shipment_id: int) -> tuple[str, str]:
        state = store.reader.shipment_state(shipment_id)
        return state.client, state.shipment_number

    with_memos = [i for i in store.reader.live_shipment_ids() if reference(*key(i))]
    assert len(with_memos) > 100
    for shipment_id in with_memos[:50]:
        assert store.reader.memo_rows_of(*key(shipment_id)) == reference(*key(shipment_id))
    store.clock.advance(10)
    changed = store.changes.modify_shipments(150) + store.changes.create_shipments(40)
    assert all(store.reader.memo_rows_of(*key(i)) == reference(*key(i)) for i in changed)
    assert any(store.reader.memo_rows_of(*key(i)) for i in changed)
    gone = key(with_memos[0])
    store.changes.delete_shipment_ids([with_memos[0]])
    assert store.reader.memo_rows_of(*gone) == [] == reference(*gone)
    assert store.reader.memo_rows_of("001", "NO-SUCH-NUMBER") == []


def test_every_generated_id_fits_int32_up_to_the_largest_shipment_id() -> None:
    largest_good = MAX_SHIPMENT_ID * 1000 + 99 * 10 + 9  # line 99, position 9
    assert item_id(largest_good, 2) <= INT32_MAX < item_id(largest_good + 2000, 2)
    assert MAX_SHIPMENTS * 1.15 + 10_001 < MAX_SHIPMENT_ID  # initial ids grow by about 1.08 per shipment

    def ints(value: Any) -> list[int]:
        if isinstance(value, bool):
            return []
        if isinstance(value, int):
            return [value]
        items = value.values() if isinstance(value, dict) else value if isinstance(value, list) else []
        return [i for item in items for i in ints(item)]

    tz = dt.timezone(dt.timedelta(hours=1))
    created = int(dt.datetime(2026, 10, 1, tzinfo=tz).timestamp())
    highest = 0
    for seed in range(8):
        ident = derive_identity(seed, MAX_SHIPMENT_ID, created)
        state = new_state(seed, ident, created, created, 1, 1, tz).evolve(goods=tuple(range(90, 100)))
        doc = build_document(seed, state, [], {}, lambda epoch: dt.datetime.fromtimestamp(epoch, tz).isoformat())
        highest = max(highest, *ints(doc))
    assert MAX_SHIPMENT_ID * 2000 < highest <= INT32_MAX  # goods items of the highest lines were rendered


def test_sizes_beyond_the_id_space_are_refused(store: SimulatorStore) -> None:
    with pytest.raises(ValueError, match="between 0 and 900,000"):
        SimulatorStore(shipments=MAX_SHIPMENTS + 1)
    with pytest.raises(ValueError, match="between 0 and 900,000"):
        SimulatorStore(shipments=-1)
    store.data.next_id = MAX_SHIPMENT_ID - 1  # as if the store had grown to the end of the id space
    assert store.changes.create_shipments(2) == [MAX_SHIPMENT_ID - 1, MAX_SHIPMENT_ID]
    with pytest.raises(Invalid, match="ids are exhausted"):
        store.changes.create_shipments(1)


def test_wall_clock_follows_real_time_plus_advances() -> None:
    ticks = [100.0]
    start = dt.datetime(2026, 11, 1, 8, 0, 0)
    following = SimClock(start, "+01:00", wall_clock=True, monotonic=lambda: ticks[0])
    frozen = SimClock(start, "+01:00", wall_clock=False, monotonic=lambda: ticks[0])
    ticks[0] += 2.5
    assert following.now().isoformat() == "2026-11-01T08:00:02+01:00"
    assert frozen.now().isoformat() == "2026-11-01T08:00:00+01:00"
    assert following.advance(60.6).isoformat() == "2026-11-01T08:01:03+01:00"
    assert frozen.advance(60.6).isoformat() == "2026-11-01T08:01:00+01:00"


def test_modify_moves_last_modified_and_version(store: SimulatorStore) -> None:
    before = store.reader.snapshot_ids_and_versions()
    docs_before = {i: store.reader.get_shipment(i) for i in before}
    store.clock.advance(90)
    changed = store.changes.modify_shipments(80)
    assert len(changed) == 80 == len(set(changed))
    after = store.reader.snapshot_ids_and_versions()
    now = store.clock.now().isoformat()
    for shipment_id in changed:
        assert after[shipment_id][0] == before[shipment_id][0] + 1
        assert after[shipment_id][1] == now
        assert store.reader.get_shipment(shipment_id) != docs_before[shipment_id]
    assert seconds(store)[("2026-11-01", "08:01:30")] == 80  # all in one second: more than a page
    unchanged = set(before) - set(changed)
    assert all(after[i] == before[i] for i in unchanged)
    assert all(store.reader.get_shipment(i) == docs_before[i] for i in list(unchanged)[:50])


def test_modifications_change_goods_events_and_fields() -> None:
    store = SimulatorStore(shipments=200, seed=2)
    ids = store.reader.live_shipment_ids()
    before = {i: store.reader.get_shipment(i) for i in ids}
    store.clock.advance(14 * 86400)
    for _ in range(3):
        store.changes.modify_shipments(len(ids))
        store.clock.advance(86400)
    goods_changed = events_added = fields_changed = refs_changed = 0
    for shipment_id in ids:
        old, new = before[shipment_id], store.reader.get_shipment(shipment_id)
        goods_changed += [g["id"] for g in old["goods"]] != [g["id"] for g in new["goods"]]
        events_added += len(new["events"]) > len(old["events"])
        fields_changed += old["employees"] != new["employees"] or old["custom_fields"] != new["custom_fields"]
        refs_changed += store.reader.shipment_state(shipment_id)["ADDRESS_REFERENCE"] != tuple(
            r["value"] for a in old["addresses"] for r in a["references"])
    assert goods_changed > 20 and events_added > 20 and fields_changed > 20 and refs_changed > 5


def test_create_and_delete(store: SimulatorStore) -> None:
    highest = max(store.reader.live_shipment_ids())
    store.clock.advance(5)
    created = store.changes.create_shipments(3)
    assert created == [highest + 1, highest + 2, highest + 3]
    for shipment_id in created:
        doc = store.reader.get_shipment(shipment_id)
        assert doc["created_date_time"] == doc["last_modified_date_time"] == store.clock.now().isoformat()
        assert all(e["type"] == "ESTIMATED" for e in doc["events"])
    with_memos = next(i for i in store.reader.live_shipment_ids() if store.reader.get_shipment(i)["memos"])
    memo_ids = [m["id"] for m in store.reader.get_shipment(with_memos)["memos"]]
    assert store.changes.delete_shipment_ids([with_memos]) == [with_memos]
    deleted = store.changes.delete_shipments(4)
    assert len(deleted) == 4
    live = {r["ID"] for r in store.reader.shipment_key_rows()}
    for shipment_id in [with_memos, *deleted]:
        assert shipment_id not in live
        with pytest.raises(NotFound):
            store.reader.get_shipment(shipment_id)
        with pytest.raises(NotFound):
            store.reader.get_events(shipment_id)
    assert not {m["id"] for m in store.reader.memo_rows()} & set(memo_ids)
    with pytest.raises(NotFound):
        store.reader.get_memo(memo_ids[0])
    assert store.reader.deleted_shipment_ids() == sorted([with_memos, *deleted])
    assert max(store.changes.create_shipments(1)) == highest + 4  # ids are never reused


def test_touch(store: SimulatorStore) -> None:
    shipment_id = store.reader.live_shipment_ids()[10]
    version = store.reader.shipment_state(shipment_id).version
    store.clock.advance(42)
    store.changes.touch_shipments([shipment_id, shipment_id])
    assert store.reader.shipment_state(shipment_id).version == version + 1
    assert store.reader.get_shipment(shipment_id)["last_modified_date_time"] == store.clock.now().isoformat()
    with pytest.raises(NotFound):
        store.changes.touch_shipments([shipment_id, 1])
    assert store.reader.shipment_state(shipment_id).version == version + 1


def test_events_create_update_conflict_not_found(store: SimulatorStore) -> None:
    shipment_id = next(
        i for i in store.reader.live_shipment_ids()
        if ("DIFF_BL_DATE", "ACTUAL") not in {(e["event"], e["type"]) for e in store.reader.get_events(i)}
    )
    body = {"event": "DIFF_BL_DATE", "date_time": {"date": "2026-11-02", "time": "10:00:00", "zone_offset": "+01:00"},
            "location": {"codes": [{"type": "UNLOC", "code": "DEHAM"}], "name": "Hamburg"}}
    store.clock.advance(10)
    created = store.events.create(shipment_id, "ACTUAL", body)
    assert created["shipment_id"] == shipment_id and created["type"] == "ACTUAL"
    doc = store.reader.get_shipment(shipment_id)
    assert created in doc["events"] and doc["events"] == store.reader.get_events(shipment_id)
    assert doc["last_modified_date_time"] == store.clock.now().isoformat()
    with pytest.raises(Conflict):
        store.events.create(shipment_id, "ACTUAL", body)

    pickup = {"event": "PICKUP", "date_time": {"date": "2026-11-03", "time": {"hour": 9, "minute": 0, "second": 0,
                                                                            "nano": 0},
                                                "zone_offset": {"totalSeconds": 3600, "id": "+01:00", "rules": {}}}}
    store.clock.advance(10)
    updated = store.events.update(shipment_id, "PICKUP", "ESTIMATED", pickup)
    events = store.reader.get_events(shipment_id)
    assert updated in events
    assert [e for e in events if (e["event"], e["type"]) == ("PICKUP", "ESTIMATED")] == [updated]
    assert store.reader.get_shipment(shipment_id)["last_modified_date_time"] == store.clock.now().isoformat()

    absent = next(c for c in ("TRANSSHIPMENT", "GATE_OUT", "CLEARANCE_START")
                  if (c, "ACTUAL") not in {(e["event"], e["type"]) for e in events})
    with pytest.raises(NotFound):
        store.events.update(shipment_id, absent, "ACTUAL", {"event": absent})
    with pytest.raises(NotFound):
        store.events.create(999, "ACTUAL", body)
    with pytest.raises(NotFound):
        store.reader.get_events(999)
    for bad in ({"event": "NOPE"}, {"event": "PICKUP", "date_time": {"date": "someday"}},
                {"event": "PICKUP", "location": {"codes": [{"type": "ZIP", "code": "1"}]}},
                {"event": "PICKUP", "shipment_id": shipment_id + 1}):
        with pytest.raises(Invalid):
            store.events.create(shipment_id, "ESTIMATED", bad)
    with pytest.raises(Invalid):
        store.events.create(shipment_id, "PLANNED", body)
    with pytest.raises(Invalid):
        store.events.update(shipment_id, "NOPE", "ACTUAL", {})


def test_memo_lines(store: SimulatorStore) -> None:
    rows = list(store.reader.memo_rows())
    assert len(rows) > 300
    ids = [r["id"] for r in rows]
    assert ids == sorted(ids) and len(set(ids)) == len(ids)
    keys = {(r["CLIENT"], r["SHIPMENT_NUMBER"]) for r in store.reader.shipment_key_rows()}
    per_shipment: dict[tuple[str, str], list[int]] = {}
    for row in rows:
        assert set(row) == {"id", "client", "memo", "shipment_number", "running_number"}
        assert (row["client"], row["shipment_number"]) in keys
        per_shipment.setdefault((row["client"], row["shipment_number"]), []).append(row["running_number"])
    assert all(numbers == list(range(1, len(numbers) + 1)) for numbers in per_shipment.values())
    assert max(len(n) for n in per_shipment.values()) >= 3
    assert store.reader.get_memo(ids[0]) == rows[0]
    with pytest.raises(NotFound):
        store.reader.get_memo(10**9)


def test_code_conversions(store: SimulatorStore) -> None:
    rows = list(store.reader.code_conversion_rows())
    assert 200 <= len(rows) <= 400
    assert [r["id"] for r in rows] == sorted({r["id"] for r in rows})
    fields = {"id", "partner", "direction", "code_table", "code_type", "source_code", "target_code", "description",
              "valid_from", "last_modified_date_time"}
    assert all(set(r) == fields and r["direction"] in ("I", "O") for r in rows)
    assert store.reader.get_code_conversion(rows[5]["id"]) == rows[5]
    with pytest.raises(NotFound):
        store.reader.get_code_conversion(10**6)


def test_efile_operations(store: SimulatorStore) -> None:
    document = base64.b64encode(b"%PDF-1.4 invoice").decode()
    stored = store.efiles.store({"file_name": "invoice.pdf", "mime_type": "application/pdf", "document": document,
                                "references": [{"type": "SHIPMENT", "value": "100001"}], "roles": ["ACCOUNTING"]})
    efile_id = stored["id"]
    assert stored["document"] == document and stored["references"][0]["id"]
    plain = store.efiles.get(efile_id)
    assert plain["references"] is None and plain["roles"] is None and plain["document"] == document
    full = store.efiles.get(efile_id, cascade=True)
    assert full["references"] == stored["references"] and full["roles"][0]["role"] == "ACCOUNTING"

    store.efiles.add_reference(efile_id, {"type": "HBL", "value": "FPLHAM26123456"})
    assert [r["type"] for r in store.efiles.references(efile_id)] == ["SHIPMENT", "HBL"]
    store.efiles.delete_reference(efile_id, {"type": "HBL", "value": "FPLHAM26123456"})
    assert [r["type"] for r in store.efiles.references(efile_id)] == ["SHIPMENT"]
    with pytest.raises(NotFound):
        store.efiles.delete_reference(efile_id, {"type": "HBL", "value": "nope"})
    with pytest.raises(Invalid):
        store.efiles.add_reference(efile_id, {"type": "WHATEVER", "value": "x"})

    store.efiles.add_role(efile_id, "CUSTOMS")
    roles = store.efiles.roles(efile_id)
    assert [r["role"] for r in roles] == ["ACCOUNTING", "CUSTOMS"]
    store.efiles.delete_role(efile_id, {"id": roles[0]["id"]})
    store.efiles.delete_role(efile_id, {"role": "CUSTOMS"})
    assert store.efiles.roles(efile_id) == []

    rows = list(store.efiles.rows([100001]))
    assert [r["id"] for r in rows] == [efile_id] and "document" not in rows[0]
    assert efile_id in {r["id"] for r in store.efiles.rows()}
    assert rows[0]["references"][0]["value"] == "100001"
    with pytest.raises(Invalid):
        store.efiles.store({"document": "not base64!"})
    assert store.efiles.delete(efile_id)["id"] == efile_id
    for call in (lambda: store.efiles.get(efile_id), lambda: store.efiles.delete(efile_id),
                 lambda: store.efiles.roles(efile_id), lambda: store.efiles.add_role(efile_id, "X")):
        with pytest.raises(NotFound):
            call()


def test_webhooks_are_recorded(store: SimulatorStore) -> None:
    assert store.webhooks.record({"event": "status", "n": 1}) == 1
    assert store.webhooks.record({"event": "status", "n": 2}) == 2
    assert [w["payload"]["n"] for w in store.webhooks.payloads()] == [1, 2]
    with pytest.raises(Invalid):
        store.webhooks.record(["not", "an", "object"])  # type: ignore[arg-type]


def test_returned_documents_are_copies(store: SimulatorStore) -> None:
    shipment_id = store.reader.live_shipment_ids()[0]
    doc = store.reader.get_shipment(shipment_id)
    doc["goods"].clear()
    doc["client"] = "changed"
    assert store.reader.get_shipment(shipment_id)["client"] != "changed"


def test_concurrent_reads_and_changes(store: SimulatorStore) -> None:
    errors: list[BaseException] = []
    ids = store.reader.live_shipment_ids()[:60]

    def read() -> None:
        try:
            for shipment_id in ids:
                store.reader.get_shipment(shipment_id)
                list(store.reader.shipment_key_rows())
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=read) for _ in range(4)]
    for thread in threads:
        thread.start()
    for _ in range(10):
        store.changes.modify_shipments(20)
        store.clock.advance(1)
    for thread in threads:
        thread.join()
    assert not errors
