"""The launch is written once, in `recipe/launch_run.py` (issue 25, item 3): both faces call its `run_launch`
and neither takes the cluster lock for a launch, computes the gate with `launch_gate`, clears stopped
containers with `execute_replace` nor runs a `Launcher`'s `launch()` itself. Read from the faces' syntax
trees, as the layer test reads imports."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2] / "cockpit"
FACES = ("cli/launch_cmd.py", "tui/panes/launch.py")
PROCEDURE = "cockpit.recipe.launch_run"
THE_PROCEDURES_OWN = {"launch_gate", "execute_replace"}


def aliases(tree: ast.Module) -> set[str]:
    """The names the module binds to `cockpit.recipe.launch_run` (`from cockpit.recipe import launch_run as
    LR`, `import cockpit.recipe.launch_run as LR`)."""
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module == "cockpit.recipe":
            out |= {a.asname or a.name for a in node.names if a.name == "launch_run"}
        elif isinstance(node, ast.Import):
            out |= {a.asname for a in node.names if a.name == PROCEDURE and a.asname}
    return out


def calls_run_launch(tree: ast.Module) -> bool:
    names = aliases(tree)
    return any(isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "run_launch"
               and isinstance(n.func.value, ast.Name) and n.func.value.id in names
               for n in ast.walk(tree))


def _name(node: ast.AST) -> str | None:
    return node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else None


def launch_written_here(tree: ast.Module) -> list[str]:
    """What of the launch procedure this module does itself, one line each (empty: nothing)."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            found += [(node.lineno, f"imports {a.name}") for a in node.names if a.name in THE_PROCEDURES_OWN]
        name = _name(node)
        if name in THE_PROCEDURES_OWN:
            found.append((node.lineno, f"uses {name}"))
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        called = _name(func)
        if called == "ClusterLock":
            purpose = node.args[2] if len(node.args) > 2 else next(
                (k.value for k in node.keywords if k.arg == "purpose"), None)
            if purpose is None or (isinstance(purpose, ast.Constant) and purpose.value == "launch"):
                found.append((node.lineno, "takes the cluster lock for a launch"))
        if called == "launch" and isinstance(func, ast.Attribute) and not node.args and not node.keywords:
            found.append((node.lineno, "runs a launcher's launch()"))
    return [f"line {line}: {what}" for line, what in sorted(found)]


@pytest.mark.parametrize("face", FACES)
def test_each_face_calls_the_one_launch_procedure(face: str) -> None:
    tree = ast.parse((ROOT / face).read_text(), face)
    assert calls_run_launch(tree), f"{face} does not call {PROCEDURE}.run_launch"
    assert launch_written_here(tree) == [], face


def test_the_reader_sees_a_launch_written_in_a_face() -> None:
    """The checks above can fail: a face as it was before the procedure (gate, lock, replace, launch)."""
    old = ast.parse("""from cockpit.recipe import launch as L
from cockpit.recipe.lock import ClusterLock
from cockpit.recipe.replace import execute_replace
async def go(fleet, cfg, replace, stop_plan):
    async with ClusterLock(fleet, cfg, "stop"):
        pass
    async with ClusterLock(fleet, cfg, "launch"):
        gate = await L.launch_gate(fleet, cfg, preflight_failures=[])
        await execute_replace(fleet, cfg, replace, None)
        await L.Launcher(fleet, cfg).launch()
    async with ClusterLock(fleet, cfg):
        pass
""")
    assert not calls_run_launch(old)
    assert launch_written_here(old) == [
        "line 3: imports execute_replace", "line 7: takes the cluster lock for a launch",
        "line 8: uses launch_gate", "line 9: uses execute_replace", "line 10: runs a launcher's launch()",
        "line 11: takes the cluster lock for a launch"]
    new = ast.parse("from cockpit.recipe import launch_run as LR\n"
                    "async def go():\n    await LR.run_launch()\n")
    assert calls_run_launch(new) and launch_written_here(new) == []
