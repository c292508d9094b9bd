"""The import graph, read from the source (every import statement, those inside functions too):
no cycle among the modules of ``freight_pipeline``, no package importing one of a higher layer
(:data:`LAYERS`, the one statement of the layer order), and neither the product nor ``bench/``
imports the tests.

``from package import name`` is an edge to ``package.name`` when that is a module, else to
``package`` (its ``__init__``): a module importing a sibling through its package is not a cycle,
since Python initializes a package before any of its modules.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Mapping
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PRODUCT = "freight_pipeline"
TESTS = "freight_pipeline_tests"

LAYERS: tuple[frozenset[str], ...] = (
    frozenset({"<package>", "config", "cursors", "datetimes", "process_end", "text"}),
    frozenset({"client", "simulator", "normalize"}),
    frozenset({"warehouse"}),
    frozenset({"lake"}),
    frozenset({"sync", "dashboard"}),
    frozenset({"marts", "checks"}),
    frozenset({"alerts"}),
    frozenset({"job"}),
    frozenset({"defs"}),
    frozenset({"definitions"}),
    frozenset({"commands"}),
    frozenset({"cli"}),
)
"""The packages (and top-level modules) of ``freight_pipeline``, lowest layer first. A package imports
only from its own and lower layers, never from another package of its own layer: the client, the
simulator and normalization know nothing of each other; the warehouse (with the storage boundary it
defines) stores rows; the lake is one of its backends; the sync and the dashboard use them; the
marts' build and the warehouse checks follow the sync; the alerts say what a run's steps and checks
found; the job (streams, checks, marts, publish, alerts: the run without Dagster) puts them together;
the Dagster definitions sit on top of the cores, and the commands and the CLI on top of everything."""

LAYER_IMPORTS_ALLOWED_FOR_NOW: dict[tuple[str, str], str] = {}
"""Package edges that still break the layer order. Shrinks only: an edge that is gone must leave."""

TEST_IMPORTS_ALLOWED_FOR_NOW: dict[str, str] = {}
"""Files outside the tests that still import them. Shrinks only: a file that no longer does must leave."""


def module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imported(path: Path, name: str, modules: Iterable[str] = ()) -> set[str]:
    """Every module ``path`` (module ``name``) imports, relative imports resolved: for ``from M import
    x``, ``M.x`` when that is one of ``modules``, else ``M``."""
    known = set(modules)
    found: set[str] = set()
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            module = ".".join([*base, *([node.module] if node.module else [])])
            found.update(f"{module}.{alias.name}" if f"{module}.{alias.name}" in known else module
                         for alias in node.names)
    return found


def product_graph() -> dict[str, set[str]]:
    """Module -> the product modules it imports."""
    files = {module_name(path, REPO): path for path in (REPO / PRODUCT).rglob("*.py")}
    return {name: {m for m in imported(path, name, files) if m in files and m != name}
            for name, path in files.items()}


def cycles(graph: Mapping[str, Iterable[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module, and modules importing themselves."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:  # Tarjan; the graph is a few hundred modules deep at most
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in graph.get(node, ()):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1 or node in graph.get(node, ()):
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_the_cycle_finder_finds_cycles() -> None:
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"a"}}) == [["a"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_the_graph_sees_the_product() -> None:
    graph = product_graph()
    assert len(graph) > 100
    assert "freight_pipeline.warehouse.meta" in graph["freight_pipeline.warehouse.writes"]  # via its package
    assert "freight_pipeline.job.run" in graph["freight_pipeline.defs.freight_job"]


def test_no_import_cycle_among_the_product_modules() -> None:
    assert cycles(product_graph()) == []


def package_of(module: str) -> str:
    """``freight_pipeline.sync.runner`` -> ``sync``; the package's own ``__init__`` -> ``<package>``."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "<package>"


def layer_breaks(graph: Mapping[str, Iterable[str]]) -> dict[tuple[str, str], list[str]]:
    """(importer's package, imported package) -> the module edges that break the layer order."""
    layer = {package: level for level, packages in enumerate(LAYERS) for package in packages}
    breaks: dict[tuple[str, str], list[str]] = {}
    for module, targets in graph.items():
        for target in targets:
            source, imported_package = package_of(module), package_of(target)
            if source != imported_package and layer[imported_package] >= layer[source]:
                breaks.setdefault((source, imported_package), []).append(f"{module} -> {target}")
    return breaks


def test_every_package_has_a_layer() -> None:
    packages = {package_of(module) for module in product_graph()}
    assert packages == set().union(*LAYERS)


def test_the_layer_check_finds_upward_and_sideways_imports() -> None:
    graph = {"freight_pipeline.warehouse.store": {"freight_pipeline.sync.runner", "freight_pipeline.normalize.schema"},
             "freight_pipeline.client.calls": {"freight_pipeline.simulator.store"}}
    assert set(layer_breaks(graph)) == {("warehouse", "sync"), ("client", "simulator")}


def test_no_package_imports_a_higher_layer_or_a_sibling() -> None:
    breaks = layer_breaks(product_graph())
    assert set(breaks) == set(LAYER_IMPORTS_ALLOWED_FOR_NOW), {edge: breaks[edge][:3] for edge in breaks}


def test_neither_the_product_nor_bench_imports_the_tests() -> None:
    offenders = set()
    for path in [*(REPO / PRODUCT).rglob("*.py"), *(REPO / "bench").rglob("*.py")]:
        name = module_name(path, REPO)
        if any(m == TESTS or m.startswith(f"{TESTS}.") for m in imported(path, name)):
            offenders.add(path.relative_to(REPO).as_posix())
    assert offenders == set(TEST_IMPORTS_ALLOWED_FOR_NOW)
