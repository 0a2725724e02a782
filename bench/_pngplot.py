"""A scatter plot written as a PNG with the standard library only (zlib + struct).

bench/interference.py draws p99 latency against node CPU, one point per arm and
round, without adding a plotting library to the project: an RGB canvas, filled
squares for points, one-pixel axes and grid lines, and a 3x5 bitmap font for the
tick labels, axis titles and legend. `png_bytes` encodes any canvas
(PNG: 8-bit RGB, filter 0 on every row, one IDAT chunk).
"""

from __future__ import annotations

import math
import struct
import zlib
from collections.abc import Sequence
from dataclasses import dataclass

RGB = tuple[int, int, int]
WHITE: RGB = (255, 255, 255)
BLACK: RGB = (0, 0, 0)
GREY: RGB = (220, 220, 220)
PALETTE: tuple[RGB, ...] = (
    (31, 119, 180),
    (214, 39, 40),
    (44, 160, 44),
    (148, 103, 189),
    (255, 127, 14),
    (23, 190, 207),
)

# 3x5 glyphs, rows top to bottom, "#" lit.
_FONT_ROWS = {
    "0": "### #.# #.# #.# ###",
    "1": ".#. ##. .#. .#. ###",
    "2": "### ..# ### #.. ###",
    "3": "### ..# .## ..# ###",
    "4": "#.# #.# ### ..# ..#",
    "5": "### #.. ### ..# ###",
    "6": "### #.. ### #.# ###",
    "7": "### ..# .#. .#. .#.",
    "8": "### #.# ### #.# ###",
    "9": "### #.# ### ..# ###",
    ".": "... ... ... ... .#.",
    "%": "#.# ..# .#. #.. #.#",
    "+": "... .#. ### .#. ...",
    "-": "... ... ### ... ...",
    ":": "... .#. ... .#. ...",
    "(": ".#. #.. #.. #.. .#.",
    ")": ".#. ..# ..# ..# .#.",
    "/": "..# ..# .#. #.. #..",
    " ": "... ... ... ... ...",
    "A": ".#. #.# ### #.# #.#",
    "B": "##. #.# ##. #.# ##.",
    "C": ".## #.. #.. #.. .##",
    "D": "##. #.# #.# #.# ##.",
    "E": "### #.. ##. #.. ###",
    "F": "### #.. ##. #.. #..",
    "G": ".## #.. #.# #.# .##",
    "H": "#.# #.# ### #.# #.#",
    "I": "### .#. .#. .#. ###",
    "J": "..# ..# ..# #.# .#.",
    "K": "#.# #.# ##. #.# #.#",
    "L": "#.. #.. #.. #.. ###",
    "M": "#.# ### ### #.# #.#",
    "N": "##. #.# #.# #.# #.#",
    "O": ".#. #.# #.# #.# .#.",
    "P": "##. #.# ##. #.. #..",
    "Q": ".#. #.# #.# ##. .##",
    "R": "##. #.# ##. #.# #.#",
    "S": ".## #.. .#. ..# ##.",
    "T": "### .#. .#. .#. .#.",
    "U": "#.# #.# #.# #.# ###",
    "V": "#.# #.# #.# #.# .#.",
    "W": "#.# #.# ### ### #.#",
    "X": "#.# #.# .#. #.# #.#",
    "Y": "#.# #.# .#. .#. .#.",
    "Z": "### ..# .#. #.. ###",
}
FONT: dict[str, tuple[str, ...]] = {ch: tuple(rows.split()) for ch, rows in _FONT_ROWS.items()}


class Canvas:
    """A width x height RGB image, (0, 0) at the top left."""

    def __init__(self, width: int, height: int, background: RGB = WHITE) -> None:
        self.width, self.height = width, height
        self.pixels = [bytearray(bytes(background) * width) for _ in range(height)]

    def set(self, x: int, y: int, color: RGB) -> None:
        if 0 <= x < self.width and 0 <= y < self.height:
            self.pixels[y][3 * x : 3 * x + 3] = bytes(color)

    def get(self, x: int, y: int) -> RGB:
        r, g, b = self.pixels[y][3 * x : 3 * x + 3]
        return (r, g, b)

    def rect(self, x0: int, y0: int, x1: int, y1: int, color: RGB) -> None:
        """Fill the rectangle with corners (x0, y0) and (x1, y1), both included."""
        for y in range(min(y0, y1), max(y0, y1) + 1):
            for x in range(min(x0, x1), max(x0, x1) + 1):
                self.set(x, y, color)

    def text(self, x: int, y: int, text: str, color: RGB = BLACK, scale: int = 2) -> int:
        """Draw `text` (upper-cased; unknown characters as blanks) with its top left at
        (x, y); returns the x just past it."""
        for ch in text.upper():
            for row, bits in enumerate(FONT.get(ch, FONT[" "])):
                for col, bit in enumerate(bits):
                    if bit == "#":
                        self.rect(
                            x + col * scale,
                            y + row * scale,
                            x + (col + 1) * scale - 1,
                            y + (row + 1) * scale - 1,
                            color,
                        )
            x += 4 * scale
        return x


def text_width(text: str, scale: int = 2) -> int:
    return len(text) * 4 * scale - scale


def png_bytes(canvas: Canvas) -> bytes:
    """The canvas as a PNG file."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    header = struct.pack(">IIBBBBB", canvas.width, canvas.height, 8, 2, 0, 0, 0)
    raw = b"".join(b"\x00" + bytes(row) for row in canvas.pixels)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(raw, 9))
        + chunk(b"IEND", b"")
    )


@dataclass(frozen=True, slots=True)
class Series:
    label: str
    points: Sequence[tuple[float, float]]  # (x, y)


def nice_step(span: float, ticks: int = 5) -> float:
    """A 1, 2 or 5 times a power of ten step giving about `ticks` ticks over `span`."""
    if span <= 0:
        return 1.0
    raw = span / ticks
    power = 10 ** math.floor(math.log10(raw))
    for factor in (1, 2, 5, 10):
        if raw <= factor * power:
            return float(factor * power)
    return float(10 * power)


def _label(value: float, step: float) -> str:
    return f"{value:.0f}" if step >= 1 else f"{value:.{max(0, -math.floor(math.log10(step)))}f}"


def scatter(
    series: Sequence[Series],
    *,
    x_title: str,
    y_title: str,
    title: str = "",
    x_range: tuple[float, float] | None = None,
    width: int = 720,
    height: int = 480,
) -> Canvas:
    """A scatter plot of `series` (one colour each, legend at the top right)."""
    canvas = Canvas(width, height)
    left, right, top, bottom = 70, width - 20, 40, height - 60
    xs = [x for s in series for x, _ in s.points]
    ys = [y for s in series for _, y in s.points]
    x0, x1 = x_range or (min(xs, default=0.0), max(xs, default=1.0))
    y0, y1 = 0.0, max(ys, default=1.0) * 1.1 or 1.0
    xstep, ystep = nice_step(x1 - x0), nice_step(y1 - y0)
    x0, x1 = math.floor(x0 / xstep) * xstep, math.ceil(x1 / xstep) * xstep
    y1 = math.ceil(y1 / ystep) * ystep

    def px(x: float) -> int:
        return round(left + (x - x0) / (x1 - x0 or 1) * (right - left))

    def py(y: float) -> int:
        return round(bottom - (y - y0) / (y1 - y0 or 1) * (bottom - top))

    tick = x0
    while tick <= x1 + xstep / 2:
        canvas.rect(px(tick), top, px(tick), bottom, GREY)
        label = _label(tick, xstep)
        canvas.text(px(tick) - text_width(label) // 2, bottom + 8, label)
        tick += xstep
    tick = y0
    while tick <= y1 + ystep / 2:
        canvas.rect(left, py(tick), right, py(tick), GREY)
        label = _label(tick, ystep)
        canvas.text(left - 8 - text_width(label), py(tick) - 5, label)
        tick += ystep
    canvas.rect(left, top, left, bottom, BLACK)
    canvas.rect(left, bottom, right, bottom, BLACK)
    canvas.text((left + right - text_width(x_title)) // 2, bottom + 30, x_title)
    canvas.text(8, top - 28, y_title)
    if title:
        canvas.text((left + right - text_width(title)) // 2, 8, title)
    for index, one in enumerate(series):
        color = PALETTE[index % len(PALETTE)]
        for x, y in one.points:
            cx, cy = px(x), py(y)
            canvas.rect(cx - 4, cy - 4, cx + 4, cy + 4, color)
        legend_y = top + 8 + index * 18
        legend_x = right - 8 - max((text_width(s.label) for s in series), default=0)
        canvas.rect(legend_x - 18, legend_y, legend_x - 8, legend_y + 9, color)
        canvas.text(legend_x, legend_y, one.label)
    return canvas
