"""Reference data of places: offices, ports, airports, rail terminals and cities.

UN/LOCODEs and IATA codes are real; coordinates are rounded city coordinates; ``utc_minutes`` is
the standard (non-DST) offset of the place, used for the local parts of DateTime objects.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Place:
    unloc: str
    name: str
    lat: float
    lon: float
    utc_minutes: int
    iata: str | None = None
    postal_code: str | None = None

    @property
    def country(self) -> str:
        return self.unloc[:2]


def _p(unloc: str, name: str, lat: float, lon: float, tz: float, iata: str | None = None,
       pc: str | None = None) -> Place:
    return Place(unloc, name, lat, lon, round(tz * 60), iata, pc)


# --- sea ports ---------------------------------------------------------------------------------
EU_SEA_PORTS: tuple[Place, ...] = (
    _p("DEHAM", "Hamburg", 53.546, 9.966, 1, pc="20457"),
    _p("DEBRV", "Bremerhaven", 53.540, 8.581, 1, pc="27568"),
    _p("NLRTM", "Rotterdam", 51.905, 4.466, 1, pc="3089"),
    _p("BEANR", "Antwerp", 51.260, 4.400, 1, pc="2030"),
    _p("FRLEH", "Le Havre", 49.490, 0.108, 1, pc="76600"),
    _p("ITGOA", "Genoa", 44.407, 8.934, 1, pc="16126"),
    _p("PLGDN", "Gdansk", 54.352, 18.646, 1, pc="80-001"),
    _p("GBFXT", "Felixstowe", 51.961, 1.351, 0, pc="IP11 3SY"),
)
OVERSEAS_SEA_PORTS: tuple[Place, ...] = (
    _p("CNSHA", "Shanghai", 31.230, 121.474, 8, pc="200000"),
    _p("CNNGB", "Ningbo", 29.868, 121.544, 8, pc="315000"),
    _p("CNYTN", "Yantian", 22.575, 114.272, 8, pc="518081"),
    _p("CNTAO", "Qingdao", 36.067, 120.383, 8, pc="266000"),
    _p("SGSIN", "Singapore", 1.264, 103.840, 8, pc="099253"),
    _p("KRPUS", "Busan", 35.104, 129.040, 9, pc="48943"),
    _p("HKHKG", "Hong Kong", 22.319, 114.169, 8, pc="999077"),
    _p("JPTYO", "Tokyo", 35.619, 139.779, 9, pc="135-0064"),
    _p("TWKHH", "Kaohsiung", 22.616, 120.300, 8, pc="802"),
    _p("VNSGN", "Ho Chi Minh City", 10.776, 106.700, 7, pc="700000"),
    _p("INNSA", "Nhava Sheva", 18.950, 72.950, 5.5, pc="400707"),
    _p("AEJEA", "Jebel Ali", 25.011, 55.061, 4, pc="17000"),
    _p("USNYC", "New York", 40.684, -74.150, -5, pc="07114"),
    _p("USSAV", "Savannah", 32.081, -81.091, -5, pc="31401"),
    _p("USLAX", "Los Angeles", 33.740, -118.270, -8, pc="90731"),
    _p("CAMTR", "Montreal", 45.502, -73.554, -5, pc="H3C 3R5"),
    _p("BRSSZ", "Santos", -23.960, -46.333, -3, pc="11010-000"),
    _p("MXZLO", "Manzanillo", 19.052, -104.316, -6, pc="28200"),
    _p("ZADUR", "Durban", -29.871, 31.026, 2, pc="4001"),
    _p("AUSYD", "Sydney", -33.868, 151.209, 10, pc="2000"),
)
TRANSSHIPMENT_PORTS: tuple[Place, ...] = (
    _p("SGSIN", "Singapore", 1.264, 103.840, 8),
    _p("MYPKG", "Port Klang", 3.000, 101.393, 8),
    _p("LKCMB", "Colombo", 6.950, 79.850, 5.5),
    _p("MATNG", "Tanger Med", 35.885, -5.500, 1),
    _p("ESALG", "Algeciras", 36.128, -5.447, 1),
    _p("PAMIT", "Manzanillo (Panama)", 9.362, -79.885, -5),
)

# --- airports (UN/LOCODE of the city, IATA of the airport) -------------------------------------
EU_AIRPORTS: dict[str, Place] = {
    "FRA": _p("DEFRA", "Frankfurt am Main", 50.038, 8.562, 1, "FRA", "60549"),
    "MUC": _p("DEMUC", "Munich", 48.354, 11.786, 1, "MUC", "85356"),
    "HAM": _p("DEHAM", "Hamburg", 53.630, 9.988, 1, "HAM", "22335"),
    "DUS": _p("DEDUS", "Dusseldorf", 51.289, 6.767, 1, "DUS", "40474"),
    "LEJ": _p("DELEJ", "Leipzig", 51.424, 12.236, 1, "LEJ", "04435"),
    "VIE": _p("ATVIE", "Vienna", 48.110, 16.570, 1, "VIE", "1300"),
    "ZRH": _p("CHZRH", "Zurich", 47.458, 8.548, 1, "ZRH", "8058"),
    "AMS": _p("NLAMS", "Amsterdam", 52.310, 4.768, 1, "AMS", "1118"),
}
OVERSEAS_AIRPORTS: tuple[Place, ...] = (
    _p("CNSHA", "Shanghai", 31.144, 121.808, 8, "PVG", "201202"),
    _p("HKHKG", "Hong Kong", 22.308, 113.918, 8, "HKG", "999077"),
    _p("SGSIN", "Singapore", 1.364, 103.991, 8, "SIN", "819663"),
    _p("KRSEL", "Seoul", 37.460, 126.440, 9, "ICN", "22382"),
    _p("JPTYO", "Tokyo", 35.772, 140.393, 9, "NRT", "282-0004"),
    _p("CNPEK", "Beijing", 40.080, 116.584, 8, "PEK", "101317"),
    _p("USNYC", "New York", 40.641, -73.778, -5, "JFK", "11430"),
    _p("USCHI", "Chicago", 41.974, -87.907, -6, "ORD", "60666"),
    _p("USATL", "Atlanta", 33.640, -84.427, -5, "ATL", "30320"),
    _p("USLAX", "Los Angeles", 33.942, -118.408, -8, "LAX", "90045"),
    _p("CATOR", "Toronto", 43.678, -79.625, -5, "YYZ", "L5P 1B2"),
    _p("MXMEX", "Mexico City", 19.436, -99.072, -6, "MEX", "15620"),
    _p("BRSAO", "Sao Paulo", -23.435, -46.473, -3, "GRU", "07190-100"),
    _p("AEDXB", "Dubai", 25.253, 55.364, 4, "DXB", "00000"),
    _p("INBOM", "Mumbai", 19.090, 72.866, 5.5, "BOM", "400099"),
    _p("ZAJNB", "Johannesburg", -26.139, 28.246, 2, "JNB", "1627"),
)
AIR_HUBS: tuple[Place, ...] = (
    _p("AEDXB", "Dubai", 25.253, 55.364, 4, "DXB"),
    _p("QADOH", "Doha", 25.273, 51.608, 3, "DOH"),
    _p("TRIST", "Istanbul", 41.275, 28.752, 3, "IST"),
    _p("LULUX", "Luxembourg", 49.626, 6.212, 1, "LUX"),
)

# --- rail terminals ----------------------------------------------------------------------------
EU_RAIL_TERMINALS: tuple[Place, ...] = (
    _p("DEDUI", "Duisburg", 51.435, 6.762, 1, pc="47119"),
    _p("DEHAM", "Hamburg", 53.520, 10.010, 1, pc="21107"),
    _p("PLMAL", "Malaszewicze", 52.039, 23.529, 1, pc="21-540"),
    _p("ATVIE", "Vienna", 48.170, 16.440, 1, pc="1110"),
)
OVERSEAS_RAIL_TERMINALS: tuple[Place, ...] = (
    _p("CNCKG", "Chongqing", 29.563, 106.551, 8, pc="400000"),
    _p("CNCTU", "Chengdu", 30.572, 104.066, 8, pc="610000"),
    _p("CNWUH", "Wuhan", 30.593, 114.305, 8, pc="430000"),
    _p("CNCGO", "Zhengzhou", 34.747, 113.625, 8, pc="450000"),
    _p("CNXIY", "Xi'an", 34.341, 108.940, 8, pc="710000"),
)

# --- European cities for road transport and local pickup / delivery ------------------------------
EU_ROAD_CITIES: tuple[Place, ...] = (
    _p("FRPAR", "Paris", 48.857, 2.352, 1, pc="75001"),
    _p("FRLYS", "Lyon", 45.764, 4.836, 1, pc="69002"),
    _p("ITMIL", "Milan", 45.464, 9.190, 1, pc="20121"),
    _p("ITTRN", "Turin", 45.070, 7.687, 1, pc="10121"),
    _p("ESMAD", "Madrid", 40.417, -3.704, 1, pc="28013"),
    _p("ESBCN", "Barcelona", 41.385, 2.173, 1, pc="08002"),
    _p("PLWAW", "Warsaw", 52.230, 21.012, 1, pc="00-001"),
    _p("PLPOZ", "Poznan", 52.406, 16.925, 1, pc="61-001"),
    _p("CZPRG", "Prague", 50.076, 14.438, 1, pc="110 00"),
    _p("HUBUD", "Budapest", 47.498, 19.040, 1, pc="1051"),
    _p("DKCPH", "Copenhagen", 55.676, 12.568, 1, pc="1050"),
    _p("SESTO", "Stockholm", 59.329, 18.069, 1, pc="111 20"),
    _p("BEBRU", "Brussels", 50.850, 4.352, 1, pc="1000"),
    _p("SKBTS", "Bratislava", 48.149, 17.107, 1, pc="811 01"),
    _p("SILJU", "Ljubljana", 46.057, 14.506, 1, pc="1000"),
    _p("GBLON", "London", 51.507, -0.128, 0, pc="EC1A 1BB"),
)


@dataclass(frozen=True, slots=True)
class Office:
    code: str
    name: str
    airport: str  # key of EU_AIRPORTS
    sea_ports: tuple[str, ...]  # UN/LOCODEs of EU_SEA_PORTS
    rail_terminal: str  # UN/LOCODE of EU_RAIL_TERMINALS
    cities: tuple[Place, ...]  # pickup / delivery places of the region


OFFICES: tuple[Office, ...] = (
    Office("HAM", "Hamburg", "HAM", ("DEHAM", "DEBRV"), "DEHAM", (
        _p("DEHAM", "Hamburg", 53.551, 9.994, 1, pc="20457"),
        _p("DELBC", "Luebeck", 53.866, 10.687, 1, pc="23552"),
        _p("DEKEL", "Kiel", 54.323, 10.123, 1, pc="24103"),
    )),
    Office("BRE", "Bremen", "HAM", ("DEBRV", "DEHAM"), "DEHAM", (
        _p("DEBRE", "Bremen", 53.079, 8.802, 1, pc="28195"),
        _p("DEOLO", "Oldenburg", 53.144, 8.214, 1, pc="26122"),
    )),
    Office("FRA", "Frankfurt", "FRA", ("DEHAM", "NLRTM", "BEANR"), "DEDUI", (
        _p("DEFRA", "Frankfurt am Main", 50.110, 8.682, 1, pc="60311"),
        _p("DEMAI", "Mainz", 49.993, 8.247, 1, pc="55116"),
        _p("DEDAR", "Darmstadt", 49.873, 8.651, 1, pc="64283"),
        _p("DEWIB", "Wiesbaden", 50.078, 8.240, 1, pc="65183"),
    )),
    Office("MUC", "Munich", "MUC", ("DEHAM", "ITGOA", "DEBRV"), "ATVIE", (
        _p("DEMUC", "Munich", 48.135, 11.582, 1, pc="80331"),
        _p("DEAGB", "Augsburg", 48.371, 10.898, 1, pc="86150"),
        _p("DEING", "Ingolstadt", 48.766, 11.426, 1, pc="85049"),
    )),
    Office("DUS", "Dusseldorf", "DUS", ("NLRTM", "BEANR", "DEHAM"), "DEDUI", (
        _p("DEDUS", "Dusseldorf", 51.228, 6.774, 1, pc="40213"),
        _p("DECGN", "Cologne", 50.938, 6.960, 1, pc="50667"),
        _p("DEESS", "Essen", 51.456, 7.012, 1, pc="45127"),
        _p("DEDUI", "Duisburg", 51.435, 6.762, 1, pc="47051"),
    )),
    Office("VIE", "Vienna", "VIE", ("DEHAM", "ITGOA", "PLGDN"), "ATVIE", (
        _p("ATVIE", "Vienna", 48.208, 16.373, 1, pc="1010"),
        _p("ATLNZ", "Linz", 48.306, 14.286, 1, pc="4020"),
        _p("ATGRZ", "Graz", 47.071, 15.440, 1, pc="8010"),
    )),
    Office("ZRH", "Zurich", "ZRH", ("NLRTM", "ITGOA", "DEHAM"), "DEDUI", (
        _p("CHZRH", "Zurich", 47.377, 8.540, 1, pc="8001"),
        _p("CHBSL", "Basel", 47.560, 7.589, 1, pc="4051"),
        _p("CHWIN", "Winterthur", 47.500, 8.724, 1, pc="8400"),
    )),
    Office("RTM", "Rotterdam", "AMS", ("NLRTM", "BEANR"), "DEDUI", (
        _p("NLRTM", "Rotterdam", 51.924, 4.478, 1, pc="3011"),
        _p("NLEIN", "Eindhoven", 51.441, 5.470, 1, pc="5611"),
        _p("NLUTC", "Utrecht", 52.091, 5.122, 1, pc="3511"),
    )),
)
OFFICE_WEIGHTS: tuple[int, ...] = (22, 8, 18, 14, 14, 9, 8, 7)

COUNTRY_NAMES: dict[str, str] = {
    "DE": "Germany", "AT": "Austria", "CH": "Switzerland", "NL": "Netherlands", "BE": "Belgium",
    "FR": "France", "IT": "Italy", "PL": "Poland", "GB": "United Kingdom", "ES": "Spain",
    "CZ": "Czech Republic", "HU": "Hungary", "DK": "Denmark", "SE": "Sweden", "SK": "Slovakia",
    "SI": "Slovenia", "CN": "China", "SG": "Singapore", "KR": "Korea, Republic of", "HK": "Hong Kong",
    "JP": "Japan", "TW": "Taiwan", "VN": "Viet Nam", "IN": "India", "AE": "United Arab Emirates",
    "US": "United States", "CA": "Canada", "BR": "Brazil", "MX": "Mexico", "ZA": "South Africa",
    "AU": "Australia", "QA": "Qatar", "TR": "Turkey", "LU": "Luxembourg", "MY": "Malaysia",
    "LK": "Sri Lanka", "MA": "Morocco", "PA": "Panama",
}

EU_COUNTRIES = frozenset({"DE", "AT", "NL", "BE", "FR", "IT", "PL", "ES", "CZ", "HU", "DK", "SE", "SK", "SI"})


def sea_port(unloc: str) -> Place:
    return next(p for p in EU_SEA_PORTS if p.unloc == unloc)


def rail_terminal(unloc: str) -> Place:
    return next(p for p in EU_RAIL_TERMINALS if p.unloc == unloc)
