"""Ctrl-C ends `python -m cockpit` with exit status 130 and "interrupted" (0 where it is a watch's end),
also when it lands inside an `exec()`'d string (as dataclasses build their methods, which most of the
start-up's imports do): CPython 3.11 would otherwise end such a process by SIGINT, whichever handler
took the Ctrl-C."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

PROBE = """
import sys
import cockpit.cli

def main():
{body}

cockpit.cli.main = main
from cockpit.__main__ import run
raise SystemExit(run())
"""
IN_THE_IMPORTS = "    exec('raise KeyboardInterrupt')"          # reaches run()'s own handler
IN_A_COMMAND = """    try:
        exec('raise KeyboardInterrupt')
    except KeyboardInterrupt:
        print('interrupted', file=sys.stderr)
        return 130"""                                           # handled by the CLI, as main() does
AS_A_WATCH_END = IN_A_COMMAND.replace("return 130", "return 0")   # `stats --watch`: Ctrl-C is its end


@pytest.mark.parametrize(("body", "code"), [(IN_THE_IMPORTS, 130), (IN_A_COMMAND, 130), (AS_A_WATCH_END, 0)],
                         ids=["imports", "command", "watch-end"])
def test_ctrl_c_in_an_exec_is_exit_130(tmp_path: Path, body: str, code: int) -> None:
    (tmp_path / "interrupt_probe.py").write_text(PROBE.format(body=body))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), *sys.path])}
    res = subprocess.run([sys.executable, "-m", "interrupt_probe"], capture_output=True, text=True,
                         timeout=60, env=env, cwd=tmp_path)
    assert res.returncode == code, (res.returncode, res.stderr)
    assert res.stderr.strip() == "interrupted"
