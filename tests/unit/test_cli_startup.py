"""The CLI imports only what the command it runs needs: `--version` and `--help` none of the cockpit's
layers or heavy libraries, a command only its own module; the top-level help is the same either way."""

from __future__ import annotations

import contextlib
import io
import subprocess
import sys

import pytest

from cockpit.cli import build_parser
from cockpit.cli.commands import COMMANDS

HEAVY = ("pydantic", "asyncssh", "httpx", "textual", "prometheus_client", "cockpit.recipe.checks")


def modules_after(code: str) -> set[str]:
    probe = f"import sys\n{code}\nprint('\\n'.join(sys.modules))"
    res = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    return set(res.stdout.split())


@pytest.mark.parametrize("argv", [["--version"], ["--help"], ["nope"]])
def test_version_help_and_a_bad_command_import_nothing_heavy(argv: list[str]) -> None:
    loaded = modules_after("import contextlib\nfrom cockpit.cli import main\n"
                           f"with contextlib.suppress(SystemExit):\n    main({argv!r})")
    assert "cockpit.cli" in loaded
    assert not [m for m in HEAVY if m in loaded]
    assert not [m for m in loaded if m.startswith("cockpit.cli.") and m.endswith("_cmd")]


def test_a_command_imports_its_own_module_only() -> None:
    loaded = modules_after("from cockpit.cli import build_parser\nbuild_parser(['smoke'])")
    cmd_modules = {m for m in loaded if m.startswith("cockpit.cli.") and m.endswith("_cmd")}
    assert cmd_modules == {"cockpit.cli.chat_cmd"}            # smoke and chat share a module


def test_the_light_help_lists_every_command_with_its_full_summary() -> None:
    def help_of(parser) -> str:  # type: ignore[no-untyped-def]
        out = io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.suppress(SystemExit):
            parser.parse_args(["--help"])
        return out.getvalue()

    light, full = help_of(build_parser(())), help_of(build_parser())
    assert light == full
    assert all(name in light for name in COMMANDS)


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_each_command_parses_with_only_its_module(name: str) -> None:
    parser = build_parser([name])
    sub = next(a for a in parser._actions if a.dest == "command")
    assert sub.choices[name].add_help                         # the full parser, not the summary


def test_the_http_client_imports_httpx_without_its_command_line_client() -> None:
    # click, pygments and rich.progress were a third of httpx's import, for httpx's own shell command
    loaded = modules_after("import cockpit.api.client, httpx\nassert callable(httpx.AsyncClient)\n"
                           "assert sys.modules['httpx._main'] is None")
    assert "httpx" in loaded
    assert not {"click", "pygments", "rich.progress", "rich.syntax"} & loaded
