"""Every modal of the cockpit: confirm (a question; host commands to run), overwrite, path prompt, a
scrollable detail, the drain countdown before a stop, the key map and the incident timeline (events).
Their key hints come from their own bindings (`cockpit.tui.keys`)."""

from cockpit.tui.dialogs.confirm import Confirm, ConfirmCommands, ConfirmResult
from cockpit.tui.dialogs.detail import Detail
from cockpit.tui.dialogs.drain import DrainDialog
from cockpit.tui.dialogs.events import EventsScreen
from cockpit.tui.dialogs.keymap import KeyMapScreen
from cockpit.tui.dialogs.overwrite import ConfirmOverwrite
from cockpit.tui.dialogs.prompt import PathPrompt

__all__ = ["Confirm", "ConfirmCommands", "ConfirmOverwrite", "ConfirmResult", "Detail", "DrainDialog",
           "EventsScreen",
           "KeyMapScreen", "PathPrompt"]
