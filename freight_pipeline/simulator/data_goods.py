"""Goods lines: a tree (``subgoods``, up to three levels) with hs codes, measurements, customs
invoices, MRNs and dangerous goods.

Each top-level line is generated from its own RNG seeded with (seed, shipment id, line number),
so a line keeps its content while other lines are added or removed by later versions. Good ids
are ``shipment_id * 1000 + line_number * 10 + position`` (position 0 for the line itself, 1..9 for
its descendants); a good has at most two items of each kind (hs codes, measurements, customs,
MRNs, dangerous goods), whose ids are ``good_id * 2 + k - 1`` (k = 1, 2). Every id fits int32 for
shipment ids up to :data:`MAX_SHIPMENT_ID` (1,073,740).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from freight_pipeline.simulator import data_catalog as cat
from freight_pipeline.simulator.data_format import TAG_GOOD, rng_for, round2
from freight_pipeline.simulator.data_identity import Identity

MAX_LINE_NUMBER = 99
IDS_PER_SHIPMENT = 1000  # good ids: 99 lines x 10 positions
ITEMS_PER_GOOD = 2  # at most this many hs codes, measurements, customs, MRNs, dangerous goods per good
INT32_MAX = 2**31 - 1
MAX_SHIPMENT_ID = (INT32_MAX - ITEMS_PER_GOOD * (IDS_PER_SHIPMENT - 1) - (ITEMS_PER_GOOD - 1)) // (
    ITEMS_PER_GOOD * IDS_PER_SHIPMENT
)
_VOLUMETRIC_KG_PER_M3 = {"AIR": 167.0, "SEA": 1000.0, "RD": 333.0, "RL": 500.0}
_LEGISLATION = {"SEA": "IMDG", "RD": "ADR", "RL": "RID"}


@dataclass
class GoodsContext:
    seed: int
    ident: Identity
    client: str
    shipment_number: str
    container_numbers: list[str]
    iso: Callable[[int], str]
    level_number: int = 0
    totals: dict[str, float] = field(default_factory=lambda: {"packages": 0, "weight": 0.0, "volume": 0.0})


def item_id(good_id: int, k: int) -> int:
    """Id of the ``k``-th (1-based) hs code, measurement, customs, MRN or dangerous good of a good."""
    assert 1 <= k <= ITEMS_PER_GOOD
    return good_id * ITEMS_PER_GOOD + k - 1


def render_goods(ctx: GoodsContext, line_numbers: tuple[int, ...]) -> list[dict[str, Any]]:
    goods = []
    for counter, number in enumerate(line_numbers, start=1):
        rng = rng_for(ctx.seed, ctx.ident.id, TAG_GOOD, number)
        commodity = rng.choice(cat.COMMODITIES)
        quantity = rng.randint(1, 40)
        kg = rng.uniform(*commodity.kg_per_package)
        m3 = rng.uniform(*commodity.m3_per_package)
        good_id = ctx.ident.id * IDS_PER_SHIPMENT + number * 10
        positions = iter(range(good_id + 1, good_id + 10))
        line = _line(ctx, rng, commodity, good_id, positions, counter, 1, quantity, quantity * kg, quantity * m3,
                     f"{number:02d}")
        ctx.totals["packages"] += quantity
        ctx.totals["weight"] += line["weight"]
        ctx.totals["volume"] += line["volume"]
        goods.append(line)
    return goods


def _line(ctx: GoodsContext, rng: random.Random, commodity: cat.Commodity, good_id: int, positions: Any,
          counter: int, level: int, quantity: int, weight: float, volume: float, path: str) -> dict[str, Any]:
    ctx.level_number += 1
    ident = ctx.ident
    weight, volume = round2(max(weight, 0.5)), round(max(volume, 0.001), 3)
    chargeable = round2(max(weight, volume * _VOLUMETRIC_KG_PER_M3[ident.mode]))
    packaging = rng.choice(commodity.packaging)
    colli = rng.random() < 0.6
    line: dict[str, Any] = {
        "id": good_id,
        "client": ctx.client,
        "shipment_number": ctx.shipment_number,
        "identifier": f"{ctx.shipment_number}-{path}",
        "counter": counter,
        "level": level,
        "level_number": ctx.level_number,
        "marks": _marks(rng, ident, quantity),
        "quantity": quantity,
        "packaging_matchcode": packaging,
        "commodity_matchcode": commodity.matchcode,
        "description": rng.sample(commodity.descriptions, rng.randint(1, min(2, len(commodity.descriptions))))
        + ([f"{quantity} {cat.PACKAGING_NAMES[packaging].upper()}S"] if rng.random() < 0.4 else []),
        "weight": weight,
        "net_weight": round2(weight * rng.uniform(0.82, 0.95)),
        "chargable_weight": chargeable,
        "weight_unit": "KG",
        "volume": volume,
        "volume_unit": "M3",
        "colli": colli,
        "colli_number": quantity if colli else None,
        "additional_mark": rng.random() < 0.15,
        "container_number": ctx.container_numbers[(int(path[:2]) - 1) % len(ctx.container_numbers)]
        if ctx.container_numbers else None,
        "hs_codes": [{"id": item_id(good_id, k), "goodId": good_id, "hsCode": code}
                     for k, code in enumerate(rng.sample(commodity.hs_codes, rng.randint(1, 2)), start=1)],
        "measurements": _measurements(ctx, rng, good_id, quantity, weight),
        "customs": _customs(ctx, rng, good_id, weight),
        "mrns": [{"id": item_id(good_id, 1), "mrn": _mrn(rng, ident)}]
        if ident.direction == "E" and rng.random() < 0.5 else [],
        "subgoods": [],
        "dangerousGoods": _dangerous(ctx, rng, commodity, good_id, weight),
    }
    if level < 3 and quantity >= 2 and rng.random() < (0.3 if level == 1 else 0.4):
        children = min(rng.randint(1, 3 if level == 1 else 2), quantity)
        line["subgoods"] = _children(ctx, rng, commodity, positions, level + 1, quantity, weight, volume, path,
                                     children)
    if rng.random() < 0.05:
        del line["additional_mark"]  # absent optional key
    return line


def _children(ctx: GoodsContext, rng: random.Random, commodity: cat.Commodity, positions: Any, level: int,
              quantity: int, weight: float, volume: float, path: str, count: int) -> list[dict[str, Any]]:
    """Split the parent's quantity, weight and volume over ``count`` child lines."""
    base, extra = divmod(quantity, count)
    result = []
    for i in range(count):
        qty = base + (1 if i < extra else 0)
        child_id = next(positions, None)
        if child_id is None:
            break
        share = qty / quantity
        result.append(_line(ctx, rng, commodity, child_id, positions, i + 1, level, qty, weight * share,
                            volume * share, f"{path}.{i + 1}"))
    return result


def _marks(rng: random.Random, ident: Identity, quantity: int) -> list[str]:
    if rng.random() < 0.3:
        return ["N/M"]
    return [ident.consignee.name.upper()[:24], ident.destination.name.upper(), f"1-{quantity}"]


def _measurements(ctx: GoodsContext, rng: random.Random, good_id: int, quantity: int, weight: float
                  ) -> list[dict[str, Any]]:
    items = []
    for k in range(rng.choice((0, 0, 1, 1, 2))):
        length, width, height = rng.choice((120, 80, 100, 60)), rng.choice((80, 100, 120, 40)), rng.randint(40, 220)
        qty = max(1, quantity // (k + 1))
        items.append({
            "id": item_id(good_id, k + 1), "weight": round2(weight / max(qty, 1)), "length": length, "width": width,
            "height": height, "quantity": qty, "goods_id": good_id, "client": ctx.client,
            "shipment_number": ctx.shipment_number, "weight_unit": "KG", "volume_unit": "M3",
            "measurement_unit": "CM", "volume": round(length * width * height / 1_000_000 * qty, 3),
        })
    return items


def _customs(ctx: GoodsContext, rng: random.Random, good_id: int, weight: float) -> list[dict[str, Any]]:
    if rng.random() < 0.45:
        return []
    created = ctx.ident.milestones[0].planned - 3 * 86400
    currency = rng.choice(("EUR", "EUR", "USD", "CNY", "CHF"))
    return [{
        "id": item_id(good_id, 1),
        "invoice_number": f"INV-{rng.randint(2025, 2026)}-{rng.randint(10000, 99999)}",
        "invoice_date_time": ctx.iso(created - rng.randint(0, 10) * 86400),
        "amount": round2(weight * rng.uniform(4, 60)),
        "currency_matchcode": currency,
        "delivery_note": f"DN{rng.randint(1000000, 9999999)}" if rng.random() < 0.7 else None,
        "delivery_date_time": ctx.iso(created + rng.randint(0, 3) * 86400) if rng.random() < 0.6 else None,
    }]


def _mrn(rng: random.Random, ident: Identity) -> str:
    body = "".join(rng.choice("0123456789ABCDEFGHJKLMNPRSTUVWXYZ") for _ in range(13))
    return f"26{ident.office.cities[0].country}{body}A{rng.randint(0, 9)}"


def _dangerous(ctx: GoodsContext, rng: random.Random, commodity: cat.Commodity, good_id: int, weight: float
               ) -> list[dict[str, Any]]:
    legislation = _LEGISLATION.get(ctx.ident.mode)
    share = 0.5 if commodity.matchcode in ("CHEMICALS", "BATTERIES") else 0.03
    if legislation is None or rng.random() >= share:
        return []
    dg = rng.choice(cat.DANGEROUS_GOODS)
    labels = [*dg.labels, None, None, None][:4]
    name = ctx.ident.shipper.contact_name
    return [{
        "id": item_id(good_id, 1),
        "dangerous_good_legislation": legislation,
        "classification_code": dg.classification_code,
        "un_number": dg.un_number,
        "release": None,
        "label_1": labels[0], "label_2": labels[1], "label_3": labels[2], "label_4": labels[3],
        "site": None,
        "flashpoint": f"{dg.flashpoint_c:.0f}" if dg.flashpoint_c is not None else None,
        "flashpoint_unit": "C" if dg.flashpoint_c is not None else None,
        "ems_number_1": dg.ems[0] if dg.ems and legislation == "IMDG" else None,
        "ems_number_2": dg.ems[1] if dg.ems and legislation == "IMDG" else None,
        "mfag_number_1": None, "mfag_number_2": None,
        "remarks": ["LIMITED QUANTITY"] if rng.random() < 0.2 else [],
        "authorisation_number": None,
        "packaging_group": dg.packaging_group,
        "technical_name_1": dg.technical_name, "technical_name_2": None,
        "causing_substance_1": None, "causing_substance_2": None,
        "issuer": ctx.ident.shipper.name,
        "net_weight": round2(weight * 0.85), "gross_weight": round2(weight), "weight_unit": "KG",
        "contact": {"name": name, "phone_number": ctx.ident.shipper.phone, "fax_number": None,
                    "email": ctx.ident.shipper.email},
    }]
