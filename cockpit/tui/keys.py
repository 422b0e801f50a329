"""Keys as they are bound NOW: a node's bindings with the app's keymap applied, and hints built from them.

Status lines and dialogs never spell a key out: they ask here, so a key remapped in ``[ui.keymap]``
shows as remapped everywhere (the key map screen, the palette, every hint).
"""

from __future__ import annotations

from collections.abc import Sequence

from rich.text import Text
from textual.actions import parse as parse_action
from textual.binding import Binding, BindingsMap
from textual.dom import DOMNode


def action_name(action: str) -> str:
    """"save(False)" → "save"; "app.quit" → "quit"."""
    return parse_action(action)[1]


def current_bindings(node: DOMNode, *, disabled: bool = False) -> list[tuple[Binding, str]]:
    """`node`'s own bindings with the keymap applied: (binding, key shown), one row per binding id (a
    binding on two keys shows both, "f/end"); actions the node's `check_action` refuses are left out
    unless `disabled` (text that says which key does something later)."""
    bindings = BindingsMap(type(node).BINDINGS)
    app = node.app if node.is_attached else None
    keymap = getattr(app, "keymap", None) or {}
    if keymap:
        bindings.apply_keymap(keymap)
    rows: dict[str, tuple[Binding, list[str]]] = {}
    for _key, binding in bindings:
        _ns, name, params = parse_action(binding.action)
        if not disabled and node.check_action(name, params) is False:
            continue
        ident = binding.id or binding.action
        shown = app.get_key_display(binding) if app is not None else binding.key
        if ident in rows:
            if shown not in rows[ident][1]:
                rows[ident][1].append(shown)
        else:
            rows[ident] = (binding, [shown])
    return [(binding, "/".join(keys)) for binding, keys in rows.values()]


def key_for(node: DOMNode, action: str, *, disabled: bool = False) -> str:
    """The key bound to `action` ("save" or "save(False)") on `node` now; "" when none is (or, unless
    `disabled`, when the action is off now)."""
    for binding, key in current_bindings(node, disabled=disabled):
        if binding.action == action or action_name(binding.action) == action:
            return key
    return ""


def hints(node: DOMNode, actions: Sequence[str] | None = None, *,
          labels: dict[str, str] | None = None) -> Text:
    """ "d dry run · l launch · …" for `actions` (names or full action strings, in order), or for every
    binding the node shows in the footer; `labels` replaces a binding's description."""
    rows = current_bindings(node)
    if actions is not None:
        chosen = []
        for wanted in actions:
            found = next(((b, k) for b, k in rows if b.action == wanted), None) or next(
                ((b, k) for b, k in rows if action_name(b.action) == wanted), None)
            if found is not None:
                chosen.append(found)
        rows = chosen
    else:
        rows = [(b, k) for b, k in rows if b.show]
    text = Text(style="muted")
    for i, (binding, key) in enumerate(rows):
        if i:
            text.append(" · ")
        text.append(key, style="bold")
        label = (labels or {}).get(binding.action) or (labels or {}).get(action_name(binding.action))
        text.append(f" {label or (binding.description or binding.action).lower()}")
    return text
