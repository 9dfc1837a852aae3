"""The import graph of ``surrogate/`` between its subpackages and top-level modules is acyclic
and points down the layers (issue #14).

Every ``import`` / ``from ... import`` in every module is read with ``ast``, wherever it stands
(module level, inside functions, under ``if TYPE_CHECKING``), relative imports resolved. A unit
is a subpackage (``surrogate/model/``) or a top-level module (``surrogate/cli.py``);
``surrogate/__init__.py`` is the unit ``__init__``. Imports within one unit are not counted.
"""

from __future__ import annotations

import ast
from pathlib import Path

from surrogate.paths import REPO_ROOT

PACKAGE = REPO_ROOT / "surrogate"

# Lower first; a unit may import units of its own layer or below, never above. Within a layer
# only the cycle check applies. A new subpackage or top-level module must be placed here.
LAYERS = [
    {"__init__", "errors", "config", "paths", "atomic", "metrics", "estimate", "suites", "splits", "parallel", "cli_args",
     "background", "quat", "semi_implicit", "hand_names"},
    {"capture"},
    {"objects"},
    {"importers"},
    {"scenes"},
    {"model"},
    {"sim"},
    {"learn"},
    {"envs"},
    {"rig"},
    {"policies", "hybrid_mjcf"},  # hybrid_mjcf: surrogate.hybrid, the entry point the robot examples (bench) use
    {"baselines", "bench"},  # the end-to-end peer beside the benchmarks that score it (bench imports it, not back)
    {"training", "quickstart", "inspect", "cli"},
]

# The learned core never reaches up into stepping, training, environments, the rig or benchmarks.
MODEL_MUST_NOT_IMPORT = {"bench", "sim", "envs", "rig", "learn", "training"}


def _module_name(path: Path, package: Path) -> tuple[str, bool]:
    """(dotted module name, whether it is a package ``__init__``) of a file under ``package``."""
    parts = list(path.relative_to(package.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        return ".".join(parts[:-1]), True
    return ".".join(parts), False


def _unit(dotted: str) -> str:
    """The unit of a dotted module name: its first component below the package."""
    parts = dotted.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def units_of(package: Path) -> set[str]:
    """Top-level modules (``__init__`` included) and subpackages (folders holding Python files)."""
    return {p.stem for p in package.glob("*.py")} | {p.name for p in package.iterdir() if p.is_dir() and any(p.glob("*.py"))}


def import_edges(package: Path) -> list[tuple[str, str, str]]:
    """(from unit, to unit, "file:line module") for every import between two units of ``package``."""
    top = package.name
    units = units_of(package)
    edges = []
    for path in sorted(package.rglob("*.py")):
        name, is_pkg = _module_name(path, package)
        src = _unit(name)
        tree = ast.parse(path.read_text(), filename=str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = name.split(".") if is_pkg else name.split(".")[:-1]
                    base = base[: len(base) - (node.level - 1)]
                    mod = ".".join(base + ([node.module] if node.module else []))
                else:
                    mod = node.module or ""
                # ``from surrogate import cli`` names a unit; ``from surrogate import __version__`` the package
                targets = ([f"{mod}.{a.name}" if a.name in units else mod for a in node.names] if mod == top else [mod])
            else:
                continue
            for t in targets:
                if t == top or t.startswith(top + "."):
                    dst = _unit(t)
                    if dst != src:
                        edges.append((src, dst, f"{path.relative_to(package.parent)}:{node.lineno} {t}"))
    return edges


def find_cycle(edges) -> list[tuple[str, str, str]] | None:
    """One cycle of the unit graph as its edges (with where each import stands), or None."""
    graph = {}
    for s, d, where in edges:
        graph.setdefault(s, {}).setdefault(d, where)
    state, stack = {}, []

    def visit(u):
        state[u] = "open"
        for v in sorted(graph.get(u, {})):
            stack.append((u, v, graph[u][v]))
            if state.get(v) == "open":
                return stack[next(i for i, e in enumerate(stack) if e[0] == v):]
            if v not in state and (found := visit(v)):
                return found
            stack.pop()
        state[u] = "done"
        return None

    for u in sorted(graph):
        if u not in state and (found := visit(u)):
            return found
    return None


EDGES = import_edges(PACKAGE)


def test_the_scan_sees_imports_inside_functions_and_relative_imports(tmp_path):
    pkg = tmp_path / "pkg"
    for sub in ("a", "b"):
        (pkg / sub).mkdir(parents=True)
        (pkg / sub / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("")
    (pkg / "core.py").write_text("")
    (pkg / "a" / "x.py").write_text("from ..b import y\nfrom . import z\n")
    (pkg / "b" / "y.py").write_text("def f():\n    from ..a.x import g\n    from pkg import core\n")
    (pkg / "b" / "__init__.py").write_text("from pkg.core import thing\n")
    edges = import_edges(pkg)
    assert {(s, d) for s, d, _ in edges} == {("a", "b"), ("b", "a"), ("b", "core")}
    assert {(s, d) for s, d, _ in find_cycle(edges)} == {("a", "b"), ("b", "a")}
    assert find_cycle([e for e in edges if e[0] != "b" or e[1] != "a"]) is None
    # and on the real package: known edges, at module level and inside functions
    real = {(s, d) for s, d, _ in EDGES}
    assert {("sim", "model"), ("bench", "rig"), ("cli", "training")} <= real


def test_no_import_cycle_between_subpackages_and_modules():
    cycle = find_cycle(EDGES)
    assert cycle is None, "import cycle " + " -> ".join([cycle[0][0]] + [d for _, d, _ in cycle]) + ":\n" + "\n".join(
        f"  {s} -> {d}: {where}" for s, d, where in cycle)


def test_model_imports_nothing_above_it():
    bad = [where for s, d, where in EDGES if s == "model" and d in MODEL_MUST_NOT_IMPORT]
    assert not bad, "surrogate/model imports " + ", ".join(sorted(MODEL_MUST_NOT_IMPORT)) + " nowhere; found:\n" + "\n".join(bad)


def test_every_import_points_down_the_layers():
    rank = {u: i for i, layer in enumerate(LAYERS) for u in layer}
    unplaced = sorted(units_of(PACKAGE) - set(rank))
    assert not unplaced, f"place {unplaced} in LAYERS of tests/test_layers.py"
    up = [f"{s} -> {d}: {where}" for s, d, where in EDGES if rank[d] > rank[s]]
    assert not up, "imports up the layers:\n" + "\n".join(up)

