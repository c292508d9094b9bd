"""Reference data besides places: clients, carriers, airlines, vessels, parties, goods, texts."""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from freight_pipeline.simulator.store_api import MODES_OF_TRANSPORT

# The forwarder's clients (TMS mandants) and their weights.
CLIENTS: tuple[str, ...] = ("001", "002", "005", "010")
CLIENT_WEIGHTS: tuple[int, ...] = (55, 25, 12, 8)

MODES: tuple[str, ...] = MODES_OF_TRANSPORT
MODE_WEIGHTS: tuple[int, ...] = (42, 28, 22, 8)


@dataclass(frozen=True, slots=True)
class Airline:
    iata: str
    awb_prefix: str
    name: str


AIRLINES: tuple[Airline, ...] = (
    Airline("LH", "020", "Lufthansa Cargo"),
    Airline("CX", "160", "Cathay Pacific Cargo"),
    Airline("SQ", "618", "Singapore Airlines Cargo"),
    Airline("EK", "176", "Emirates SkyCargo"),
    Airline("QR", "157", "Qatar Airways Cargo"),
    Airline("KE", "180", "Korean Air Cargo"),
    Airline("CA", "999", "Air China Cargo"),
    Airline("CI", "297", "China Airlines Cargo"),
    Airline("TK", "235", "Turkish Cargo"),
    Airline("AF", "057", "Air France Cargo"),
    Airline("KL", "074", "KLM Cargo"),
    Airline("CV", "172", "Cargolux"),
    Airline("UA", "016", "United Cargo"),
    Airline("AA", "001", "American Airlines Cargo"),
    Airline("DL", "006", "Delta Cargo"),
    Airline("BA", "125", "IAG Cargo"),
)


@dataclass(frozen=True, slots=True)
class ShippingLine:
    scac: str
    name: str
    vessel_names: tuple[str, ...]


SHIPPING_LINES: tuple[ShippingLine, ...] = (
    ShippingLine("MAEU", "Maersk", ("MAERSK ESSEN", "MAERSK KENSINGTON", "MADRID MAERSK", "MUMBAI MAERSK")),
    ShippingLine("MSCU", "MSC", ("MSC ANNA", "MSC GULSUN", "MSC TESSA", "MSC ISABELLA")),
    ShippingLine("CMDU", "CMA CGM", ("CMA CGM MARCO POLO", "CMA CGM ANTOINE DE SAINT EXUPERY", "CMA CGM JULES VERNE")),
    ShippingLine("HLCU", "Hapag-Lloyd", ("HAMBURG EXPRESS", "BERLIN EXPRESS", "AL NEFUD", "BREMEN EXPRESS")),
    ShippingLine("ONEY", "Ocean Network Express", ("ONE APUS", "ONE INNOVATION", "ONE TRUTH")),
    ShippingLine("COSU", "COSCO Shipping", ("COSCO SHIPPING ARIES", "COSCO SHIPPING UNIVERSE", "COSCO FRANCE")),
    ShippingLine("EGLV", "Evergreen", ("EVER ACE", "EVER GIVEN", "EVER GLOBE")),
    ShippingLine("HDMU", "HMM", ("HMM ALGECIRAS", "HMM OSLO", "HMM GDANSK")),
    ShippingLine("YMLU", "Yang Ming", ("YM WELLNESS", "YM WARRANTY", "YM WISDOM")),
    ShippingLine("ZIMU", "ZIM", ("ZIM SAMMY OFER", "ZIM KINGSTON", "ZIM MOUNT EVEREST")),
)

# Flag state (ISO country) -> call sign prefixes used for generated call signs.
VESSEL_FLAGS: tuple[tuple[str, str], ...] = (
    ("LR", "D5"), ("PA", "3E"), ("MH", "V7"), ("SG", "9V"), ("HK", "VR"), ("MT", "9H"),
    ("DE", "DA"), ("DK", "OZ"), ("PT", "CQ"), ("GB", "2G"),
)

HAULIERS: tuple[str, ...] = (
    "Nordfracht Spedition", "Rhein-Trans GmbH", "Alpina Logistik", "Baltic Road Services",
    "Westfalen Express", "Danube Cargo Lines", "Hanse Container Trucking",
)

COMPANY_HEADS: tuple[str, ...] = (
    "Nordlicht", "Bergmann", "Hansa", "Alpen", "Rhein", "Kessler", "Weber", "Schmitt", "Falk",
    "Brenner", "Lindner", "Hoffmann", "Elbe", "Wagner", "Sauer", "Kraus", "Donau", "Keller",
    "Vogt", "Stern", "Lorenz", "Adler", "Franken", "Harz",
)
COMPANY_TAILS: tuple[str, ...] = (
    "Maschinenbau GmbH", "Elektronik AG", "Logistik GmbH", "Handels GmbH & Co. KG", "Chemie GmbH",
    "Automotive GmbH", "Medizintechnik GmbH", "Textil GmbH", "Antriebstechnik AG", "Kunststoffwerk GmbH",
)
FOREIGN_COMPANY_TAILS: dict[str, tuple[str, ...]] = {
    "CN": ("Precision Manufacturing Co., Ltd.", "Electronics Co., Ltd.", "Import & Export Co., Ltd.",
           "Machinery Co., Ltd."),
    "US": ("Industries Inc.", "Supply LLC", "Distribution Corp.", "Manufacturing Inc."),
    "CA": ("Industries Inc.", "Distribution Ltd."),
    "GB": ("Trading Ltd.", "Engineering Ltd."),
    "JP": ("Kogyo Co., Ltd.", "Trading Co., Ltd."),
    "KR": ("Industrial Co., Ltd.", "Trading Co., Ltd."),
}
DEFAULT_FOREIGN_TAILS: tuple[str, ...] = ("Trading Co.", "Industries", "Import Export", "Distribution")
STREETS_LOCAL: tuple[str, ...] = (
    "Industriestrasse", "Hafenstrasse", "Am Lagerplatz", "Gewerbering", "Hauptstrasse", "Daimlerstrasse",
    "Carl-Benz-Strasse", "Speicherstadt", "Zollstrasse", "Logistikallee", "Rudolf-Diesel-Weg",
)
STREETS_FOREIGN: tuple[str, ...] = (
    "Industrial Park Road", "Harbour Drive", "Commerce Street", "Export Processing Zone Road",
    "Logistics Avenue", "Free Trade Zone Road", "Technology Park Road", "Warehouse Lane",
)
FIRST_NAMES: tuple[str, ...] = (
    "Anna", "Jonas", "Lena", "Felix", "Marie", "Lukas", "Sophie", "Paul", "Clara", "Tim", "Eva", "Jan",
    "Wei", "Li", "Min", "James", "Emily", "Carlos", "Priya", "Yuki",
)
LAST_NAMES: tuple[str, ...] = (
    "Mueller", "Schmidt", "Schneider", "Fischer", "Weber", "Meyer", "Wagner", "Becker", "Kowalski",
    "Novak", "Rossi", "Jansen", "Zhang", "Wang", "Smith", "Garcia", "Patel", "Tanaka",
)

# Employee logins per office (TMS matchcodes).
EMPLOYEES_PER_OFFICE = 6


@lru_cache(maxsize=64)
def employee_logins(office: str) -> tuple[str, ...]:
    logins = []
    for i in range(EMPLOYEES_PER_OFFICE):
        first = FIRST_NAMES[(i * 7 + len(office) * 3 + ord(office[0])) % len(FIRST_NAMES)]
        last = LAST_NAMES[(i * 5 + ord(office[1])) % len(LAST_NAMES)]
        logins.append(f"{first[0]}{last}".upper()[:8] + office[:1])
    return tuple(dict.fromkeys(logins))


INCOTERMS: tuple[tuple[str, str], ...] = (
    ("EXW", "Ex Works"), ("FCA", "Free Carrier"), ("CPT", "Carriage Paid To"),
    ("CIP", "Carriage and Insurance Paid To"), ("DAP", "Delivered at Place"),
    ("DPU", "Delivered at Place Unloaded"), ("DDP", "Delivered Duty Paid"), ("FAS", "Free Alongside Ship"),
    ("FOB", "Free On Board"), ("CFR", "Cost and Freight"), ("CIF", "Cost, Insurance and Freight"),
)
SEA_ONLY_INCOTERMS = frozenset({"FAS", "FOB", "CFR", "CIF"})


@dataclass(frozen=True, slots=True)
class Commodity:
    matchcode: str
    descriptions: tuple[str, ...]
    hs_codes: tuple[str, ...]
    packaging: tuple[str, ...]
    kg_per_package: tuple[float, float]
    m3_per_package: tuple[float, float]


COMMODITIES: tuple[Commodity, ...] = (
    Commodity("MACHINERY", ("INDUSTRIAL MACHINERY PARTS", "CNC MILLING MACHINE COMPONENTS", "GEAR UNITS"),
              ("84663000", "84834021", "84589900"), ("CRT", "PLT", "CS"), (180, 950), (0.6, 2.4)),
    Commodity("ELECTRONICS", ("ELECTRONIC COMPONENTS", "PRINTED CIRCUIT BOARDS", "LED DISPLAY MODULES"),
              ("85423190", "85340011", "85285900"), ("CTN", "PLT"), (8, 240), (0.05, 1.2)),
    Commodity("AUTOPARTS", ("AUTOMOTIVE SPARE PARTS", "BRAKE DISCS", "GEARBOX HOUSINGS"),
              ("87083091", "87084020", "87089997"), ("PLT", "CRT", "BOX"), (120, 800), (0.5, 1.6)),
    Commodity("TEXTILES", ("COTTON T-SHIRTS", "LADIES GARMENTS", "WOVEN FABRICS"),
              ("61091000", "62043290", "52083100"), ("CTN", "BAG"), (6, 25), (0.04, 0.12)),
    Commodity("FURNITURE", ("OFFICE FURNITURE", "WOODEN CHAIRS", "FLAT PACKED TABLES"),
              ("94033011", "94016100", "94036010"), ("CTN", "PLT"), (15, 300), (0.2, 1.8)),
    Commodity("CHEMICALS", ("INDUSTRIAL COATINGS", "ADHESIVES", "CLEANING AGENTS"),
              ("32089091", "35061000", "34029090"), ("DRM", "IBC", "PLT"), (60, 1100), (0.2, 1.2)),
    Commodity("MEDICAL", ("MEDICAL DEVICES", "DIAGNOSTIC REAGENTS", "SURGICAL INSTRUMENTS"),
              ("90189084", "38220000", "90189010"), ("CTN", "BOX"), (3, 60), (0.02, 0.4)),
    Commodity("FOODSTUFF", ("CANNED TOMATOES", "OLIVE OIL", "DRIED FRUIT"),
              ("20021000", "15092000", "08134095"), ("CTN", "PLT"), (10, 900), (0.03, 1.4)),
    Commodity("BATTERIES", ("LITHIUM ION BATTERIES", "BATTERY PACKS FOR E-BIKES"),
              ("85076000", "85079080"), ("BOX", "PLT"), (20, 600), (0.05, 1.2)),
)
PACKAGING_NAMES: dict[str, str] = {
    "PLT": "pallet", "CTN": "carton", "CRT": "crate", "CS": "case", "BOX": "box", "BAG": "bag",
    "DRM": "drum", "IBC": "intermediate bulk container",
}


@dataclass(frozen=True, slots=True)
class DangerousGood:
    un_number: str
    classification_code: str
    technical_name: str
    packaging_group: str | None
    labels: tuple[str, ...]
    flashpoint_c: float | None
    ems: tuple[str, str] | None


DANGEROUS_GOODS: tuple[DangerousGood, ...] = (
    DangerousGood("1263", "3", "PAINT", "II", ("3",), 12.0, ("F-E", "S-E")),
    DangerousGood("1993", "3", "FLAMMABLE LIQUID, N.O.S.", "III", ("3",), 38.0, ("F-E", "S-E")),
    DangerousGood("1133", "3", "ADHESIVES", "II", ("3",), 5.0, ("F-E", "S-D")),
    DangerousGood("3480", "9", "LITHIUM ION BATTERIES", None, ("9A",), None, ("F-A", "S-I")),
    DangerousGood("1830", "8", "SULPHURIC ACID", "II", ("8",), None, ("F-A", "S-B")),
    DangerousGood("1789", "8", "HYDROCHLORIC ACID", "II", ("8",), None, ("F-A", "S-B")),
    DangerousGood("2794", "8", "BATTERIES, WET, FILLED WITH ACID", "III", ("8",), None, ("F-A", "S-B")),
    DangerousGood("1950", "2.1", "AEROSOLS", None, ("2.1",), None, ("F-D", "S-U")),
    DangerousGood("3082", "9", "ENVIRONMENTALLY HAZARDOUS SUBSTANCE, LIQUID, N.O.S.", "III", ("9",), None,
                  ("F-A", "S-F")),
    DangerousGood("1170", "3", "ETHANOL SOLUTION", "II", ("3",), 13.0, ("F-E", "S-D")),
    DangerousGood("2735", "8", "AMINES, LIQUID, CORROSIVE, N.O.S.", "II", ("8",), None, ("F-A", "S-B")),
)

CONTAINER_TYPES: tuple[tuple[str, int], ...] = (("22G1", 35), ("42G1", 20), ("45G1", 35), ("22R1", 4), ("45R1", 6))
CONTAINER_OWNERS: tuple[str, ...] = ("MSK", "MSC", "CMA", "HLX", "ONE", "CSN", "EGH", "HDM", "YML", "ZIM", "TGH", "SEG")

MEMO_TEXTS: tuple[str, ...] = (
    "Customer requests delivery notification 24h in advance.",
    "Tail-lift truck required for delivery.",
    "Original documents sent by courier, tracking to follow.",
    "Consignee closed on Fridays after 12:00.",
    "Release original B/L only against payment confirmation.",
    "Please call consignee before delivery.",
    "Goods stackable max. 2 high.",
    "Temperature range +15 / +25 C during transport.",
    "Check VGM submission before cut-off.",
    "Invoice copy to accounts payable department.",
    "Customs broker at destination: use customer's own broker.",
    "Booking confirmed by carrier, awaiting container release.",
    "Pickup slot confirmed by shipper.",
    "Delivery address differs from consignee address.",
    "Insurance requested by customer, certificate to be issued.",
    "Shipper informed about delay of vessel.",
    "Pre-alert sent to destination agent.",
    "Customer requests photos of loaded container.",
    "Dangerous goods declaration received and checked.",
    "Export declaration to be filed by forwarder.",
    "Waiting for commercial invoice from shipper.",
    "Packing list received, weights corrected.",
    "Demurrage free time 14 days agreed with carrier.",
    "Consignee requests split delivery.",
    "Delivery appointment booked via portal.",
)
CUSTOM_FIELD_VALUES: tuple[str, ...] = (
    "KPI-RELEVANT", "KEY ACCOUNT", "PROJECT CARGO", "SPOT RATE", "CONTRACT RATE", "GREEN LANE",
    "PRIORITY", "CO2 OFFSET", "FOLLOW-UP", "CLAIM OPEN",
)
CONTAINER_ADDRESS_QUALIFIERS: tuple[str, ...] = ("LOADING", "WEIGHING", "CUSTOMS", "FUMIGATION", "STUFFING")
REFERENCE_MATCHCODES: tuple[str, ...] = ("PO", "CR", "DN", "BKG")
