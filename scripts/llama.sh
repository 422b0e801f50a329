# Sourced by scripts/test: make (or reuse) llama.cpp's `llama-server` for the llama.cpp contract tests
# (tests/real_llama/). Built from the llama.cpp that PyPI's llama-cpp-python sdist vendors (only the server
# target: CPU, Release, no HTTPS, no web UI download), beside a small venv with `gguf` (the tests write
# a tiny random-weight GGUF with it). Cached outside the work tree, keyed by the pins, like the vLLM venv:
# a fresh clone on the same machine (CI) reuses it. ~10 min of CPU to make (~5 min on an idle 2-core
# machine with -j2; 30 min measured under load 15–26), <1 s when present.
# Usage: r37_llama   → exports R37_LLAMA_SERVER and R37_LLAMA_PYTHON on success; R37_NO_LLAMA=1 skips it.
R37_LLAMA_PINS="llama-cpp-python==0.3.36 gguf==0.19.0 server-only v1"
r37_llama() {
  if [ "${R37_NO_LLAMA:-}" = 1 ]; then
    echo "R37_NO_LLAMA=1: not building llama-server; the llama.cpp contract tests (tests/real_llama) will be skipped"
    unset R37_LLAMA_SERVER R37_LLAMA_PYTHON
    return 0
  fi
  local py cache key dir part t0 src
  py="${PYTHON:-python3}"
  cache="${R37_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/r37-cockpit}"
  key="$("$py" -c 'import sys; print(f"py{sys.version_info[0]}{sys.version_info[1]}")')-$(printf '%s' "$R37_LLAMA_PINS" | sha256sum | cut -c1-12)"
  dir="$cache/llama-$key"
  # made in a .part folder and renamed last: a half-made one (killed build) is made again, never used
  if [ ! -x "$dir/bin/llama-server" ] || [ ! -f "$dir/.r37-complete" ]; then
    command -v cmake >/dev/null 2>&1 && command -v c++ >/dev/null 2>&1 || {
      echo "llama-server needs cmake and a C++ compiler (apt-get install cmake g++)" >&2; return 1; }
    t0=$(date +%s)
    part="$dir.part"
    echo "building llama.cpp's llama-server ($R37_LLAMA_PINS) into $dir (once per machine) …"
    rm -rf "$part" "$dir"
    mkdir -p "$part/src"
    "$py" -m venv "$part/venv"
    # (pip's notes about this machine's absent local index folders are dropped: they say nothing)
    "$part/venv/bin/python" -m pip install -q --disable-pip-version-check gguf==0.19.0 \
      2> >(grep -v "is ignored: it is neither a file nor a directory" >&2)
    "$part/venv/bin/python" -m pip download -q --disable-pip-version-check --no-deps --no-binary :all: \
      -d "$part/src" llama-cpp-python==0.3.36 2> >(grep -v "is ignored: it is neither a file nor a directory" >&2)
    tar -xzf "$part"/src/llama_cpp_python-*.tar.gz -C "$part/src"
    src="$(echo "$part"/src/llama_cpp_python-*/vendor/llama.cpp)"
    # ninja if there is one (make otherwise); 2 jobs: CI's machine has 2 cores
    cmake -S "$src" -B "$part/build" $(command -v ninja >/dev/null 2>&1 && echo -G Ninja) \
      -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=OFF -DBUILD_SHARED_LIBS=OFF -DLLAMA_BUILD_TESTS=OFF \
      -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=ON -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF \
      -DLLAMA_OPENSSL=OFF >"$part/cmake.log" 2>&1 || { tail -30 "$part/cmake.log" >&2; return 1; }
    cmake --build "$part/build" --target llama-server -j2 >"$part/build.log" 2>&1 \
      || { tail -30 "$part/build.log" >&2; return 1; }
    mkdir -p "$part/bin"
    cp "$part/build/bin/llama-server" "$part/bin/llama-server"
    "$part/bin/llama-server" --version >/dev/null 2>&1 || { echo "the built llama-server does not start" >&2; return 1; }
    rm -rf "$part/src" "$part/build"
    touch "$part/.r37-complete"
    mv "$part" "$dir"
    echo "llama-server built in $(( $(date +%s) - t0 )) s"
  fi
  export R37_LLAMA_SERVER="$dir/bin/llama-server" R37_LLAMA_PYTHON="$dir/venv/bin/python"
}
