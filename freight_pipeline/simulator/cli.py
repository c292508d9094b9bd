"""``freight-pipeline simulator``: serve the bundled freight-service simulator until stopped."""

from __future__ import annotations

import argparse
import ipaddress
import sys
import time
from typing import Any

from freight_pipeline.simulator.clock import clock_timezone, zone_info
from freight_pipeline.simulator.config import (
    CALL_KINDS,
    DEFAULT_UTC_OFFSET,
    EFILE_REFERENCE_SHAPES,
    MAX_SHIPMENTS,
    FaultConfig,
    SimulatorConfig,
    UserConfig,
    default_users,
)
from freight_pipeline.simulator.releases import CURRENT, NESTED, NEXT, RELEASES
from freight_pipeline.text import int_between, port_parser

shipment_count = int_between(0, MAX_SHIPMENTS, "generated ids must fit int32")
"""argparse type of ``--shipments``."""
_at_least_one = int_between(1)
"""argparse type of a positive count (``--max-page-size``, ``--max-in-flight``)."""


def _offset_change(text: str) -> tuple[str, str]:
    """argparse type of ``--offset-change INSTANT=OFFSET``, e.g. ``2026-10-25T03:00:00+02:00=+01:00``."""
    instant, sep, offset = text.partition("=")
    if not sep:
        raise argparse.ArgumentTypeError(f"must be INSTANT=OFFSET (2026-10-25T03:00:00+02:00=+01:00), got {text!r}")
    try:
        clock_timezone("+00:00", ((instant, offset),))
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return instant, offset


def _zone_name(text: str) -> str:
    """argparse type of ``--naive-clock ZONE``: an IANA time zone name (``Europe/Berlin``)."""
    try:
        zone_info(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text


def _tail(text: str) -> tuple[float, float]:
    """argparse type of ``--tail RATE:MS``, e.g. ``0.02:5000`` (2 % of requests answered 5 s later)."""
    rate, sep, ms = text.partition(":")
    try:
        share, delay = float(rate), float(ms)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be RATE:MS (0.02:5000), got {text!r}") from None
    if not sep or not 0 <= share <= 1 or delay < 0:
        raise argparse.ArgumentTypeError(f"must be RATE:MS with RATE in [0, 1] and MS >= 0, got {text!r}")
    return share, delay


def _path_prefix(text: str) -> str:
    if not text.startswith("/"):
        raise argparse.ArgumentTypeError(f"must be a path starting with '/', got {text!r}")
    return text


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


READING_SWITCHES: tuple[tuple[str, str], ...] = (
    ("--strict-criteria", "400 for criterion forms the spec does not name (IN takes values, OR identifiers, others "
                          "value) and for a shipment, memo or E-File lookup without a criterion"),
    ("--memo-lookup-by-one", "400 for a memo lookup of several SHIPMENT_NUMBER values (a service reading one shipment "
                             "at a time)"),
    ("--no-content-when-empty", "204 No Content for a shipment's events or main-carriage legs when it has none (A10: "
                                "200 [])"),
    ("--memo-order-refused", "400 for a memo lookup with order_by (a service whose memo lookup has no ID key)"),
    ("--scroll-page-object", "the two scrolls answer Spring Data's page object, {content: [...], totalElements, "
                             "totalPages, number, size}, paged by page and size (page_no and page_size ignored)"),
)
"""Service modes that read requests as another service would: switched on by their flag (each a ``FaultConfig``
field of the flag's name)."""


def _field_of(flag: str) -> str:
    """The ``FaultConfig`` field (and the parsed argument) of a ``--flag-name``."""
    return flag.removeprefix("--").replace("-", "_")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--shipments",
        type=shipment_count,
        default=2000,
        help=f"number of generated shipments, 0 to {MAX_SHIPMENTS} (default 2000)",
    )
    parser.add_argument("--seed", type=int, default=42, help="data generator seed (default 42)")
    parser.add_argument(
        "--host", default="127.0.0.1", help="interface to bind (default 127.0.0.1; only loopback with --control)"
    )
    parser.add_argument("--port", type=port_parser(0), default=8765, help="port (default 8765; 0 picks a free one)")
    parser.add_argument(
        "--utc-offset", default=None, help=f"the service's UTC offset (default {DEFAULT_UTC_OFFSET})"
    )
    parser.add_argument(
        "--offset-change",
        type=_offset_change,
        action="append",
        default=[],
        metavar="INSTANT=OFFSET",
        help="from INSTANT on, the service's UTC offset is OFFSET (summer time: "
        "2026-10-25T03:00:00+02:00=+01:00); repeatable, in time order",
    )
    parser.add_argument(
        "--start",
        default=None,
        metavar="INSTANT",
        help="the simulated clock's start, ISO 8601 (default 2026-11-01T08:00:00 in the service's offset)",
    )
    parser.add_argument("--token-lifetime", type=float, default=86400, help="token lifetime in seconds (86400)")
    parser.add_argument(
        "--user",
        action="append",
        default=[],
        metavar="NAME:PASSWORD[:PERM,PERM]",
        help="an extra user; permissions as in A16 (default *); repeatable",
    )
    faults = parser.add_argument_group("fault injection")
    faults.add_argument("--fault-seed", type=int, default=0, help="seed of the fault decisions (default 0)")
    faults.add_argument("--latency-ms", type=float, default=0.0, help="added latency per request")
    faults.add_argument("--latency-jitter-ms", type=float, default=0.0, help="latency jitter, +/- ms")
    faults.add_argument("--fault-rate", type=float, default=0.0, help="share of 502/503/504 HTML answers")
    faults.add_argument("--rate-limit-rate", type=float, default=0.0, help="share of 429 answers")
    faults.add_argument("--retry-after", type=int, default=1, help="Retry-After seconds of 429 answers (default 1)")
    faults.add_argument("--drop-rate", type=float, default=0.0, help="share of connections dropped unanswered")
    faults.add_argument(
        "--modify-during-paging-rate",
        type=float,
        default=0.0,
        help="chance that a shipment lookup page with page_no > 0 first modifies shipments",
    )
    faults.add_argument("--modify-during-paging-count", type=int, default=1, help="shipments modified then")
    faults.add_argument(
        "--exempt-auth", action="store_true", help="never inject faults into /auth/token (nor count it in flight)"
    )
    faults.add_argument(
        "--fault-path",
        action="append",
        default=[],
        metavar="TEMPLATE",
        help="inject the faults above only into this path template (/service/shipment/lookup); repeatable",
    )
    faults.add_argument(
        "--tail", type=_tail, default=(0.0, 0.0), metavar="RATE:MS",
        help="a latency tail: RATE of the requests answered MS later, correctly (0.02:5000); "
        "its own random sequence of --fault-seed",
    )
    faults.add_argument(
        "--tail-kind", action="append", default=[], choices=tuple(CALL_KINDS), metavar="KIND",
        help=f"limit the tail to this kind of call, one of {', '.join(CALL_KINDS)} (default every kind); repeatable",
    )
    modes = parser.add_argument_group("behaviours of real services")
    modes.add_argument(
        "--max-page-size", type=_at_least_one, default=None, metavar="N",
        help="serve at most N rows per lookup or scroll page, whatever page_size asks",
    )
    modes.add_argument(
        "--fixed-page-size", type=_at_least_one, default=None, metavar="N",
        help="serve N rows per lookup or scroll page whatever page_size asks, more or fewer (page_size ignored)",
    )
    modes.add_argument(
        "--page-size-limit", type=_at_least_one, default=None, metavar="N",
        help="refuse (400) a lookup or scroll asking for more than N rows per page",
    )
    modes.add_argument(
        "--max-in-flight", type=_at_least_one, default=None, metavar="N",
        help="answer 429 at once to a request arriving while N are being processed",
    )
    modes.add_argument(
        "--no-in-flight-retry-after", action="store_true",
        help="the 429 of --max-in-flight comes without Retry-After",
    )
    modes.add_argument(
        "--forbid", type=_path_prefix, action="append", default=[], metavar="PREFIX",
        help="answer 403 to every user on paths starting with PREFIX (/service/efile); repeatable",
    )
    for flag, text in READING_SWITCHES:
        modes.add_argument(flag, action="store_true", help=text)
    modes.add_argument(
        "--no-scroll-headers", dest="scroll_headers", action="store_false",
        help="the two scrolls (code conversions, memo lines) answer without X-Page-Count and X-Row-Count "
        "(the spec promises them for lookups only)",
    )
    modes.add_argument(
        "--no-scroll-paging", dest="scroll_paging", action="store_false",
        help="the two scrolls ignore page_no and page_size and answer every record at once",
    )
    modes.add_argument(
        "--scroll-first-rows", type=_at_least_one, default=None, metavar="N",
        help="the two scrolls ignore page_no and page_size and answer their first N rows to every request "
        "(a service paging them by parameters of its own; with --no-scroll-headers nothing tells more exist)",
    )
    modes.add_argument(
        "--naive-clock", type=_zone_name, default=None, metavar="ZONE",
        help="send every date-time without a UTC offset, as the wall clock of ZONE (an IANA name: "
        "Europe/Berlin), whose summer time the clock follows (instead of --utc-offset, --offset-change)",
    )
    modes.add_argument(
        "--fractional-stamps", action="store_true",
        help="shipments' last_modified_date_time and LAST_MODIFIED_TIME carry milliseconds "
        "(2026-11-01T10:15:30.250+01:00, as many Java services write them), and the lookup's criteria on "
        "LAST_MODIFIED_TIME compare them (EQUALS 10:15:30 matches 10:15:30.000 only)",
    )
    modes.add_argument(
        "--utc-stamps", action="store_true",
        help="write every date-time in UTC (2026-11-01T09:15:30Z, as a Java service serialising an Instant does) "
        "while the lookup keys LAST_MODIFIED_DATE / _TIME stay its wall clock at --utc-offset",
    )
    modes.add_argument(
        "--efile-reference-shape", choices=EFILE_REFERENCE_SHAPES, default="type",
        help="E-File references as {type, value} (default) or {reference_key: SHIPMENT_ID, reference}",
    )
    modes.add_argument(
        "--json-bom", action="store_true",
        help="begin every JSON answer with a UTF-8 byte-order mark (as some .NET and Java services do)",
    )
    modes.add_argument(
        "--json-latin1", action="store_true",
        help="write every JSON answer in ISO-8859-1, saying so in its Content-Type (an older Java service's default)",
    )
    modes.add_argument(
        "--redirect-to", default="", metavar="URL",
        help="answer every request 308 Permanent Redirect to the same path at URL (a service that moved)",
    )
    modes.add_argument(
        "--token-activation-ms", type=float, default=0.0, metavar="MS",
        help="refuse a token (401) until MS after it was issued (a service whose nodes learn of it late)",
    )
    modes.add_argument(
        "--token-echo", action="store_true",
        help="answer every /auth/token request 422 with the body it got echoed, escaped as Python's json does "
        "(FastAPI's answer to a token request of another shape)",
    )
    parser.add_argument(
        "--release", choices=RELEASES, default=CURRENT,
        help=f"the release of the interface it answers in (default {CURRENT}, the spec's current one; {NEXT} "
        f"renames, drops and adds top-level fields of documents, events and air legs; {NESTED} also renames and "
        "retypes fields inside goods, addresses, containers, legs, events and memo lines: docs/real-services.md); "
        "switched while running with POST /_control/release",
    )
    parser.add_argument(
        "--control",
        action="store_true",
        help="enable the unauthenticated HTTP control surface under /_control (loopback --host only); "
        "POST /_control/reset plays a nightly reset: the data back to the snapshot taken at the start "
        "(or by POST /_control/snapshot), id counters included, the clock going on",
    )
    parser.add_argument(
        "--frozen-clock",
        action="store_true",
        help="the simulated clock moves only when advanced (default: it follows real time from its start)",
    )


def _parse_user(text: str) -> UserConfig:
    parts = text.split(":", 2)
    if len(parts) < 2 or not parts[0] or not parts[1]:
        raise ValueError(f"--user must be NAME:PASSWORD[:PERM,PERM], got {parts[0]!r}:...")
    permissions = frozenset(p.strip() for p in parts[2].split(",") if p.strip()) if len(parts) == 3 else {"*"}
    return UserConfig(parts[0], parts[1], frozenset(permissions))


def config_from_args(args: argparse.Namespace) -> SimulatorConfig:
    """The service configuration; ValueError for a combination argparse cannot check alone."""
    if args.control and not is_loopback(args.host):
        raise ValueError(
            f"--control needs a loopback --host (127.0.0.1, ::1, localhost), got {args.host!r}: "
            "the control surface has no authentication"
        )
    fault_config = FaultConfig(
        seed=args.fault_seed,
        latency_ms=args.latency_ms,
        latency_jitter_ms=args.latency_jitter_ms,
        server_error_rate=args.fault_rate,
        rate_limit_rate=args.rate_limit_rate,
        retry_after_s=args.retry_after,
        drop_rate=args.drop_rate,
        modify_during_paging_rate=args.modify_during_paging_rate,
        modify_during_paging_count=args.modify_during_paging_count,
        exempt_auth=args.exempt_auth,
        paths=frozenset(args.fault_path) if args.fault_path else None,
        max_page_size=args.max_page_size,
        fixed_page_size=args.fixed_page_size,
        page_size_limit=args.page_size_limit,
        max_in_flight=args.max_in_flight,
        in_flight_retry_after=not args.no_in_flight_retry_after,
        forbidden_prefixes=frozenset(args.forbid) if args.forbid else None,
        **{_field_of(flag): getattr(args, _field_of(flag)) for flag, _ in READING_SWITCHES},
        scroll_headers=args.scroll_headers,
        scroll_paging=args.scroll_paging,
        scroll_first_rows=args.scroll_first_rows,
        efile_reference_shape=args.efile_reference_shape,
        json_bom=args.json_bom,
        json_latin1=args.json_latin1,
        token_echo=args.token_echo,
        redirect_to=args.redirect_to,
        token_activation_ms=args.token_activation_ms,
        tail_rate=args.tail[0],
        tail_ms=args.tail[1],
        tail_kinds=frozenset(args.tail_kind) if args.tail_kind else None,
    )
    if args.naive_clock is not None and (args.utc_offset is not None or args.offset_change):
        raise ValueError("--naive-clock follows its zone's own rules: give no --utc-offset or --offset-change with it")
    users = default_users() + tuple(_parse_user(u) for u in args.user)
    return SimulatorConfig(
        users=users,
        token_lifetime_s=args.token_lifetime,
        faults=fault_config,
        control=args.control,
        shipments=args.shipments,
        seed=args.seed,
        utc_offset=args.utc_offset or DEFAULT_UTC_OFFSET,
        wall_clock=not args.frozen_clock,
        start=args.start,
        offset_changes=tuple(args.offset_change),
        naive_clock=args.naive_clock,
        fractional_stamps=args.fractional_stamps,
        utc_stamps=args.utc_stamps,
        release=args.release,
    )


def run(args: argparse.Namespace) -> int:
    from freight_pipeline.simulator.app import create_app
    from freight_pipeline.simulator.server import bind_socket, make_store, serve_forever

    try:
        config = config_from_args(args)
    except ValueError as exc:
        print(f"simulator: {exc}", file=sys.stderr)
        return 2
    started = time.monotonic()
    print(f"generating {config.shipments} shipments (seed {config.seed}) ...", file=sys.stderr, flush=True)
    store = make_store(config)
    try:
        sock = bind_socket(args.host, args.port)
    except OSError as exc:
        print(f"simulator: cannot bind {args.host}:{args.port}: {exc}", file=sys.stderr)
        return 1
    host, port = sock.getsockname()[:2]
    serve_forever(create_app(store, config), sock,
                  lambda: _announce(f"http://{host}:{port}", config, time.monotonic() - started))
    print("simulator stopped", file=sys.stderr, flush=True)
    return 0


def active_faults(faults: FaultConfig) -> dict[str, Any]:
    """The fault settings that differ from the defaults (with the seed when there are any)."""
    default = FaultConfig().to_dict()
    active = {name: value for name, value in faults.to_dict().items() if value != default[name] and name != "seed"}
    return {"seed": faults.seed, **active} if active else {}


def _announce(base_url: str, config: SimulatorConfig, seconds: float) -> None:
    lines = [f"freight simulator ready in {seconds:.1f} s", f"  base URL: {base_url}"]
    for user in config.users:
        what = "webhook (basic auth)" if "WEBHOOK" in user.roles else ", ".join(sorted(user.permissions))
        lines.append(f"  user: {user.username}  password: {user.password}  [{what}]")
    if config.release != CURRENT:
        lines.append(f"  release: {config.release} (not the spec's current {CURRENT})")
    if config.control:
        lines.append(f"  control surface: {base_url}/_control/stats (no auth)")
    if config.naive_clock is not None:
        lines.append(f"  clock: naive (date-times without a UTC offset), the wall clock of {config.naive_clock}"
                     + (f"; starts {config.start}" if config.start is not None else ""))
    elif config.start is not None or config.offset_changes:
        changes = "".join(f", {offset} from {instant}" for instant, offset in config.offset_changes)
        lines.append(f"  clock: starts {config.start or 'at the default instant'}; offset {config.utc_offset}{changes}")
    if config.fractional_stamps:
        lines.append("  stamps: last_modified_date_time and LAST_MODIFIED_TIME carry milliseconds")
    if config.utc_stamps:
        lines.append("  date-times: written in UTC (...Z), the lookup keys the service's wall clock")
    active = active_faults(config.faults)
    if active:
        lines.append("  faults: " + ", ".join(f"{name}={value}" for name, value in active.items()))
    lines.append("  stop with Ctrl-C")
    print("\n".join(lines), flush=True)
