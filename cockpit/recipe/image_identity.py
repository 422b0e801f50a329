"""Which loaded image is the verified R37 image, under either of Docker's image stores (pure).

The recipe pins the image's *config digest* (`[runtime] image_id`). Docker's classic store reports exactly
that as `docker image inspect`'s `.Id`. Docker's containerd image store (the default of new Engine 29
installs) reports the digest of the image's *target* instead — the manifest (or index) the image was loaded
from — and shows it in `Descriptor` and `RepoDigests` too; the config digest appears nowhere in its output.

So on a containerd store the cockpit identifies the image by the manifest digest of the verified archive:
the archive (whose sha256 `setup runtime` checks before loading it) names both in its OCI layout,
`index.json` (the manifest's digest) and `manifest.json` (`Config: blobs/sha256/<config digest>`). The
image is accepted when its `.Id` is that manifest digest and the archive's config is the pinned one.
Formats: docs/host-tools.md#docker-image-inspect.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from cockpit.safetext import neutralise

_DIGEST = re.compile(r"^sha256:[0-9a-f]{64}$")
_BARE_ID = re.compile(r"^sha256:[0-9a-f]{64}$", re.MULTILINE)
CONTAINERD_SNAPSHOTTERS = frozenset({"overlayfs", "native", "stargz", "zfs", "btrfs", "fuse-overlayfs",
                                     "nydus", "devmapper"})


def _digest(value: object) -> str | None:
    return value if isinstance(value, str) and _DIGEST.match(value) else None


@dataclass(frozen=True, slots=True)
class ImageFacts:
    """`docker image inspect IMAGE --format '{{json .}}'`, the parts that identify the image."""

    id: str
    repo_digests: tuple[str, ...] = ()
    target: str | None = None          # Descriptor.digest (Engine 25+; the containerd store's .Id)
    driver: str = ""                   # GraphDriver.Name: overlay2 (classic) or a snapshotter name

    @property
    def containerd_store(self) -> bool:
        """Is this image in Docker's containerd image store (its .Id the target's digest)?"""
        return (self.target is not None and self.target == self.id) or self.driver in CONTAINERD_SNAPSHOTTERS

    @property
    def target_digests(self) -> set[str]:
        out = {self.id} | ({self.target} if self.target else set())
        return out | {d for d in (r.rpartition("@")[2] for r in self.repo_digests) if _digest(d)}


def parse_image_inspect(text: str) -> ImageFacts | None:
    """The first image object in the text (an object, or docker inspect's array), or a line that is an ID
    alone; None when there is neither (the image is not there: docker printed an error instead)."""
    for line in text.splitlines():
        line = line.strip()
        if not line.startswith(("{", "[")):
            continue
        try:
            doc = json.loads(line)
        except (ValueError, RecursionError):
            continue
        if isinstance(doc, list):
            doc = doc[0] if doc else None
        if not isinstance(doc, dict) or not _digest(doc.get("Id")):
            continue
        rd = doc.get("RepoDigests")
        desc = doc.get("Descriptor")
        gd = doc.get("GraphDriver")
        name = gd.get("Name") if isinstance(gd, dict) else None
        digests = rd if isinstance(rd, list) else []
        return ImageFacts(
            id=doc["Id"],
            repo_digests=tuple(neutralise(r) for r in digests if isinstance(r, str)),
            target=_digest(desc.get("digest")) if isinstance(desc, dict) else None,
            driver=neutralise(name) if isinstance(name, str) else "")
    bare = _BARE_ID.search(text)        # `--format '{{.Id}}'`: the ID alone
    return ImageFacts(bare.group(0)) if bare else None


@dataclass(frozen=True, slots=True)
class ArchiveIds:
    """What the runtime archive's OCI layout names: its manifest's digest and its config digest."""

    manifests: tuple[str, ...]
    configs: tuple[str, ...]


def parse_archive_ids(text: str) -> ArchiveIds:
    """`tar -xOf ARCHIVE index.json manifest.json`: the two documents back to back (any whitespace)."""
    dec = json.JSONDecoder()
    docs = []
    pos, text = 0, text.strip()
    while pos < len(text):
        try:
            doc, end = dec.raw_decode(text, pos)
        except (ValueError, RecursionError):
            nxt = min((i for i in (text.find("{", pos + 1), text.find("[", pos + 1)) if i > 0), default=-1)
            if nxt < 0:
                break
            pos = nxt
            continue
        docs.append(doc)
        pos = end
        while pos < len(text) and text[pos].isspace():
            pos += 1
    manifests: list[str] = []
    configs: list[str] = []
    for doc in docs:
        if isinstance(doc, dict) and isinstance(doc.get("manifests"), list):          # index.json
            found = (_digest(m.get("digest")) for m in doc["manifests"] if isinstance(m, dict))
            manifests += [d for d in found if d]
        elif isinstance(doc, list):                                                     # manifest.json
            for m in doc:
                cfg = m.get("Config") if isinstance(m, dict) else None
                if isinstance(cfg, str) and cfg.startswith("blobs/sha256/"):
                    d = _digest("sha256:" + cfg.removeprefix("blobs/sha256/"))
                    if d:
                        configs.append(d)
                elif isinstance(cfg, str) and cfg.endswith(".json"):                    # docker < 25 layout
                    d = _digest("sha256:" + cfg.removesuffix(".json"))
                    if d:
                        configs.append(d)
    return ArchiveIds(tuple(manifests), tuple(configs))


@dataclass(frozen=True, slots=True)
class Identity:
    ok: bool
    how: str          # what identified it, or why it is not the verified image


def identify(facts: ImageFacts, want: str, archive: ArchiveIds | None) -> Identity:
    """Is the loaded image the verified one? By its config digest (classic store), or on a containerd
    store by the manifest digest the verified archive names next to the pinned config digest."""
    if facts.id == want:
        return Identity(True, "config digest")
    if not facts.containerd_store:
        return Identity(False, f"its ID is {facts.id}, expected {want}")
    if archive is None or not (archive.manifests or archive.configs):
        return Identity(False, f"containerd image store: its ID {facts.id} is a manifest digest; the "
                               "archive's index.json could not be read to compare it with the pinned config "
                               f"digest {want} (is the runtime archive still on the host?)")
    if want not in archive.configs:
        named = ", ".join(archive.configs) or "none"
        return Identity(False, "containerd image store: the runtime archive on the host does not name the "
                               f"pinned config digest {want} (it names {named})")
    if facts.target_digests & set(archive.manifests):
        return Identity(True, "manifest digest of the verified archive (containerd image store)")
    return Identity(False, f"containerd image store: its ID {facts.id} is not the manifest digest the "
                           f"verified archive names ({', '.join(archive.manifests) or 'none'})")
