"""A folder of generated captioned pictures for the docs' screenshots (Corel's are copyrighted).

    python docs/demo_pictures.py /tmp/demo/pictures [--n 120]

Each picture (128 x 192, Corel's size) is a noisy plain background with one object at a random
place and size: a disc or a striped square, of another colour. Its caption names the
background's colour, the object's colour and "disc" or "stripes", so a model must find the
object to score "stripes" well: the explanation overlay then has something to show. Writes the
pictures and captions.tsv (a `pamir fit` captions table).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
from PIL import Image

COLOURS = {"red": (215, 35, 35), "green": (45, 165, 60), "blue": (40, 70, 200),
           "yellow": (230, 205, 45)}
SEED = 7


def picture(rng: np.random.Generator, h: int = 128, w: int = 192) -> tuple[np.ndarray, list]:
    """(h x w x 3 uint8, caption words)."""
    background, colour = rng.choice(list(COLOURS), 2, replace=False)
    a = np.empty((h, w, 3), np.float32)
    a[:] = COLOURS[background]
    a += rng.normal(0, 10, a.shape)
    side = int(rng.integers(36, 72))
    top, left = int(rng.integers(0, h - side)), int(rng.integers(0, w - side))
    y, x = np.mgrid[0:side, 0:side]
    if rng.random() < 0.5:
        shape, mask = "disc", (x - side / 2) ** 2 + (y - side / 2) ** 2 < (side / 2) ** 2
    else:
        shape, mask = "stripes", (x // 5) % 2 == 0
    patch = a[top:top + side, left:left + side]
    patch[mask] = np.array(COLOURS[colour]) + rng.normal(0, 10, (int(mask.sum()), 3))
    if shape == "stripes":
        patch[~mask] = 245
    return np.clip(a, 0, 255).astype(np.uint8), [background, colour, shape]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("folder", type=Path)
    ap.add_argument("--n", type=int, default=120)
    args = ap.parse_args()
    args.folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(SEED)
    rows = ["path\tkeywords"]
    for i in range(args.n):
        a, words = picture(rng)
        Image.fromarray(a).save(args.folder / f"d{i:03d}.png")
        rows.append(f"d{i:03d}.png\t{' '.join(dict.fromkeys(words))}")
    (args.folder / "captions.tsv").write_text("\n".join(rows) + "\n")
    print(f"wrote {args.n} pictures and captions.tsv to {args.folder}")


if __name__ == "__main__":
    main()
