"""`r37-cockpit history`: the command log of past cockpit sessions (`cockpit.recipe.history`)."""

from __future__ import annotations

import argparse
import os
import sys
import time
from typing import Any

from cockpit.cli.commands import SUMMARY
from cockpit.cli.common import EXIT_OK, add_json, print_json, table, usage_error


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("history", help=SUMMARY["history"],
                       description="Without SESSION: every recorded cockpit session, newest first (id, "
                                   "start, command, cluster, its config file, commands run, failures). With "
                                   "SESSION (an id, the start of one, or `last`): the commands that session "
                                   "ran, in order "
                                   "(time, rank, who asked, exit, duration, the exact line). Session files "
                                   "live in $XDG_STATE_HOME/r37-cockpit/sessions/.")
    p.add_argument("session", nargs="?", metavar="SESSION", help="a session id, the start of one, or `last`")
    p.add_argument("--rank", type=int, action="append", metavar="N",
                   help="only this rank's commands (repeatable)")
    p.add_argument("--grep", metavar="TEXT", help="only commands whose line or origin contains TEXT "
                                                  "(case-insensitive)")
    add_json(p)
    p.set_defaults(func=cmd_history)


def when(t: object, fmt: str = "%Y-%m-%d %H:%M:%S") -> str:
    try:
        return time.strftime(fmt, time.localtime(float(t)))  # type: ignore[arg-type]
    except (TypeError, ValueError, OverflowError, OSError):
        return "—"


def short_path(path: object) -> str:
    """A config path as the operator typed it would read: the home directory as `~`."""
    text = str(path or "")
    home = os.path.expanduser("~")
    if home not in ("", "/") and (text == home or text.startswith(home + os.sep)):
        return "~" + text[len(home):]
    return text


def cmd_history(args: argparse.Namespace) -> int:
    from cockpit.recipe.history import find_session, list_sessions, matches, outcome_label
    from cockpit.safetext import neutralise, safe

    if not args.session:
        if args.rank or args.grep:
            raise usage_error("--rank and --grep filter one session's commands: name the session "
                              "(`r37-cockpit history last --grep docker`)")
        sessions, notes = list_sessions()
        if args.json:
            print_json({"ok": True, "sessions": [s.summary() for s in sessions], "notes": notes})
            return EXIT_OK
        for note in notes:
            print(f"note: {safe(note, 400)}", file=sys.stderr)
        if not sessions:
            print("no sessions recorded yet: every cockpit command that reaches the hosts records one")
            return EXIT_OK
        rows = [[s.id, when(s.header.get("started")), safe(s.header.get("command", ""), 40),
                 safe(s.header.get("cluster", ""), 40), safe(short_path(s.header.get("config")), 60) or "—",
                 str(len(s.entries)), str(s.failures)]
                for s in sessions]
        print(table(rows, ["session", "started", "command", "cluster", "config", "commands", "failed"]))
        return EXIT_OK

    found = find_session(args.session)
    if found is None:
        raise usage_error(f"no session {safe(args.session, 80)!r}: `r37-cockpit history` lists them")
    entries = [e for e in found.entries
               if matches(e.rank, e.line, e.origin, args.rank or (), args.grep or "")]
    if args.json:
        summary: dict[str, Any] = found.summary()
        print_json({"ok": True, "session": {**summary, "header": found.header},
                    "commands": [e.as_json() for e in entries], "notes": found.notes})
        return EXIT_OK
    h = found.header
    config = safe(short_path(h.get("config")), 200)
    print(f"session {found.id}: {safe(h.get('command', ''), 40)} on {safe(h.get('cluster', ''), 40) or '—'}"
          + (f" ({config})" if config else "")
          + f", started {when(h.get('started'))}, {len(found.entries)} commands, {found.failures} failed")
    for note in found.notes:
        print(f"note: {safe(note, 400)}", file=sys.stderr)
    rows = [[when(e.t, "%H:%M:%S"), str(e.rank), neutralise(e.origin) or "—", outcome_label(e.exit, e.note),
             "—" if e.duration is None else f"{e.duration:.2f}s", neutralise(e.line)] for e in entries]
    if rows:
        print(table(rows, ["time", "rank", "origin", "exit", "duration", "line"]))
    else:
        print("no command matches" if (args.rank or args.grep) else "no commands recorded")
    return EXIT_OK
