"""The live progress block of headless `launch` and `setup` on a terminal: lines rewritten in place,
permanent lines above, every live line cut to the terminal width and neutralised."""

from __future__ import annotations

import io
import re

from cockpit.cli.progress import CLEAR_BELOW, CLEAR_LINE, LiveBlock, fit, live_output


class FakeTTY(io.StringIO):
    def isatty(self) -> bool:
        return True


def screen(data: str, rows: int = 40) -> list[str]:
    """What a terminal shows after `data`: a tiny emulator of the escapes the block writes."""
    lines, row, col = [""] * rows, 0, 0
    for token in re.findall(r"\x1b\[\d*[A-Za-z]|\n|\r|[^\x1b\n\r]", data):
        if token == "\n":
            row, col = row + 1, 0
        elif token == "\r":
            col = 0
        elif token.startswith("\x1b["):
            n, op = int(token[2:-1] or 1), token[-1]
            if op == "F":
                row, col = max(0, row - n), 0
            elif op == "K":
                lines[row] = ""
            elif op == "J":
                lines[row] = lines[row][:col]
                lines[row + 1:] = [""] * (rows - row - 1)
        else:
            lines[row] = lines[row][:col].ljust(col) + token + lines[row][col + 1:]
            col += 1
    return list(lines[:row]) + ([lines[row]] if lines[row] else [])


def test_lines_are_rewritten_in_place_and_permanent_lines_go_above() -> None:
    out = FakeTTY()
    block = LiveBlock(out, width=lambda: 80)
    for done in range(1, 49):
        block.update(1, f"rank 1   loading weights {done}/48")
        block.update(0, f"rank 0   loading weights {done}/48")
    assert screen(out.getvalue()) == ["rank 0   loading weights 48/48", "rank 1   loading weights 48/48"]
    block.print("rank 1 FAILED: NCCL timeout\n    cause: peer gone")
    block.update("api", "API: not ready")
    block.update(1, "rank 1 FAILED: NCCL timeout")
    assert screen(out.getvalue()) == ["rank 1 FAILED: NCCL timeout", "    cause: peer gone",
                                      "rank 0   loading weights 48/48", "rank 1 FAILED: NCCL timeout",
                                      "API: not ready"]
    block.close()
    out.write("result: ready\n")   # after close, output simply follows the block
    assert screen(out.getvalue())[-2:] == ["API: not ready", "result: ready"]


def test_the_cursor_moves_back_exactly_the_rows_drawn() -> None:
    out = FakeTTY()
    block = LiveBlock(out, width=lambda: 80)
    block.update(0, "a")
    block.update(1, "b")
    out.seek(0)
    out.truncate()
    block.update(0, "c")
    assert out.getvalue() == f"\x1b[2F{CLEAR_LINE}c\n{CLEAR_LINE}b\n"
    block.update(0, "c")       # unchanged: nothing written
    assert out.getvalue().count("c") == 1
    block.remove(1)            # a shorter block clears the row it no longer uses
    assert out.getvalue().endswith(f"\x1b[2F{CLEAR_LINE}c\n{CLEAR_BELOW}")
    assert screen(out.getvalue()) == ["c"]


def test_live_lines_are_cut_to_the_width_and_neutralised() -> None:
    out = FakeTTY()
    block = LiveBlock(out, width=lambda: 20)
    block.update(0, "rank 0 | " + "x" * 100)
    block.update(1, "rank 1 | \x1b]52;c;aGk=\x07\x1b[2Jevil")
    rows = screen(out.getvalue())
    assert rows[0] == "rank 0 | xxxxxxxxx…" and len(rows[0]) == 19   # one cell short: never wraps
    assert "\x1b]" not in out.getvalue() and "\x07" not in out.getvalue() and "\x1b[2J" not in out.getvalue()
    assert rows[1].startswith("rank 1 | ␛]52") and len(rows[1]) <= 19


def test_fit_counts_wide_characters_as_two_cells() -> None:
    assert fit("日本語のログ", 7) == "日本語…"
    assert fit("short", 10) == "short" and fit("anything", 0) == ""
    assert fit("e\u0301" * 5, 5) == "e\u0301" * 5   # combining marks take no cell


def test_live_only_on_a_terminal_without_json_or_verbose() -> None:
    assert live_output(FakeTTY())
    assert not live_output(FakeTTY(), verbose=True)
    assert not live_output(FakeTTY(), json=True)
    assert not live_output(io.StringIO())
