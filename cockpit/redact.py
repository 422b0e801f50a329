"""Redaction of text that leaves the admin box (the support bundle, an alert command's stdin).

`scrub_secrets` replaces what looks like a credential wherever it stands: Hugging Face tokens (`hf_…`),
OpenAI-style keys (`sk-…`), bearer/basic `Authorization` values, GitHub/Slack tokens, private-key blocks and
the value of any `NAME=VALUE`, `NAME: VALUE` or JSON `"NAME": "VALUE"` whose NAME says key, token, secret,
password, credential or auth. `Redactor` does that and, unless told otherwise, also replaces host names,
IP addresses and user names consistently: the same input always gives the same placeholder within one
Redactor (`host-1`, `ip-2`, `user-1`, `<secret-3>`), so a bundle still shows which lines name the same
host without naming it.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable

SECRET_NAME = r"[A-Za-z0-9_.-]*(?:key|token|secret|passw(?:or)?d|credential|auth)[A-Za-z0-9_.-]*"
_PATTERNS: tuple[re.Pattern[str], ...] = (
    re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----.*?-----END [A-Z ]*PRIVATE KEY-----", re.S),
    re.compile(r"\bhf_[A-Za-z0-9]{8,}"),
    re.compile(r"\bsk-[A-Za-z0-9_-]{8,}"),
    re.compile(r"\bgh[pousr]_[A-Za-z0-9]{16,}"),
    re.compile(r"\bxox[abposr]-[A-Za-z0-9-]{8,}"),
    re.compile(r"\beyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}"),     # a JWT
)
# (prefix kept, secret value): `Authorization: Bearer X`, `NAME=X`, `NAME: X`, `"NAME": "X"`, `--api-key X`
_VALUED: tuple[re.Pattern[str], ...] = (
    re.compile(r"(?i)(authorization[\"']?\s*[:=]\s*[\"']?(?:bearer|basic|token)?\s*)([^\s\"',;]+)"),
    re.compile(r"(?i)(\bbearer\s+)([A-Za-z0-9._~+/=-]{6,})"),
    re.compile(rf"(?i)(\"{SECRET_NAME}\"\s*:\s*\")((?:[^\"\\]|\\.)+)(\")"),
    re.compile(rf"(?i)(\b{SECRET_NAME}\s*[=:]\s*[\"']?(?:(?:bearer|basic)\s+)?)([^\s\"',;]+)"),
    re.compile(rf"(?i)(--{SECRET_NAME}[= ]\s*[\"']?)([^\s\"',;]+)"),
)
_IPV4 = re.compile(r"(?<![\d.])(?:25[0-5]|2[0-4]\d|1?\d?\d)(?:\.(?:25[0-5]|2[0-4]\d|1?\d?\d)){3}(?![\d.])")
_IPV6 = re.compile(r"(?<![0-9A-Fa-f:])[0-9A-Fa-f]{0,4}(?::[0-9A-Fa-f]{0,4}){2,7}(?![0-9A-Fa-f:])")
# addresses that say nothing about a site: loopback, unspecified, the docs ranges
_KEEP_IPS = frozenset({"127.0.0.1", "0.0.0.0", "::1", "::"})
_NOT_SECRET = frozenset({"none", "null", "true", "false", "<redacted>", "", "required", "optional"})


def _is_placeholder(value: str) -> bool:
    return value.lower() in _NOT_SECRET or bool(re.fullmatch(r"<secret-\d+>", value))


class Redactor:
    """Consistent placeholders for secrets and (with `hosts`) host names, IPs and user names."""

    def __init__(self, *, hosts: bool = True, names: Iterable[str] = (), users: Iterable[str] = ()) -> None:
        self.hosts = hosts
        self._map: dict[tuple[str, str], str] = {}
        self._count: dict[str, int] = {}
        self.names: list[str] = []
        self.users: list[str] = []
        for n in names:
            self.add_name(n)
        for u in users:
            self.add_user(u)

    def _placeholder(self, kind: str, value: str) -> str:
        key = (kind, value)
        if key not in self._map:
            self._count[kind] = self._count.get(kind, 0) + 1
            n = self._count[kind]
            self._map[key] = f"<secret-{n}>" if kind == "secret" else f"{kind}-{n}"
        return self._map[key]

    def add_name(self, name: str) -> None:
        """A host name (or SSH target) to replace wherever it stands; an IP goes to the IP rule."""
        name = name.strip()
        if not name or name in self.names:
            return
        try:
            ipaddress.ip_address(name)
            return
        except ValueError:
            pass
        if name.lower() in ("localhost", "127.0.0.1"):
            return
        self.names.append(name)
        self.names.sort(key=len, reverse=True)      # the longest first: `spark-10` before `spark-1`

    def add_user(self, user: str) -> None:
        user = user.strip()
        if len(user) >= 2 and user not in self.users and user not in ("root", "nobody"):
            self.users.append(user)
            self.users.sort(key=len, reverse=True)

    @property
    def replaced(self) -> dict[str, int]:
        """How many distinct values of each kind were replaced so far."""
        return dict(self._count)

    def secrets(self, text: str) -> str:
        for pat in _PATTERNS:
            text = pat.sub(lambda m: self._placeholder("secret", m.group(0)), text)
        for pat in _VALUED:
            def one(m: re.Match[str]) -> str:
                value = m.group(2)
                if _is_placeholder(value):
                    return m.group(0)
                tail = m.group(3) if m.re.groups >= 3 else ""
                return m.group(1) + self._placeholder("secret", value) + tail
            text = pat.sub(one, text)
        return text

    def __call__(self, text: str) -> str:
        text = self.secrets(text)
        if not self.hosts:
            return text
        for kind, values in (("host", self.names), ("user", self.users)):
            for value in values:
                stand_in = self._placeholder(kind, value)
                text = re.sub(rf"(?<![A-Za-z0-9_.-]){re.escape(value)}(?![A-Za-z0-9_-])",
                              stand_in.replace("\\", "\\\\"), text)
        text = _IPV4.sub(self._ip, text)
        return _IPV6.sub(self._ip6, text)

    def _ip(self, m: re.Match[str]) -> str:
        value = m.group(0)
        return value if value in _KEEP_IPS else self._placeholder("ip", value)

    def _ip6(self, m: re.Match[str]) -> str:
        value = m.group(0)
        if sum(1 for group in value.split(":") if group) < 2:
            return value            # `d::` of `std::string`, not an address
        try:
            addr = ipaddress.IPv6Address(value)
        except ValueError:
            return value            # a time (12:30:45) or a MAC-like run, not an address
        if addr.is_loopback or addr.is_unspecified:
            return value
        return self._placeholder("ip", str(addr))


def scrub_secrets(text: str) -> str:
    """`text` with every credential replaced (`<secret-N>`, numbered within this call)."""
    return Redactor(hosts=False).secrets(text)
