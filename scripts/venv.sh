# Sourced by scripts/demo and scripts/test: make (or reuse) the project's .venv and install into it.
# A stock Debian/Ubuntu python refuses `pip install` outside a virtual environment (PEP 668), so nothing
# is installed into the system python. Usage: r37_venv EXTRAS   (e.g. "" or "[test]")
r37_venv() {
  local root py extras="$1"
  root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
  py="${PYTHON:-python3}"
  if [ ! -x "$root/.venv/bin/python" ]; then
    if ! "$py" -m venv --help >/dev/null 2>&1 || ! "$py" -c 'import ensurepip' >/dev/null 2>&1; then
      local pkg
      pkg="python$("$py" -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")')-venv"
      if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
        echo "installing $pkg (python3 -m venv needs it) …"
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$pkg" >/dev/null
      else
        echo "python3 -m venv is not available: install it first (sudo apt-get install $pkg)" >&2
        return 1
      fi
    fi
    "$py" -m venv "$root/.venv"
  fi
  # reinstall only when pyproject.toml (or the extras asked for) changed since the last install into this
  # .venv: an unchanged checkout starts at once (an editable install already sees every source change)
  local stamp want
  stamp="$root/.venv/.r37-installed${extras//[^a-z]/-}"
  want="$(sha256sum "$root/pyproject.toml" | cut -d' ' -f1)"
  if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ] \
      || ! "$root/.venv/bin/python" -c 'import cockpit' >/dev/null 2>&1; then
    "$root/.venv/bin/python" -m pip install -q --disable-pip-version-check -e "$root$extras"
    echo "$want" > "$stamp"
  fi
  # an editable install leaves the cockpit's own modules uncompiled, and where PYTHONDONTWRITEBYTECODE is
  # set (CI machines, some shells) every start compiled them again (the TUI's imports: 0.66 s with, 0.92 s without)
  "$root/.venv/bin/python" -m compileall -q "$root/cockpit" >/dev/null
  export PATH="$root/.venv/bin:$PATH"
}
