"""The cockpit's parsers and verdicts on bytes a real Docker printed (tests/fixtures/samples/real-docker/:
the Docker 28.2.2 CLI against Debian's 20.10 daemon, `*.cli20.*` with the 20.10 CLI). No daemon needed."""

from __future__ import annotations

import json
from pathlib import Path

from cockpit import constants as C
from cockpit.config import ClusterConfig
from cockpit.recipe import checks_fabric as F
from cockpit.recipe import checks_host as H
from cockpit.recipe import containers as dk
from cockpit.recipe import parsers as P
from cockpit.recipe.checks import Probe, Verdict
from cockpit.recipe.image_identity import (
    ArchiveIds,
    ImageFacts,
    identify,
    parse_archive_ids,
    parse_image_inspect,
)
from cockpit.recipe.replace import judge

SAMPLES = Path(__file__).parent.parent / "fixtures" / "samples" / "real-docker"
OURS = "f" * 64


def sample(name: str) -> str:
    return (SAMPLES / name).read_text()


def status(name: str) -> int:
    return int(sample(name).strip().removeprefix("rc="))


def probe(cfg: ClusterConfig, rank: int = 0, launched: dict[int, str] | None = None,
          **outputs: tuple[str, int]) -> Probe:
    secs = {label.replace("__", "."): P.Section(label.replace("__", "."), text, rc)
            for label, (text, rc) in outputs.items()}
    return Probe(cfg, rank, secs, launched or {})


# ---- docker info without a daemon ---------------------------------------------------------------------


def test_docker_info_daemon_down_gives_the_reason_not_the_empty_json(fixed_config: ClusterConfig) -> None:
    merged, rc = sample("info-daemon-down.merged"), status("info-daemon-down.rc")
    assert merged.startswith('{"ID":"","Containers":0') and rc == 1
    info = P.parse_docker_info(merged)
    assert info is not None and not info.ok
    assert info.errors == ["Cannot connect to the Docker daemon at "
                           "unix:///var/lib/docker-test/nonexistent.sock. Is the docker daemon running?"]
    out = H.DOCKER.evaluate(probe(fixed_config, docker__info=(merged, rc)))
    assert out.verdict is Verdict.FAIL
    assert out.value.startswith("Cannot connect to the Docker daemon") and "{" not in out.value
    assert out.remedy == H.DOCKER_DOWN_REMEDY
    # the 20.10 CLI: ServerErrors in the JSON, exit 0 — read the same way
    old = H.DOCKER.evaluate(probe(fixed_config, docker__info=(sample("info-daemon-down.cli20.merged"), 0)))
    assert (old.verdict, old.value, old.remedy) == (out.verdict, out.value, out.remedy)


def test_docker_info_permission_denied_says_so_with_the_docker_group_remedy(
        fixed_config: ClusterConfig) -> None:
    merged, rc = sample("info-permission-denied.merged"), status("info-permission-denied.rc")
    out = H.DOCKER.evaluate(probe(fixed_config, docker__info=(merged, rc)))
    assert out.verdict is Verdict.FAIL
    assert out.value.startswith("permission denied while trying to connect to the Docker daemon socket")
    assert "docker group" in out.remedy and "usermod -aG docker" in out.remedy
    for check in (H.RUNTIME, H.IMAGE):
        assert check.evaluate(probe(fixed_config, docker__info=(merged, rc))).verdict is Verdict.UNKNOWN


def test_docker_info_reason_skips_the_clis_warnings(fixed_config: ClusterConfig) -> None:
    """A CLI that cannot read its config file warns first (seen with a login whose home it cannot read)."""
    warned = ("WARNING: Error loading config file: open /home/x/.docker/config.json: permission denied\n"
              + sample("info-permission-denied.merged"))
    out = H.DOCKER.evaluate(probe(fixed_config, docker__info=(warned, 1)))
    assert out.value.startswith("permission denied while trying") and out.remedy == H.DOCKER_DENIED_REMEDY


def test_docker_info_of_a_live_daemon_passes(fixed_config: ClusterConfig) -> None:
    out = H.DOCKER.evaluate(probe(fixed_config, docker__info=(sample("info-json.out"), 0)))
    assert out.verdict is Verdict.PASS and out.value == "Docker 20.10.24+dfsg1"


# ---- a docker run whose start failed: created, ID printed ---------------------------------------------


def test_failed_start_prints_the_id_and_leaves_a_created_container() -> None:
    for run, inspect, code, error in (
            ("run-gpus", "inspect-gpus.out", 125,
             'could not select device driver "" with capabilities: [[gpu]]'),
            ("run-bad-cmd", "inspect-badcmd.out", 127, 'exec: "/no/such/binary"')):
        assert status(f"{run}.rc") == code
        cid = dk.container_id_from_output(sample(f"{run}.out"))
        [state] = dk.parse_inspect(sample(inspect))
        assert cid == state.id and state.status == "created" and not state.running and not state.exited
        assert state.start_failed and state.ended and error in state.error
        assert state.exit_reason().startswith("created but never started (exit code ")
    # a refused run (unknown runtime) created nothing: no ID
    assert dk.container_id_from_output(sample("run-runtime-nvidia.out")) is None


def test_created_container_this_cockpit_made_is_replaced_not_refused() -> None:
    [state] = dk.parse_inspect(sample("inspect-gpus.out"))
    item = judge(0, "r37-gpus", state, state.id)
    assert item.action == "replace" and item.container_id == state.id
    assert "created but never started" in item.reason
    assert item.commands == [f"docker logs -t {state.id}", f"docker rm {state.id}"]
    other = judge(0, "r37-gpus", state, OURS)
    assert other.action == "refuse" and "not started by this cockpit" in other.reason
    [running] = dk.parse_inspect(sample("inspect-running.out"))
    assert judge(0, "r37-running", running, running.id).action == "refuse"


def test_container_check_offers_the_replace_path_for_our_created_container(
        fixed_config: ClusterConfig) -> None:
    cfg = fixed_config
    name = cfg.cluster.container_name
    [state] = dk.parse_inspect(sample("inspect-gpus.out"))
    doc = json.loads(sample("inspect-gpus.out"))          # `docker container inspect --format '{{json .}}'`
    doc["Name"] = "/" + name
    ps = json.dumps({"ID": state.id[:12], "Names": name, "State": "created", "Status": "Created",
                     "Image": "r37-mini:1"})
    out = H.CONTAINER.evaluate(probe(cfg, 1, {1: state.id}, docker__info=(sample("info-json.out"), 0),
                                     docker__ps=(ps + "\n", 0),
                                     docker__container=(json.dumps(doc) + "\n", 0)))
    assert out.verdict is Verdict.FAIL and "started by this cockpit" in out.value
    assert "never started: could not select device driver" in out.value
    assert "--replace-stopped" in out.remedy


# ---- stop of a PID 1 without a SIGTERM handler --------------------------------------------------------


def test_pid1_without_handler_ends_137_by_sigkill_not_oom() -> None:
    [ignore] = dk.parse_inspect(sample("inspect-ignore.out"))
    [oom] = dk.parse_inspect(sample("inspect-oom.out"))
    assert ignore.exit_code == 137 and not ignore.oom_killed
    assert ignore.exit_reason() == "exited with code 137 (SIGKILL)"
    assert oom.exit_code == 137 and oom.exit_reason().startswith("killed by the out-of-memory killer")
    assert sample("stop-pid1-nohandler.out") == "r37-pid1\n" and status("stop-pid1-nohandler.rc") == 0


# ---- RDMA on a host whose kernel has none -------------------------------------------------------------


def test_rdma_link_without_kernel_rdma_never_says_install_rdma(fixed_config: ClusterConfig) -> None:
    out = F.RDMA_LINK.evaluate(probe(fixed_config, rdma__link=(sample("rdma-j-link.err"), 1)))
    assert out.verdict is Verdict.FAIL and out.value == "Failed to open NETLINK_RDMA socket"
    assert "install iproute2" not in out.remedy and "the `rdma` tool is installed" in out.remedy
    assert out.remedy == F.NO_KERNEL_RDMA
    not_found = "bash: line 1: rdma: command not found\n"
    missing = F.RDMA_LINK.evaluate(probe(fixed_config, rdma__link=(not_found, 127)))
    assert missing.verdict is Verdict.FAIL and "install iproute2's `rdma` tool" in missing.remedy
    hca = fixed_config.host(0).ib_hca[0]
    ibv = F.IBV_PORT.evaluate(probe(fixed_config, **{f"ibv__{hca}": (sample("ibv_devinfo-d.err"), 255)}))
    assert ibv.verdict is Verdict.FAIL and ibv.remedy == F.NO_KERNEL_RDMA


# ---- image identity: classic store and containerd store -------------------------------------------------


def test_image_inspect_classic_store_sample() -> None:
    facts = parse_image_inspect(sample("image-inspect-id.out"))
    assert facts == ImageFacts("sha256:b4cc51007f02cd570da84aff50c4ebc3ef3d2672733b16dbe69605251a63d2d6")
    assert not facts.containerd_store
    assert parse_image_inspect(sample("image-inspect-missing.err")) is None


MANIFEST = "sha256:" + "a" * 64


def containerd_inspect(image_id: str = MANIFEST) -> str:
    """`docker image inspect --format '{{json .}}'` on a containerd image store (Engine 29), in the shape
    moby's daemon/containerd/image_inspect.go builds: .Id, Descriptor and RepoDigests name the target."""
    return json.dumps({"Id": image_id, "RepoTags": [C.IMAGE_TAG],
                       "RepoDigests": [f"local/ds41-r37-spark@{image_id}"],
                       "Descriptor": {"mediaType": "application/vnd.oci.image.manifest.v1+json",
                                      "digest": image_id, "size": 1234},
                       "GraphDriver": {"Name": "overlayfs", "Data": None}}) + "\n"


def archive_text(manifest: str = MANIFEST, config: str = C.IMAGE_ID) -> str:
    index = {"schemaVersion": 2, "manifests": [{"mediaType": "application/vnd.oci.image.manifest.v1+json",
                                                "digest": manifest, "size": 1234}]}
    mf = [{"Config": f"blobs/sha256/{config.removeprefix('sha256:')}", "RepoTags": [C.IMAGE_TAG],
           "Layers": []}]
    return json.dumps(index) + json.dumps(mf) + "\n"      # tar -xOf: the two files back to back


def test_containerd_store_accepts_the_verified_image_by_the_archives_manifest_digest(
        fixed_config: ClusterConfig) -> None:
    cfg = fixed_config
    info = (sample("info-json.out"), 0)
    facts = parse_image_inspect(containerd_inspect())
    assert facts is not None and facts.containerd_store
    assert parse_archive_ids(archive_text()) == ArchiveIds((MANIFEST,), (C.IMAGE_ID,))
    assert identify(facts, C.IMAGE_ID, parse_archive_ids(archive_text())).ok
    ok = H.IMAGE.evaluate(probe(cfg, 2, docker__info=info, docker__image=(containerd_inspect(), 0),
                                image__archive=(archive_text(), 0)))
    assert ok.verdict is Verdict.PASS and "containerd image store" in ok.value
    assert ok.facts == {"image": C.IMAGE_ID}          # compared across ranks by the pinned digest
    # another image: its manifest digest is not the verified archive's
    other = "sha256:" + "b" * 64
    bad = H.IMAGE.evaluate(probe(cfg, 2, docker__info=info, docker__image=(containerd_inspect(other), 0),
                                 image__archive=(archive_text(), 0)))
    assert bad.verdict is Verdict.FAIL and "not the manifest digest the verified archive names" in bad.remedy
    # an archive that does not name the pinned config digest proves nothing
    forged = H.IMAGE.evaluate(probe(cfg, 2, docker__info=info, docker__image=(containerd_inspect(), 0),
                                    image__archive=(archive_text(config="sha256:" + "c" * 64), 0)))
    assert forged.verdict is Verdict.FAIL
    # no archive left on the host: cannot be verified, said so
    gone = H.IMAGE.evaluate(probe(cfg, 2, docker__info=info, docker__image=(containerd_inspect(), 0),
                                  image__archive=("tar: runtime/ds41-r37-runtime.tar: Cannot open\n", 2)))
    assert gone.verdict is Verdict.FAIL and "index.json could not be read" in gone.remedy
    # the classic store: .Id is the config digest, nothing else is needed
    classic = json.dumps({"Id": C.IMAGE_ID, "GraphDriver": {"Name": "overlay2"}}) + "\n"
    assert H.IMAGE.evaluate(probe(cfg, 2, docker__info=info, docker__image=(classic, 0),
                                  image__archive=("", 2))).verdict is Verdict.PASS
