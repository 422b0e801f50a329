"""Demo clusters get 127.A.B blocks no other demo cluster holds and no socket uses (two clusters on one
block saw each other's engines as ports in use: a launch refused by preflight in CI)."""

from __future__ import annotations

import random
import socket
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from cockpit.sim import demo_addresses as D


class Scripted(random.Random):
    """An rng whose `randint` answers from a list (pairs of A, B)."""

    def __init__(self, values: list[int]) -> None:
        super().__init__(0)
        self.values = list(values)

    def randint(self, a: int, b: int) -> int:
        value = self.values.pop(0)
        assert a <= value <= b
        return value


@pytest.fixture(autouse=True)
def own_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    yield


def test_a_held_block_is_not_given_again_and_a_released_one_is(tmp_path: Path) -> None:
    up: dict[Path, str] = {}

    def holds(d: Path, block: str) -> bool:
        return up.get(d) == block

    first = D.claim_block(tmp_path / "a", holds, Scripted([77, 5]))
    up[tmp_path / "a"] = first
    second = D.claim_block(tmp_path / "b", holds, Scripted([77, 5, 77, 6]))
    assert (first, second) == ("127.77.5", "127.77.6")
    D.release_block(tmp_path / "b", first)                   # not b's claim: kept
    assert (D.claims_dir() / first).read_text() == str(tmp_path / "a")
    D.release_block(tmp_path / "a", first)
    assert D.claim_block(tmp_path / "c", holds, Scripted([77, 5])) == "127.77.5"


def test_a_claim_whose_cluster_is_gone_is_taken_over(tmp_path: Path) -> None:
    D.claim_block(tmp_path / "crashed", lambda d, b: False, Scripted([90, 9]))
    assert D.claim_block(tmp_path / "next", lambda d, b: False, Scripted([90, 9])) == "127.90.9"
    assert (D.claims_dir() / "127.90.9").read_text() == str(tmp_path / "next")


def test_a_block_a_socket_uses_is_skipped(tmp_path: Path) -> None:
    with socket.socket() as s:
        s.bind(("127.201.33.10", 0))
        s.listen()
        assert "127.201.33" in D.used_blocks()
        block = D.claim_block(tmp_path / "a", lambda d, b: False, Scripted([201, 33, 201, 34]))
    assert block == "127.201.34"
    assert D.block_ips(block, 3) == ["127.201.34.10", "127.201.34.11", "127.201.34.12"]


def test_every_pick_taken_is_a_clear_error(tmp_path: Path) -> None:
    D.claim_block(tmp_path / "a", lambda d, b: False, Scripted([60, 1]))
    with pytest.raises(RuntimeError, match="no free 127"):
        D.claim_block(tmp_path / "b", lambda d, b: True, Scripted([60, 1] * D.TRIES))
