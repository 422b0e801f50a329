"""Forwarding names only, while files of other owners still import them from here; then this module goes.

The container log code is in `logline` (a line, its timestamps, formatting and saving), `logstore` (the
bounded per-rank store and merged view) and `logfollow` (the per-rank `docker logs -f` followers).
Still importing from here: `telemetry/logfilter.py` (LogLine), and, until their owners commit the new
import lines already in the working tree, `tui/panes/logs.py`, `tui/widgets/logview.py` and
`tui/messages.py`.
"""

from cockpit.telemetry.logfollow import NO_CONTAINER, FollowEvent, follow
from cockpit.telemetry.logline import LogLine, save_lines, short_timestamp
from cockpit.telemetry.logstore import DEFAULT_CAPACITY, LogStore

__all__ = ["DEFAULT_CAPACITY", "NO_CONTAINER", "FollowEvent", "LogLine", "LogStore", "follow", "save_lines",
           "short_timestamp"]
