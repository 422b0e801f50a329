"""Read-only mode headless: every host-changing command is refused (exit 3, `read-only`) before it runs
anything on a host; the commands that only read keep working; `[ui] read_only` turns it on too."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from simcluster import SimCluster

from cockpit.cli import build_parser, common, main
from cockpit.errorcodes import CODES
from cockpit.recipe.readonly import HOST_CHANGES, command_change

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "cluster.toml"

# One argv per host change of `cockpit.recipe.readonly`, with what it is called there.
REFUSED = [
    ("setup", ["setup", "env", "--yes"]),          # writing cluster.env
    ("setup", ["setup", "all", "--yes"]),          # every setup job
    ("setup", ["setup", "recipe"]),                # even the plan-then-ask form: refused before it plans
    ("launch", ["launch", "--yes"]),
    ("replace-stopped", ["launch", "--replace-stopped", "--yes"]),
    ("stop", ["stop", "--yes", "--force"]),
    ("shell", ["ssh", "0"]),                       # a shell can change anything
]


def test_every_host_change_has_a_refused_command_here() -> None:
    assert {name for name, _ in REFUSED} == {c.name for c in HOST_CHANGES}


@pytest.mark.parametrize("argv", [
    ["--read-only", "launch"], ["launch", "--read-only"], ["--read-only", "config", "check", "x.toml"],
    ["config", "check", "--read-only", "x.toml"],
    ["hosts", "trust", "--rank", "0", "--fingerprint", "SHA256:x", "--read-only"],
], ids=" ".join)
def test_the_option_works_before_and_after_the_command(argv: list[str]) -> None:
    assert build_parser().parse_args(argv).read_only is True
    assert build_parser().parse_args([a for a in argv if a != "--read-only"]).read_only is False


def test_which_commands_change_hosts() -> None:
    def change(argv: list[str]) -> str | None:
        found = command_change((args := build_parser().parse_args(argv)).command, vars(args))
        return found.name if found else None

    for name, argv in REFUSED:
        assert change(argv) == name
    # a dry run only prints (even with --replace-stopped: it returns before replacing anything)
    assert change(["launch", "--dry-run"]) is None
    assert change(["launch", "--dry-run", "--replace-stopped"]) is None
    for argv in (["preflight"], ["status"], ["logs"], ["stats"], ["chat", "hi"], ["smoke"], ["bench"],
                 ["hosts"], ["hosts", "trust", "--rank", "0", "--fingerprint", "SHA256:x"],
                 ["config", "check"], ["tui"]):
        assert change(argv) is None, argv


@pytest.fixture
def conf(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "lab.toml"
    shutil.copy(FIXTURE, path)
    monkeypatch.chdir(tmp_path)
    return path


@pytest.mark.parametrize(("name", "argv"), REFUSED, ids=lambda a: " ".join(a) if isinstance(a, list) else a)
def test_refused_in_process_with_the_code(conf: Path, name: str, argv: list[str],
                                          capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--config", str(conf), "--read-only", *argv, "--json"]) == common.EXIT_REFUSED
    out = capsys.readouterr()
    error = json.loads(out.out)["error"]
    assert error["code"] == "read-only" and error["remedy"] == CODES["read-only"].remedy
    assert "refused in read-only mode" in out.err and "nothing was run on any host" in out.err


def test_the_config_alone_turns_it_on_and_no_option_turns_it_off(conf: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    text = conf.read_text()
    conf.write_text(text + "\n[ui]\nread_only = true\n" if "[ui]" not in text
                    else text.replace("[ui]", "[ui]\nread_only = true", 1))
    assert main(["--config", str(conf), "stop", "--yes"]) == common.EXIT_REFUSED
    assert "refused in read-only mode" in capsys.readouterr().err
    assert main(["--config", str(conf), "config", "check", str(conf)]) == common.EXIT_OK


# ---- against a demo cluster, as a user runs it: nothing appears or changes on any host ------------------


def host_tree(cluster: SimCluster) -> dict[str, tuple[int, int]]:
    """Every file and directory under every host's root: (size, mtime)."""
    tree = {}
    for rank in cluster.config.ranks:
        root = cluster.root(rank)
        for dirpath, dirnames, filenames in os.walk(root):
            for name in dirnames + filenames:
                path = Path(dirpath) / name
                st = path.lstat()
                tree[str(path.relative_to(cluster.dir))] = (st.st_size, st.st_mtime_ns)
    return tree


def cockpit(cluster: SimCluster, *argv: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "cockpit", "--config", str(cluster.config_path), *argv],
                          capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)


@pytest.mark.parametrize(("name", "argv"), REFUSED, ids=lambda a: " ".join(a) if isinstance(a, list) else a)
def test_refused_on_a_demo_cluster_and_nothing_runs(demo_cluster: SimCluster, name: str,
                                                    argv: list[str]) -> None:
    before = host_tree(demo_cluster)
    proc = cockpit(demo_cluster, *argv, "--read-only")
    assert proc.returncode == common.EXIT_REFUSED, proc.stderr
    assert "refused in read-only mode" in proc.stderr and "Traceback" not in proc.stderr
    assert host_tree(demo_cluster) == before


def test_what_only_reads_still_works_on_a_demo_cluster(demo_cluster: SimCluster) -> None:
    before = host_tree(demo_cluster)
    hosts = cockpit(demo_cluster, "--read-only", "hosts")
    assert hosts.returncode == common.EXIT_OK, hosts.stderr
    for argv in (["status"], ["preflight"], ["launch", "--dry-run"]):
        proc = cockpit(demo_cluster, *argv, "--read-only")
        assert "read-only mode" not in proc.stderr and "Traceback" not in proc.stderr, (argv, proc.stderr)
        assert proc.returncode in (common.EXIT_OK, common.EXIT_FAILURE, common.EXIT_REFUSED), proc.stderr
    assert host_tree(demo_cluster) == before      # not even the launch lock's directory on rank 0


def test_a_read_only_dry_run_of_a_ready_cluster_takes_no_lock(fresh_demo_cluster: SimCluster) -> None:
    """The dry run passes and shows the commands; unlike a normal dry run it leaves no lock directory."""
    setup = cockpit(fresh_demo_cluster, "setup", "all", "--yes", timeout=300)
    assert setup.returncode == common.EXIT_OK, setup.stdout[-2000:]
    before = host_tree(fresh_demo_cluster)
    dry = cockpit(fresh_demo_cluster, "launch", "--dry-run", "--read-only")
    assert dry.returncode == common.EXIT_OK, dry.stderr
    assert "dry run:" in dry.stdout
    assert host_tree(fresh_demo_cluster) == before
