"""A picture's dominant colours, as facts of the kind "colour" (`colour:red`, `color:red`):
a pass of `pamir index` with no model and no extra (its row in pamir.jobs.fact_passes).

The palette is the twelve colours of Google's image search filter, the Custom Search API's
`imgDominantColor` (developers.google.com/custom-search/v1/reference/rest/v1/ImgDominantColor):
black, blue, brown, gray, green, orange, pink, purple, red, teal, white, yellow. PhotoPrism's
`color:` filter names about the same; grey is written "grey" here, and "gray" finds it too.

Each pixel of the picture at SIDE pixels (the reading stage's decode reduced; a file read alone
is decoded at that size, a JPEG at 1/8 scale) is named in CIELAB's lightness, chroma and hue
(OpenCV's conversion from sRGB, D65): a pixel of little chroma is black, grey or white by its
lightness; a very dark one is black; any other is named by its hue (HUES), where dark orange
and yellow are brown, a dark, dull red is brown, and a light one is pink. A colour is a fact of
the picture where it covers at least MIN_SHARE of it; the fact's confidence is that share, so
that `colour:red` alone lists the reddest pictures first and the page says how much of each
picture is red. A colour is a filter's alone (pamir.facts.fact.FILTER_KINDS): the plain word
"red" in a query still means a red thing, not a red picture.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

import cv2
import numpy as np

from .fact import Fact
from ..features.images import ImageError, decode_reduced, read_bytes
from ..features.rasters import bounded

#: The pass's name in the catalogue's `passes` table (another version reads every picture again).
PASS_NAME = "colour 1"
#: The longer side of the raster the colours are counted on: 3,072 pixels at 4:3, where a
#: colour of MIN_SHARE is about 600 of them; a 12-MP JPEG is decoded at 1/8 scale for it.
SIDE = 64
#: A picture read alone is decoded with its shorter side at least this, then box-reduced to
#: SIDE, as the reading stage's larger decode is: on Corel 5k's first 600 training pictures
#: the colours then match the stream's (decoded at 224) for all 600, against 570 when decoded
#: at SIDE itself (a JPEG's 1/4 scale, then reduced by 1.5).
ALONE_SHORT_SIDE = 2 * SIDE
#: The share of a picture a colour must cover to be one of its colours. A photo's colours spread
#: over a few names (a landscape: its sky's blue, its grass's green, its rocks' grey), so a
#: fifth keeps the two or three a person would name. On Corel 5k's first 600 training
#: pictures: 1.74 colours a picture (2.19 at 0.15, 1.41 at 0.25, where 3 % have none); green
#: in 66 % of those captioned "grass", blue in 53 % of "sky".
MIN_SHARE = 0.2
#: Below this chroma (CIELAB's C*) a pixel has no hue: black, grey or white by its lightness. A
#: white wall in warm light or an overcast sky is about 5-10.
CHROMA_GREY = 12.0
#: Lightness (L*, 0-100) under which a pixel of little chroma is black, over which white.
BLACK_L, WHITE_L = 25.0, 85.0
#: Lightness under which any pixel is black, whatever its chroma (navy is 13).
DARK_L = 12.0
#: Hue angles (CIELAB's h, degrees) where each hue's name ends, in order from 0: sRGB's red is
#: at 40, orange 73, gold 91, yellow 103, green 136, teal and cyan 196, sky blue 235, blue 306,
#: purple and magenta 328, hot pink 351.
HUES = ((20.0, "pink"), (55.0, "red"), (85.0, "orange"), (115.0, "yellow"), (165.0, "green"),
        (225.0, "teal"), (315.0, "blue"), (335.0, "purple"), (360.0, "pink"))
#: Lightness under which an orange or yellow is brown, and a red of chroma under BROWN_C.
BROWN_L, BROWN_C = 50.0, 60.0
#: Lightness under which a pink hue is red; over PALE_L, a red of chroma under PALE_C is pink.
PINK_L, PALE_L, PALE_C = 45.0, 70.0, 40.0
#: The palette, in the order a picture's colours are named (its largest first otherwise).
PALETTE = ("red", "orange", "yellow", "green", "teal", "blue", "purple", "pink", "brown",
           "black", "grey", "white")
#: Other words a palette colour is found by (American spelling).
ALIASES = {"grey": ("gray",)}


def colour_shares(rgb: np.ndarray) -> dict[str, float]:
    """{colour: its share of the picture} of an (H, W, 3) uint8 RGB raster, for every palette
    colour it holds."""
    lab = cv2.cvtColor(np.ascontiguousarray(rgb, np.float32) / 255.0, cv2.COLOR_RGB2Lab)
    L, a, b = (lab[..., k].ravel() for k in range(3))
    chroma = np.hypot(a, b)
    hue = np.degrees(np.arctan2(b, a)) % 360.0
    names = np.array([name for _, name in HUES])[np.searchsorted([h for h, _ in HUES], hue,
                                                                 side="right").clip(0, len(HUES) - 1)]
    brownish = (np.isin(names, ("orange", "yellow")) & (L < BROWN_L)) | (
        (names == "red") & (L < BROWN_L) & (chroma < BROWN_C))
    names = np.where(brownish, "brown", names)
    names = np.where((names == "pink") & (L < PINK_L), "red", names)
    names = np.where((names == "red") & (L > PALE_L) & (chroma < PALE_C), "pink", names)
    grey = np.where(L < BLACK_L, "black", np.where(L > WHITE_L, "white", "grey"))
    names = np.where(chroma < CHROMA_GREY, grey, names)
    names = np.where(L < DARK_L, "black", names)
    found, counts = np.unique(names, return_counts=True)
    return {str(n): float(c) / len(names) for n, c in zip(found, counts)}


def colour_facts(rgb: np.ndarray) -> list[Fact]:
    """The picture's colours (MIN_SHARE of it or more) as facts, the largest first, each with
    its share as confidence (and its other words: grey is "gray" too)."""
    shares = colour_shares(rgb)
    out = []
    for name in sorted((n for n, s in shares.items() if s >= MIN_SHARE), key=lambda n: -shares[n]):
        share = round(min(1.0, shares[name]), 3)
        shown = json.dumps({"shown": name})
        out += [Fact("colour", w, share, shown) for w in (name, *ALIASES.get(name, ()))]
    return out


def read_colours(paths: Sequence[str]) -> list[tuple[list[Fact] | None, str | None]]:
    """The pass's reader of files (pamir.index.passes.Reader): for each path its colour facts,
    or None and why it could not be read; each decoded for this alone, at SIDE."""
    out = []
    for path in paths:  # a video's frames come as pictures (pamir.index.videos.FramesReader)
        try:
            rgb = bounded(decode_reduced(read_bytes(path), ALONE_SHORT_SIDE), SIDE)
        except (ImageError, OSError) as e:
            out.append((None, f"{path}: {e}"))
            continue
        out.append((colour_facts(rgb), None))
    return out


def read_colour_rasters(pictures) -> list[tuple[list[Fact], None]]:
    """The pass's reader of the reading stage's rasters: (path, raster at SIDE, shown size)."""
    return [(colour_facts(rgb), None) for _, rgb, _ in pictures]


__all__ = ["ALIASES", "MIN_SHARE", "PALETTE", "PASS_NAME", "SIDE", "colour_facts",
           "colour_shares", "read_colour_rasters", "read_colours"]
