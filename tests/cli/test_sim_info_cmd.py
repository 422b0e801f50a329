"""`sim info` prints tables for a reader and the whole schedule as JSON for machines."""

from __future__ import annotations

import json

import pytest

from cockpit.cli import main
from cockpit.cli.sim_cmd import info_text
from cockpit.sim.engine import schedule_info


def test_text_is_tables_not_python_dicts(tmp_path, capsys: pytest.CaptureFixture[str]) -> None:  # type: ignore[no-untyped-def]
    assert main(["sim", "info", "--dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    tables = out.split("tokenizer")[0]   # the tokenizer's description is a regex-like sentence
    assert "{" not in tables and "'" not in tables and "tokenizer   pieces:" in out
    rows = {line.split()[0]: line.split() for line in out.splitlines() if line.strip()}
    assert rows["CATEGORY"] == ["CATEGORY", "TOKENS/STEP", "ACCEPTED", "1", "STREAM", "AFTER", "IDLE",
                                "C=2", "C=4", "C=8"]
    info = schedule_info()
    assert rows["prose"][3] == f"{info['single_stream_tok_s']['prose']:g}"       # type: ignore[index]
    assert rows["prose"][-1] == f"{info['aggregate_tok_s']['prose']['8']:g}"     # type: ignore[index]
    assert rows["N=1"][-1] == "N=8"


def test_json_is_the_schedule_unchanged(tmp_path, capsys: pytest.CaptureFixture[str]) -> None:  # type: ignore[no-untyped-def]
    assert main(["sim", "info", "--dir", str(tmp_path), "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == json.loads(json.dumps(schedule_info()))


def test_a_key_the_table_does_not_know_is_still_shown() -> None:
    text = info_text({**schedule_info(), "cluster": {"dir": "/x\x1b[2J", "hosts": 4}, "new_thing": {"a": 1}})
    assert text.startswith("cluster     /x␛[2J: 4 hosts") and 'new_thing: {"a": 1}' in text
