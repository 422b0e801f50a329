"""The sim's import graph, counting imports inside functions too (the way a circle is usually dodged):
the engine package has no circle; the one left in the whole sim is cluster ↔ lab (`down` of a lab)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SIM = ROOT / "cockpit" / "sim"


def _module(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph() -> dict[str, set[str]]:
    """Every cockpit.sim module → the cockpit.sim modules it imports, at any depth of its code."""
    modules = {_module(p): p for p in SIM.rglob("*.py") if "-" not in p.name}
    graph: dict[str, set[str]] = {m: set() for m in modules}
    for mod, path in modules.items():
        package = mod if path.name == "__init__.py" else mod.rsplit(".", 1)[0]
        for node in ast.walk(ast.parse(path.read_text())):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1]
                                    + ([base] if base else []))
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names]
            for t in targets:
                if t in modules and t != mod:
                    graph[mod].add(t)
    return graph


def cycles(graph: dict[str, set[str]]) -> set[frozenset[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: set[frozenset[str]] = set()

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = set()
            while True:
                w = stack.pop()
                comp.add(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.add(frozenset(comp))

    for v in graph:
        if v not in index:
            visit(v)
    return found


def test_the_engine_has_no_import_circle() -> None:
    graph = import_graph()
    assert "cockpit.sim.engine.boot" in graph["cockpit.sim.engine.__main__"]
    assert "cockpit.sim.engine.boot" not in graph["cockpit.sim.engine.cli"]
    assert not [c for c in cycles(graph) if any(m.startswith("cockpit.sim.engine") for m in c)]


def test_the_only_circle_left_in_the_sim_is_cluster_and_lab() -> None:
    # Left for later (issue 25): cluster.down() imports lab.lab_down in the function; lab imports cluster.
    assert cycles(import_graph()) == {frozenset({"cockpit.sim.cluster", "cockpit.sim.lab"})}
