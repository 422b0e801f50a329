"""Several clusters in one place: which files, in which order, by which name; a broken file is listed
with its reason and refused only when chosen; two files with one name are an error naming both."""

from __future__ import annotations

from pathlib import Path

import pytest

from cockpit.config import ConfigError
from cockpit.config.clusters import choose_cluster, cluster_files, load_clusters

FIXTURE = Path(__file__).parents[1] / "fixtures" / "cluster.toml"


def named(text: str, name: str) -> str:
    assert 'name = "r37-test"' in text
    return text.replace('name = "r37-test"', f"name = {name!r}".replace("'", '"'), 1)


@pytest.fixture
def place(tmp_path: Path) -> Path:
    text = FIXTURE.read_text()
    (tmp_path / "cluster.toml").write_text(named(text, "main"))
    (tmp_path / "cluster.d").mkdir()
    (tmp_path / "cluster.d" / "b-pair.toml").write_text(named(text, "pair"))
    (tmp_path / "cluster.d" / "a-eight.toml").write_text(named(text, "eight"))
    (tmp_path / "cluster.d" / "notes.txt").write_text("not a cluster")
    return tmp_path


def test_main_first_then_cluster_d_by_file_name_then_more_configs(place: Path, tmp_path_factory) -> None:
    other = tmp_path_factory.mktemp("other") / "lab.toml"
    other.write_text(named(FIXTURE.read_text(), "lab"))
    files = cluster_files([place / "cluster.toml", other, place / "cluster.d" / "b-pair.toml"])
    assert files == [place / "cluster.toml", place / "cluster.d" / "a-eight.toml",
                     place / "cluster.d" / "b-pair.toml", other]          # each file once
    names = [r.name for r in load_clusters([place / "cluster.toml", other])]
    assert names == ["main", "eight", "pair", "lab"]


def test_discovery_finds_the_main_file_and_its_cluster_d(place: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.chdir(place)
    assert [r.name for r in load_clusters()] == ["main", "eight", "pair"]


def test_choose_by_name_default_main_and_unknown_lists_the_known(place: Path) -> None:
    refs = load_clusters([place / "cluster.toml"])
    assert choose_cluster(refs, None).name == "main"
    pair = choose_cluster(refs, "pair")
    assert pair.path == place / "cluster.d" / "b-pair.toml" and pair.loaded().cluster.name == "pair"
    with pytest.raises(ConfigError) as err:
        choose_cluster(refs, "nope")
    assert err.value.code == "cluster-unknown"
    assert "'nope'" in str(err.value) and "main (" in str(err.value) and "pair (" in str(err.value)


def test_a_broken_file_is_listed_and_refused_only_when_chosen(place: Path) -> None:
    (place / "cluster.d" / "c-broken.toml").write_text("[cluster]\nname = 3\n")
    refs = load_clusters([place / "cluster.toml"])
    broken = refs[-1]
    assert broken.name == "c-broken" and broken.config is None and broken.error is not None
    assert choose_cluster(refs, "pair").loaded().cluster.name == "pair"
    with pytest.raises(ConfigError) as err:
        choose_cluster(refs, "c-broken").loaded()
    assert "cluster.name" in str(err.value) and "c-broken.toml" in str(err.value)


def test_two_files_with_one_name_name_both(place: Path) -> None:
    (place / "cluster.d" / "twin.toml").write_text(named(FIXTURE.read_text(), "pair"))
    with pytest.raises(ConfigError) as err:
        load_clusters([place / "cluster.toml"])
    assert err.value.code == "cluster-name-taken"
    assert "twin.toml" in str(err.value) and "b-pair.toml" in str(err.value)
