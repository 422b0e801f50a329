"""Image inputs: data-URL parsing, a stdlib PNG decoder and a plain-words description of the pixels.

The description recognises what the benchmark's vision checks draw: stripes (count and colours),
a 2x2 grid (the four quadrant colours) and otherwise the dominant colour.
"""

from __future__ import annotations

import base64
import binascii
import struct
import zlib
from collections import Counter
from dataclasses import dataclass
from typing import Required, TypedDict

RGB = tuple[int, int, int]

PALETTE: dict[str, list[RGB]] = {
    "red": [(255, 0, 0), (200, 30, 30), (220, 20, 60)],
    "green": [(0, 255, 0), (0, 128, 0), (34, 139, 34), (50, 205, 50)],
    "blue": [(0, 0, 255), (30, 60, 200), (65, 105, 225), (0, 0, 139)],
    "yellow": [(255, 255, 0), (255, 215, 0)],
    "orange": [(255, 165, 0), (255, 140, 0)],
    "purple": [(128, 0, 128), (148, 0, 211), (160, 32, 240)],
    "pink": [(255, 192, 203), (255, 105, 180)],
    "cyan": [(0, 255, 255), (0, 206, 209)],
    "magenta": [(255, 0, 255)],
    "brown": [(139, 69, 19), (160, 82, 45)],
    "white": [(255, 255, 255), (245, 245, 245)],
    "black": [(0, 0, 0), (20, 20, 20)],
    "gray": [(128, 128, 128), (192, 192, 192), (80, 80, 80)],
}

NUMBER_WORDS = [
    "zero",
    "one",
    "two",
    "three",
    "four",
    "five",
    "six",
    "seven",
    "eight",
    "nine",
    "ten",
    "eleven",
    "twelve",
]


class ImageError(ValueError):
    """An image part the engine cannot accept (bad URL, bad base64)."""


@dataclass
class Image:
    """A decoded image: pixels as rows of RGB tuples (None when the format is not PNG)."""

    mime: str
    size_bytes: int
    width: int
    height: int
    rows: list[list[RGB]] | None


def colour_name(rgb: RGB) -> str:
    best, best_d = "gray", 1 << 30
    for name, refs in PALETTE.items():
        for ref in refs:
            d = sum((a - b) ** 2 for a, b in zip(rgb, ref, strict=True))
            if d < best_d:
                best, best_d = name, d
    return best


def number_word(n: int) -> str:
    return NUMBER_WORDS[n] if 0 <= n < len(NUMBER_WORDS) else str(n)


def parse_data_url(url: str) -> Image:
    """Decode a `data:<mime>;base64,<data>` URL."""
    if not url.startswith("data:"):
        raise ImageError("only data: URLs are supported by the simulated engine (it has no network)")
    head, sep, data = url.partition(",")
    if not sep or ";base64" not in head:
        raise ImageError("image data URL must be base64-encoded")
    mime = head[5:].split(";")[0] or "application/octet-stream"
    try:
        raw = base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise ImageError(f"invalid base64 image data: {exc}") from exc
    if raw.startswith(b"\x89PNG\r\n\x1a\n"):
        try:
            width, height, rows = decode_png(raw)
        except (ValueError, zlib.error, struct.error) as exc:
            raise ImageError(f"cannot decode PNG image: {exc}") from exc
        return Image("image/png", len(raw), width, height, rows)
    width, height = _jpeg_size(raw) if raw.startswith(b"\xff\xd8") else (512, 512)
    return Image(mime, len(raw), width, height, None)


def _jpeg_size(raw: bytes) -> tuple[int, int]:
    i = 2
    while i + 9 < len(raw):
        if raw[i] != 0xFF:
            i += 1
            continue
        marker = raw[i + 1]
        length = struct.unpack(">H", raw[i + 2 : i + 4])[0]
        if 0xC0 <= marker <= 0xC3:
            h, w = struct.unpack(">HH", raw[i + 5 : i + 9])
            return w, h
        i += 2 + length
    return 512, 512


def _paeth(a: int, b: int, c: int) -> int:
    p = a + b - c
    pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
    if pa <= pb and pa <= pc:
        return a
    return b if pb <= pc else c


def decode_png(raw: bytes) -> tuple[int, int, list[list[RGB]]]:
    """Decode an 8-bit non-interlaced PNG (grey, grey+alpha, RGB, RGBA, palette) to RGB rows."""
    pos, idat, palette = 8, bytearray(), b""
    width = height = depth = ctype = interlace = 0
    while pos < len(raw):
        length, kind = struct.unpack(">I4s", raw[pos : pos + 8])
        body = raw[pos + 8 : pos + 8 + length]
        pos += 12 + length
        if kind == b"IHDR":
            width, height, depth, ctype, _, _, interlace = struct.unpack(">IIBBBBB", body)
        elif kind == b"PLTE":
            palette = body
        elif kind == b"IDAT":
            idat += body
        elif kind == b"IEND":
            break
    if depth != 8 or interlace:
        raise ValueError(f"unsupported PNG (bit depth {depth}, interlace {interlace})")
    channels = {0: 1, 2: 3, 3: 1, 4: 2, 6: 4}.get(ctype)
    if channels is None:
        raise ValueError(f"unsupported PNG colour type {ctype}")
    data = zlib.decompress(bytes(idat))
    stride = width * channels
    prev = bytearray(stride)
    rows: list[list[RGB]] = []
    for y in range(height):
        start = y * (stride + 1)
        ftype, line = data[start], bytearray(data[start + 1 : start + 1 + stride])
        for x in range(stride):
            a = line[x - channels] if x >= channels else 0
            b = prev[x]
            c = prev[x - channels] if x >= channels else 0
            if ftype == 1:
                line[x] = (line[x] + a) & 0xFF
            elif ftype == 2:
                line[x] = (line[x] + b) & 0xFF
            elif ftype == 3:
                line[x] = (line[x] + ((a + b) >> 1)) & 0xFF
            elif ftype == 4:
                line[x] = (line[x] + _paeth(a, b, c)) & 0xFF
        prev = line
        rows.append([_pixel(line, x * channels, ctype, palette) for x in range(width)])
    return width, height, rows


def _pixel(line: bytearray, i: int, ctype: int, palette: bytes) -> RGB:
    if ctype in (0, 4):
        return (line[i], line[i], line[i])
    if ctype == 3:
        j = 3 * line[i]
        return (palette[j], palette[j + 1], palette[j + 2])
    return (line[i], line[i + 1], line[i + 2])


def _sample(rows: list[list[RGB]], limit: int = 96) -> list[list[str]]:
    """Colour names on a grid of at most limit x limit samples."""
    h, w = len(rows), len(rows[0]) if rows else 0
    ys = sorted({int(i * h / min(h, limit)) for i in range(min(h, limit))})
    xs = sorted({int(i * w / min(w, limit)) for i in range(min(w, limit))})
    cache: dict[RGB, str] = {}
    out = []
    for y in ys:
        row = []
        for x in xs:
            px = rows[y][x]
            if px not in cache:
                cache[px] = colour_name(px)
            row.append(cache[px])
        out.append(row)
    return out


def _uniform(cells: list[str], share: float = 0.9) -> str | None:
    name, n = Counter(cells).most_common(1)[0]
    return name if n >= share * len(cells) else None


def _runs(names: list[str]) -> list[str]:
    out: list[str] = []
    for n in names:
        if not out or out[-1] != n:
            out.append(n)
    return out


class Analysis(TypedDict, total=False):
    """What analyse found: kind, plus the keys that kind carries."""

    kind: Required[str]  # stripes / grid / plain / unknown
    orientation: str  # stripes: vertical / horizontal
    colours: list[str]  # stripes: one per stripe; grid: top-left, top-right, bottom-left, bottom-right
    dominant: str  # plain


def _all_named(cells: list[str | None]) -> list[str] | None:
    """The cells as names if every one has a name (the `all(cells)` test, narrowed), else None."""
    names = [c for c in cells if c]
    return names if len(names) == len(cells) else None


def analyse(img: Image) -> Analysis:
    """Classify an image: kind in stripes / grid / plain / unknown, with colours."""
    if not img.rows or not img.rows[0]:
        return {"kind": "unknown"}
    grid = _sample(img.rows)
    h, w = len(grid), len(grid[0])
    flat = [c for row in grid for c in row]
    dominant = Counter(flat).most_common(1)[0][0]
    cols = _all_named([_uniform([grid[y][x] for y in range(h)], 0.95) for x in range(w)])
    rows = _all_named([_uniform(grid[y], 0.95) for y in range(h)])
    if cols is not None and len(_runs(cols)) >= 2:
        return {"kind": "stripes", "orientation": "vertical", "colours": _runs(cols)}
    if rows is not None and len(_runs(rows)) >= 2:
        return {"kind": "stripes", "orientation": "horizontal", "colours": _runs(rows)}
    quads: list[str | None] = []
    for qy in (0, 1):
        for qx in (0, 1):
            cells = [
                grid[y][x]
                for y in range(qy * h // 2, (qy + 1) * h // 2)
                for x in range(qx * w // 2, (qx + 1) * w // 2)
            ]
            quads.append(_uniform(cells, 0.85) if cells else None)
    named = _all_named(quads)
    if named is not None and len(set(named)) >= 2:
        return {"kind": "grid", "colours": named}
    return {"kind": "plain", "dominant": dominant}


def describe_one(img: Image) -> str:
    a = analyse(img)
    if a["kind"] == "stripes":
        colours = a["colours"]
        return (
            f"{number_word(len(colours))} {a['orientation']} stripes, from "
            f"{'left to right' if a['orientation'] == 'vertical' else 'top to bottom'}: "
            f"{', '.join(colours)}"
        )
    if a["kind"] == "grid":
        tl, tr, bl, br = a["colours"]
        return (
            f"a 2x2 grid of coloured squares: top-left {tl}, top-right {tr}, "
            f"bottom-left {bl}, bottom-right {br}"
        )
    if a["kind"] == "plain":
        return f"an image that is mostly {a['dominant']}"
    return f"an image ({img.mime}, {img.width}x{img.height}) whose details I cannot make out"


def describe(images: list[Image]) -> str:
    """Describe all images of a request in one answer."""
    if len(images) == 1:
        d = describe_one(images[0])
        return f"The image shows {d}."
    ordinals = ["first", "second", "third", "fourth"]
    parts = []
    for i, img in enumerate(images):
        a = analyse(img)
        text = f"mostly {a['dominant']}" if a["kind"] == "plain" else describe_one(img)
        parts.append(f"the {ordinals[i] if i < 4 else str(i + 1) + 'th'} image is {text}")
    dominant = [str(analyse(img).get("dominant", "")) for img in images]
    summary = ""
    if all(dominant):
        summary = f" The dominant colours are {', '.join(dominant[:-1])} and {dominant[-1]}."
    return f"There are {number_word(len(images))} images: " + "; ".join(parts) + "." + summary
