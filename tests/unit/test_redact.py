"""cockpit.redact: every credential shape replaced, hosts/IPs/users replaced consistently, and what only
looks like an address (a time, a MAC, `std::string`) left alone."""

from __future__ import annotations

import pytest

from cockpit.redact import Redactor, scrub_secrets


@pytest.mark.parametrize("text", [
    "HF_TOKEN=hf_abcdefghijklmnop", "Authorization: Bearer abcdef123456", '"api_key": "zzz-top"',
    "--api-key sk-1234567890abc", "export OPENAI_API_KEY='sk-1234567890abc'", "password: hunter2hunter",
    "x ghp_abcdefghijklmnopqrstuvwx y",
    "-----BEGIN OPENSSH PRIVATE KEY-----\nAAAA\n-----END OPENSSH PRIVATE KEY-----",
    "Authorization: Basic dXNlcjpwYXNz", "token=eyJhbGciOiJIUzI1.eyJzdWIiOiIxMjM0.SflKxwRJSMeKKF2QT4",
])
def test_secrets_are_replaced(text: str) -> None:
    out = scrub_secrets(text)
    assert "<secret-1>" in out
    for word in ("abcdefghijklmnop", "abcdef123456", "zzz-top", "1234567890abc", "hunter2hunter", "AAAA",
                 "dXNlcjpwYXNz", "SflKxwRJSMeKKF2QT4", "ghp_abc"):
        assert word not in out


def test_same_value_same_placeholder_and_hosts_users_ips() -> None:
    r = Redactor(names=["spark-1", "spark-10"], users=["alice"])
    a = r("ssh alice@spark-10 at 192.168.100.11; spark-1 is 192.168.100.10; fe80::4ebb:47ff:fe2c:110")
    b = r("again spark-10 192.168.100.11 and token=s3cr3tvalue")
    assert "spark-1" not in a + b and "alice" not in a and "192.168" not in a + b and "fe80" not in a
    h10 = a.split("@")[1].split()[0]
    assert h10.startswith("host-") and h10 in b
    ip11 = a.split(" at ")[1].split(";")[0]
    assert ip11.startswith("ip-") and ip11 in b and "<secret-1>" in b


def test_lookalikes_are_kept() -> None:
    r = Redactor(names=["spark-1"])
    text = "12:30:45 std::string 4c:bb:47:2c:01:10 127.0.0.1 ::1 v0.32.0 spark-1x"
    assert r(text) == text


def test_hosts_kept_when_asked() -> None:
    r = Redactor(hosts=False, names=["spark-1"])
    assert r("spark-1 10.0.0.1 token=abcdefgh") == "spark-1 10.0.0.1 token=<secret-1>"
