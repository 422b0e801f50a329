"""The vision checks' images, drawn here and encoded as PNG with the standard library (zlib, struct).

Every image is 8-bit RGB, one unfiltered scanline per row: small, exact and readable by any decoder.
"""

from __future__ import annotations

import base64
import struct
import zlib
from collections.abc import Callable, Sequence
from typing import Any

RGB = tuple[int, int, int]

COLOURS: dict[str, RGB] = {
    "red": (255, 0, 0),
    "green": (0, 160, 0),
    "blue": (0, 0, 255),
    "yellow": (255, 255, 0),
}
"""The colours the checks draw, by the name the answer must give."""

_SIGNATURE = b"\x89PNG\r\n\x1a\n"
MAX_SIDE = 4096
"""The largest width or height :func:`encode_png` draws (the checks need a few hundred pixels)."""


def _chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def encode_png(width: int, height: int, pixel: Callable[[int, int], RGB]) -> bytes:
    """A PNG of ``width`` × ``height`` whose pixel at column x, row y is ``pixel(x, y)``."""
    if not (0 < width <= MAX_SIDE and 0 < height <= MAX_SIDE):
        raise ValueError(f"image size must be 1-{MAX_SIDE} pixels a side, not {width}x{height}")
    raw = bytearray()
    for y in range(height):
        raw.append(0)  # filter type 0: the row as it is
        for x in range(width):
            raw += bytes(pixel(x, y))
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)  # 8-bit RGB, no interlace
    return (_SIGNATURE + _chunk(b"IHDR", ihdr) + _chunk(b"IDAT", zlib.compress(bytes(raw), 9))
            + _chunk(b"IEND", b""))


def stripes(colours: Sequence[RGB], width: int = 256, height: int = 128) -> bytes:
    """Vertical stripes of equal width, ``colours`` from left to right."""
    if not colours or len(colours) > width:
        raise ValueError(f"need 1-{width} stripe colours, not {len(colours)}")
    n = len(colours)
    return encode_png(width, height, lambda x, _y: colours[min(x * n // width, n - 1)])


def grid(top_left: RGB, top_right: RGB, bottom_left: RGB, bottom_right: RGB, side: int = 256) -> bytes:
    """A square split into four quadrants of the given colours."""
    half = side // 2
    quads = ((top_left, top_right), (bottom_left, bottom_right))
    return encode_png(side, side, lambda x, y: quads[y >= half][x >= half])


def solid(colour: RGB, side: int = 128) -> bytes:
    """A square of one colour."""
    return encode_png(side, side, lambda _x, _y: colour)


def image_part(png: bytes) -> dict[str, Any]:
    """An OpenAI ``image_url`` content part holding ``png`` as a base64 data URL."""
    url = "data:image/png;base64," + base64.b64encode(png).decode("ascii")
    return {"type": "image_url", "image_url": {"url": url}}
