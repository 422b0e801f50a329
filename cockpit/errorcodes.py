"""Stable error codes: every failure state a user can reach, named once, for `--json` and the README.

A code never changes meaning once published; `--json` output carries it as `error.code` (a command that
failed) or as a `code` field beside a host's, a check's or the API's state. The README's "Error codes"
table lists every code of `CODES` (a test keeps the two in step).
"""

from __future__ import annotations

from typing import NamedTuple


class ErrorCode(NamedTuple):
    code: str
    meaning: str
    remedy: str


_ALL = [
    # configuration and usage
    ErrorCode("usage", "a bad argument, option or --rank", "see `r37-cockpit COMMAND --help`"),
    ErrorCode("config-missing", "no cluster.toml where it was looked for",
              "`r37-cockpit config import-env` from the recipe's cluster.env, copy cluster.toml.example, "
              "or pass `--config PATH`"),
    ErrorCode("config-invalid", "cluster.toml cannot be used (file, key and reason are named)",
              "fix the named key; `r37-cockpit config check`"),
    ErrorCode("cluster-unknown", "`--cluster NAME` names no known cluster (the known ones are listed)",
              "use a listed name: the main cluster.toml's, a `cluster.d/*.toml`'s or another `--config`'s "
              "`[cluster] name`"),
    ErrorCode("cluster-name-taken", "two cluster files have the same `[cluster] name`",
              "give each cluster.toml a `[cluster] name` of its own"),
    ErrorCode("env-invalid", "a cluster.env cannot be imported (line and reason are named)",
              "fix the named line of cluster.env"),
    ErrorCode("file-exists", "a file the cockpit would write exists already",
              "choose another path or --force"),
    ErrorCode("write-failed", "a file could not be written (permission, disk full, not a directory)",
              "read the reason; choose another path or free the space"),
    ErrorCode("file-corrupt", "a state file of the cockpit could not be read; it was kept aside",
              "read the file named in the message; the cockpit started a fresh one"),
    # hosts and SSH
    ErrorCode("host-unreachable", "the host does not answer SSH (refused, no route, no DNS)",
              "check that the host is up and sshd runs; the cockpit retries with backoff"),
    ErrorCode("host-timeout", "the host accepts TCP but does not complete SSH within connect_timeout",
              "check sshd on the host (hung, overloaded) and [ssh] connect_timeout"),
    ErrorCode("host-lost", "a connected host stopped answering (keepalive or channel lost)",
              "wait for the reconnect; check the link and the host"),
    ErrorCode("auth-failed", "SSH authentication was refused", "check the user, IdentityFile and ssh-agent"),
    ErrorCode("host-key-unknown", "the host's key is in no known_hosts file",
              "verify the fingerprint shown with the host's administrator, then "
              "`r37-cockpit hosts trust --rank N --fingerprint SHA256:…`"),
    ErrorCode("host-key-changed", "the host's key differs from the one known_hosts holds (possible attack)",
              "do not connect: ask the host's administrator; if the change is expected, remove the old "
              "line (`ssh-keygen -R HOST`) and trust the new key"),
    ErrorCode("host-key-revoked", "the host's key is marked @revoked in known_hosts",
              "do not connect: the key was revoked on purpose"),
    ErrorCode("known-hosts-missing", "the known_hosts file the cockpit checks against does not exist",
              "create it with the hosts' verified keys, or set [ssh] known_hosts"),
    ErrorCode("ssh-config-unsafe", "an SSH setting would turn host-key checking off",
              "remove `UserKnownHostsFile none` / `StrictHostKeyChecking no` for these hosts"),
    ErrorCode("fingerprint-mismatch", "the host offers a key whose fingerprint is not the one given to "
              "`hosts trust` (nothing was written)",
              "check the fingerprint with the host's administrator; a different key may mean an attack"),
    ErrorCode("command-timeout", "a command on a host did not finish in time", "look at the host; retry"),
    ErrorCode("command-failed", "a command on a host exited non-zero", "read its output shown with it"),
    # preflight, setup, launch, stop
    ErrorCode("preflight-failed", "a preflight check failed", "the check's remedy says what to fix"),
    ErrorCode("preflight-unknown", "a preflight check could not be decided (host down, unreadable output)",
              "reconnect the host and run preflight again; unknown is never a pass"),
    ErrorCode("setup-failed", "a setup job failed on a host", "read the job's output; rerun the job"),
    ErrorCode("read-only", "the cockpit runs read-only (--read-only or [ui] read_only) and the command "
              "would change a host (nothing was run)",
              "run it from a cockpit without --read-only and without `[ui] read_only = true` in "
              "cluster.toml"),
    ErrorCode("needs-confirmation", "a host-changing action was not confirmed", "add --yes after reading it"),
    ErrorCode("launch-blocked", "a guard refused the action (a container in the way, preflight, the lock, "
              "a setup job refused on a host)",
              "the message names the guard and its remedy"),
    ErrorCode("cluster-locked", "another cockpit holds the launch lock on rank 0's host",
              "wait for it, or `--break-lock` once it is known dead"),
    ErrorCode("launch-failed", "a rank failed during the launch", "read the rank's first failure and log"),
    ErrorCode("dry-run-failed", "the launch's dry run failed on a rank", "`r37-cockpit setup recipe`, then "
              "`r37-cockpit setup env`"),
    ErrorCode("rank-failed", "a rank's container failed (crashed, OOM, exited non-zero): the cluster is down",
              "read the rank's first failure; stop all ranks, relaunch"),
    ErrorCode("state-unknown", "the cockpit cannot tell the cluster's state (docker unreadable on a host, "
              "or a rank not read yet)", "look at the host named; `r37-cockpit status` again"),
    ErrorCode("launch-incomplete", "some ranks have a container, others none, and no launch is running "
              "(an interrupted launch)", "stop what runs (`r37-cockpit stop`), then launch again"),
    ErrorCode("not-stopped", "a rank could not be stopped (host unreachable or docker failed)",
              "retry when the host is back; `--force` skips unreachable ranks"),
    ErrorCode("not-ours", "the container was not started by this cockpit", "stop it the way it was started"),
    ErrorCode("fabric-failed", "a pair of ranks failed the fabric test or is slow (ib_write_bw/ib_write_lat)",
              "the test names the slow link and its remedy: cable/port, MTU, GID index, PFC"),
    # the engine's API
    ErrorCode("api-unreachable", "nothing answers on the API (tunnel down or engine not listening)",
              "check the tunnel to rank 0 and that the engine is up"),
    ErrorCode("api-not-ready", "the API is up but the engine is still booting", "wait for startup complete"),
    ErrorCode("api-engine-dead", "the engine died", "read rank 0's log; stop all ranks and relaunch"),
    ErrorCode("api-http-error", "the API answered with an HTTP error", "read the status and message"),
    ErrorCode("api-unauthorized", "API key needed or refused: the API answered 401 or 403",
              "pass the key with --api-key KEY or the OPENAI_API_KEY variable (sent as a bearer key)"),
    ErrorCode("api-protocol-error",
              "the server's answer does not follow the OpenAI API (the part that arrived is kept)",
              "check --api-url points at vLLM's OpenAI server"),
    ErrorCode("api-timeout", "the API did not answer within its deadline", "check /metrics for a hang"),
    ErrorCode("api-server-error", "the engine reported an error", "read the message; rank 0's log"),
    ErrorCode("api-first-token-timeout", "no first token within first_token_timeout_s",
              "the engine may be hung: `r37-cockpit status`"),
    ErrorCode("api-idle-timeout", "the answer stopped mid-way for idle_timeout_s",
              "the engine may be hung: `r37-cockpit status`"),
    ErrorCode("api-too-large", "an answer was larger than the cockpit's cap (cut, with a mark)",
              "check what the server sends; caps are in the README"),
    ErrorCode("engine-hung", "the engine holds requests but makes no progress",
              "collect logs, stop, relaunch"),
    # the cockpit itself
    ErrorCode("port-in-use", "`serve` cannot listen: another program has the port",
              "choose another with `--port`, or stop the other `r37-cockpit serve`"),
    ErrorCode("interrupted", "interrupted by Ctrl-C", "rerun the command"),
    ErrorCode("internal", "a bug in the cockpit", "rerun with R37_DEBUG=1 and report the traceback"),
]

CODES: dict[str, ErrorCode] = {c.code: c for c in _ALL}


def code_for_api_kind(kind: str) -> str:
    """The stable code of an API error kind (`first_token_timeout` → `api-first-token-timeout`)."""
    code = "api-" + kind.replace("_", "-")
    return code if code in CODES else "api-server-error"


def check(code: str) -> str:
    """`code` itself, after making sure it is a published one (a typo is a bug, found by the tests)."""
    if code not in CODES:
        raise KeyError(f"unpublished error code {code!r}")
    return code
