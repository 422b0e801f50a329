"""API URLs without their secrets: credentials in `http://user:key@host` are split off for the
Authorization header and never shown, logged or written."""

from __future__ import annotations

import base64
from urllib.parse import unquote, urlsplit, urlunsplit


def split_credentials(url: str) -> tuple[str, tuple[str, str] | None]:
    """`(url without userinfo, (user, password) or None)`."""
    parts = urlsplit(url)
    if parts.username is None and parts.password is None:
        return url, None
    host = parts.netloc.rpartition("@")[2]
    clean = urlunsplit((parts.scheme, host, parts.path, parts.query, parts.fragment))
    return clean, (unquote(parts.username or ""), unquote(parts.password or ""))


def redact(url: str) -> str:
    """`url` as it may be shown: `http://user:***@host:port/…` (the user kept, the secret never)."""
    clean, creds = split_credentials(url)
    if creds is None:
        return url
    p = urlsplit(clean)
    return urlunsplit((p.scheme, f"{creds[0]}:***@{p.netloc}", p.path, p.query, p.fragment))


def basic_auth(creds: tuple[str, str]) -> str:
    """The `Authorization` header value for HTTP basic auth (what httpx sends for a URL's userinfo)."""
    return "Basic " + base64.b64encode(f"{creds[0]}:{creds[1]}".encode()).decode("ascii")
