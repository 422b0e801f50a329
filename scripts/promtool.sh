# Sourced by scripts/test: put Debian's `promtool` (package `prometheus`) into the project's .venv/bin when
# no promtool is on PATH. Only the promtool binary is taken out of the package (apt-get download, then
# dpkg-deb -x): installing the package itself would also start a Prometheus server through its init
# script. Needs apt-get (a Debian/Ubuntu machine); elsewhere the promtool tests skip with their reason.
r37_promtool() {
  local root tmp
  root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
  command -v promtool >/dev/null 2>&1 && return 0
  [ -x "$root/.venv/bin/promtool" ] && return 0
  command -v apt-get >/dev/null 2>&1 || { echo "note: no apt-get: the promtool tests will be skipped" >&2; return 0; }
  tmp="$(mktemp -d)"
  echo "fetching Debian's prometheus package for promtool …"
  if [ "$(id -u)" = 0 ] && ! apt-cache show prometheus >/dev/null 2>&1; then apt-get update -qq; fi
  if (cd "$tmp" && apt-get download -qq prometheus >/dev/null 2>&1) \
     && dpkg-deb -x "$tmp"/prometheus_*.deb "$tmp/x" && [ -x "$tmp/x/usr/bin/promtool" ]; then
    install -m 755 "$tmp/x/usr/bin/promtool" "$root/.venv/bin/promtool"
  else
    echo "note: Debian's prometheus package could not be fetched: the promtool tests will be skipped" >&2
  fi
  rm -rf "$tmp"
}
