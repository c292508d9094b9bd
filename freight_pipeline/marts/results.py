"""What a dbt build did, read from its run results: one line of summary, the warnings, and the message
of a failed build (:class:`DbtBuildFailed`) naming its failed and skipped nodes."""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Self

from freight_pipeline.marts.project import RUN_RESULTS

FIRST_LINE_LIMIT = 380
"""Longest first line of ``DbtBuildFailed`` (fewer names per group until it fits)."""
DETAIL_LINES = 20
"""Failed nodes described one per line after the first line; the rest are counted."""


_KINDS = {"model": "model", "test": "test", "unit_test": "unit test", "seed": "seed", "snapshot": "snapshot"}
_FAILED = {"error": "errored", "fail": "failed", "runtime error": "errored"}


@dataclass(frozen=True)
class NodeResult:
    """One node of dbt's ``run_results.json``."""

    unique_id: str
    status: str
    message: str
    failures: int | None
    seconds: float | None = None
    """dbt's execution time of the node."""
    rows: int | None = None
    """Rows the node's statement affected, when the adapter says (``adapter_response.rows_affected``)."""

    @property
    def kind(self) -> str:
        resource = self.unique_id.split(".", 1)[0]
        return _KINDS.get(resource, resource.replace("_", " "))

    @property
    def name(self) -> str:
        """``model.pkg.fct_x`` -> ``fct_x``; ``test.pkg.not_null_x.1a2b3c4d5e`` -> ``not_null_x``;
        ``unit_test.pkg.fct_x.test_y`` -> ``fct_x.test_y``."""
        parts = self.unique_id.split(".")[2:]
        if self.unique_id.startswith("test.") and len(parts) > 1:
            parts = parts[:-1]  # the hash dbt appends to a data test's id
        return ".".join(parts) or self.unique_id

    @property
    def failed(self) -> bool:
        return self.status in _FAILED

    @property
    def verb(self) -> str:
        if self.status == "error" and self.kind == "model":
            return "failed"
        return _FAILED.get(self.status, self.status)


def node_results(run_results: Mapping[str, Any]) -> list[NodeResult]:
    return [
        NodeResult(
            str(result.get("unique_id", "?")),
            str(result.get("status", "?")),
            " ".join(str(result.get("message") or "").split()),
            result.get("failures"),
            result.get("execution_time"),
            (result.get("adapter_response") or {}).get("rows_affected"),
        )
        for result in run_results.get("results", [])
    ]


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def _said(node: NodeResult) -> str:
    """dbt's message of the node (``Got 1 result, configured to fail if != 0``), else its failure count."""
    if node.message:
        return node.message
    return "" if node.failures is None else _plural(node.failures, "result")


def _summary(nodes: Sequence[NodeResult], names: int) -> str:
    """``2 tests failed (a, b), 3 models skipped (x, y and 1 more), 40 tests skipped``: the failed
    nodes and skipped models, seeds and snapshots named (at most ``names`` per group), skipped tests
    counted."""
    groups: dict[tuple[str, str], list[str]] = {}
    for node in nodes:
        if node.failed or node.status == "skipped":
            groups.setdefault((node.kind, node.verb), []).append(node.name)

    def counted_only(kind: str, verb: str) -> bool:
        return verb == "skipped" and kind in ("test", "unit test")

    # failures first, then skipped models, then skipped tests (stable: in run order within each)
    ordered = sorted(groups.items(), key=lambda item: (item[0][1] == "skipped", counted_only(*item[0])))
    parts = []
    for (kind, verb), members in ordered:
        head = f"{_plural(len(members), kind)} {verb}"
        if counted_only(kind, verb):
            parts.append(head)
            continue
        shown = ", ".join(members[:names])
        more = f" and {len(members) - names} more" if len(members) > names else ""
        parts.append(f"{head} ({shown}{more})")
    return ", ".join(parts)


def build_failure_message(
    run_results: Mapping[str, Any] | None, exit_code: int | None, dbt_error: str = "", *, first_error: str | None = None
) -> str:
    """The message of ``DbtBuildFailed``: a first line naming the failed and skipped nodes (short
    enough for one log line), then one line per failed node with dbt's message.

    Without run results (dbt stopped before running any node: a compile error, a locked database)
    the first line gives dbt's first error instead: ``first_error`` when given (dbt's own exception,
    from a build in the worker), else read from ``dbt_error`` (the text of dagster-dbt's error, whose
    end lists the errors dbt logged).
    """
    nodes = node_results(run_results or {})
    failed = [node for node in nodes if node.failed]
    if not failed:
        code = "" if exit_code is None else f" with exit code {exit_code}"
        reason = _first_dbt_error(dbt_error) if first_error is None else first_error[:FIRST_LINE_LIMIT]
        return f"dbt build failed{code}" + (f": {reason}" if reason else "") + (f"\n{dbt_error}" if dbt_error else "")
    first = ""
    for names in (3, 2, 1):
        first = f"dbt build failed: {_summary(nodes, names)}"
        if len(first) <= FIRST_LINE_LIMIT:
            break
    details = [f"  {node.kind} {node.name} {node.verb}: {_said(node)}".rstrip(": ") for node in failed]
    if len(details) > DETAIL_LINES:
        details = [*details[:DETAIL_LINES], f"  ... and {len(details) - DETAIL_LINES} more failed"]
    return "\n".join([first, *details])


def _first_dbt_error(text: str) -> str:
    """The first informative line of the errors dagster-dbt parsed from dbt's log."""
    _, found, errors = text.partition("Errors parsed from dbt logs:")
    return first_error_line(errors) if found else ""


_BARE_HEADER = re.compile(r"(?:\w+: )?[A-Z][a-z]+(?: [A-Z][a-z]+)* Error")
"""dbt's exception header alone (``Runtime Error``, ``Database Error``; from the worker after the exception's type:
``DbtRuntimeError: Runtime Error``): what failed is on the line after it."""


def first_error_line(text: str) -> str:
    """The first line of dbt's error ``text`` that says what failed (past ``Encountered an error:``), a bare header
    joined with the line after it (``DbtRuntimeError: Runtime Error: Out of Memory Error: ...``)."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    informative = [line for line in lines if not line.startswith("Encountered an error")] or lines or [""]
    if len(informative) > 1 and _BARE_HEADER.fullmatch(informative[0]):
        return f"{informative[0]}: {informative[1]}"[:FIRST_LINE_LIMIT]
    return informative[0][:FIRST_LINE_LIMIT]


def build_summary(run_results: Mapping[str, Any] | None) -> str:
    """``27 models, 156 data tests: 155 passed, 1 warned``: what the build did, in one line."""
    nodes = node_results(run_results or {})
    tests = Counter(node.status for node in nodes if node.kind == "test")
    statuses = ", ".join(f"{tests[status]} {word}" for status, word in _TEST_STATUS.items() if tests[status])
    models = sum(node.kind == "model" for node in nodes)
    return f"{models} models, {tests.total()} data tests" + (f": {statuses}" if statuses else "")


_TEST_STATUS = {"pass": "passed", "warn": "warned", "fail": "failed", "error": "errored", "skipped": "skipped"}


def build_warnings(run_results: Mapping[str, Any] | None) -> list[str]:
    """One line per node that warned (a test of severity warn that found rows): its name and dbt's
    message (``Got 1 result, configured to warn if != 0``)."""
    return [
        f"dbt {node.kind} {node.name} warned (severity warn, the build goes on): {_said(node)}".rstrip(": ")
        for node in node_results(run_results or {})
        if node.status == "warn"
    ]


class DbtBuildFailed(RuntimeError):
    """A dbt build that failed; the first line of the message names the failed and skipped nodes."""

    @classmethod
    def from_target(
        cls, target: Path, exit_code: int | None, dbt_error: str = "", *, first_error: str | None = None
    ) -> Self:
        """From the build's ``run_results.json`` in ``target``; the last line points at dbt's log there."""
        message = build_failure_message(read_run_results(target), exit_code, dbt_error, first_error=first_error)
        log = target / "dbt.log"
        return cls(message + (f"\n  dbt log: {log}" if log.is_file() else ""))


def read_run_results(target: Path) -> dict[str, Any] | None:
    """dbt's ``run_results.json`` in ``target``, or None when dbt wrote none (or an unreadable one)."""
    try:
        results = json.loads((target / RUN_RESULTS).read_text())
    except (OSError, ValueError):
        return None
    return results if isinstance(results, dict) else None
