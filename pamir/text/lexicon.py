"""A lexicon of precomputed word embeddings: query words mapped by meaning without the model.

Loading the sentence-embedding model (pamir.text.embedding) costs seconds: importing torch and
sentence-transformers, reading the weights. A query word is almost always an ordinary English
word, so the embeddings of the most frequent ones are computed once, with that same model, and
stored: a query word found here is looked up (a memory-mapped row), and the model is loaded
only for a text the lexicon does not hold (a rare word, a phrase).

What it holds: the `LEXICON_WORDS` most frequent English words of the `wordfreq` package
(letters, apostrophes and hyphens only) and the 1,000 ImageNet class names (the class bridge's
"vocabulary"), each embedded exactly as the bridge embeds a text. Stored once per machine, in
the feature cache (`config.default_cache_dir()/lexicon/`): `<key>.words` (one text a line) and
`<key>.npy` (float16 rows of unit length, in the same order), the key naming the model, the
size and this format's version. `pamir index` builds it when it is missing (75 s measured on
2 cores for 50,000 words, 38 MB); $PAMIR_LEXICON_WORDS sets the size, 0 turns it off.

float16 keeps similarities within 1e-4 of the model's (measured on 193 words against Corel 5k's
vocabulary: the same neighbours for every one; tests/test_lexicon.py compares the mappings).
"""

from __future__ import annotations

import io
import os
import re
import threading
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from .. import config
from . import embedding
from ..storage import atomic_write

#: How many of wordfreq's most frequent English words the lexicon holds (before filtering).
LEXICON_WORDS = 50_000
#: Overrides LEXICON_WORDS; 0 turns the lexicon off (queries load the model, as before).
LEXICON_ENV = "PAMIR_LEXICON_WORDS"
#: The format's version: a change of the texts chosen or of the file layout changes the key.
VERSION = 1
_WORD = re.compile(r"[a-z][a-z'-]*")


def lexicon_size() -> int:
    value = os.environ.get(LEXICON_ENV, "").strip()
    return max(int(value), 0) if value else LEXICON_WORDS


def lexicon_dir() -> Path:
    return config.default_cache_dir() / "lexicon"


def lexicon_key(size: int) -> str:
    return f"all-MiniLM-L6-v2-v{VERSION}-{size}"


def lexicon_texts(size: int, names: Sequence[str] = ()) -> list[str]:
    """The texts a lexicon of `size` words holds: frequent English words (wordfreq, an
    installed package: no download), then `names`, which its builder gives (ImageNet's class
    names: the text layer does not reach up to zeroshot for them)."""
    from wordfreq import top_n_list  # noqa: PLC0415 - only when building

    words = [w for w in top_n_list("en", size) if _WORD.fullmatch(w)]
    return list(dict.fromkeys([*words, *names]))


class Lexicon:
    """Texts and their embeddings, read from a lexicon's two files. Nothing is built on
    opening (a dict of 50,000 words costs more than the few lookups a query makes): a text's
    row is found in the words file's bytes, the matrix is memory-mapped (a lookup reads one
    row)."""

    def __init__(self, words_file: Path, vectors_file: Path):
        self._text = b"\n" + words_file.read_bytes() + b"\n"
        self.E = np.load(vectors_file, mmap_mode="r", allow_pickle=False)
        self._n = self._text.count(b"\n") - 1
        if self.E.ndim != 2 or self.E.shape[0] != self._n:
            raise ValueError(f"{vectors_file}: {self.E.shape} rows for {self._n} texts")

    def __len__(self) -> int:
        return self._n

    def row(self, text: str) -> int | None:
        """The text's row, or None: the line holding exactly it (a text has no newline)."""
        if not text or "\n" in text:
            return None
        at = self._text.find(b"\n" + text.encode("utf-8") + b"\n")
        return None if at < 0 else self._text.count(b"\n", 0, at)

    def __contains__(self, text: str) -> bool:
        return self.row(text) is not None

    def get(self, text: str) -> np.ndarray | None:
        """The text's embedding (float32), or None if the lexicon does not hold it."""
        i = self.row(text)
        return None if i is None else np.asarray(self.E[i], dtype=np.float32)


_lock = threading.Lock()
_loaded: dict[Path, Lexicon | None] = {}


def files(size: int | None = None, directory: Path | None = None) -> tuple[Path, Path]:
    size = lexicon_size() if size is None else size
    base = (directory or lexicon_dir()) / lexicon_key(size)
    return base.with_suffix(".words"), base.with_suffix(".npy")


def lexicon() -> Lexicon | None:
    """This machine's lexicon (read once per process), or None if it is off or not built."""
    size = lexicon_size()
    if size == 0:
        return None
    words_file, vectors_file = files(size)
    with _lock:
        if words_file not in _loaded:
            try:
                _loaded[words_file] = Lexicon(words_file, vectors_file)
            except (OSError, ValueError):
                return None  # not built yet (or damaged): not remembered, so a build is seen
        return _loaded[words_file]


def build(texts: Sequence[str] | None = None, *, names: Sequence[str] = (),
          size: int | None = None,
          directory: Path | None = None, batch: int = 1024,
          progress: Callable[[int, int], object] | None = None) -> Path:
    """Embed the lexicon's texts with the model (pamir.text.embedding.embedder) and write its two
    files atomically (vectors first, so that a words file always has its vectors).
    texts None: lexicon_texts(size, names). Returns the vectors file. EmbeddingUnavailable if
    the model cannot be loaded."""
    size = lexicon_size() if size is None else size
    texts = list(texts) if texts is not None else lexicon_texts(size, names)
    words_file, vectors_file = files(size, directory)
    model = embedding.embedder()
    E = np.zeros((len(texts), model.dim), dtype=np.float16)
    for start in range(0, len(texts), batch):
        E[start:start + batch] = model.encode(texts[start:start + batch])
        if progress is not None:
            progress(min(start + batch, len(texts)), len(texts))
    buf = io.BytesIO()
    np.save(buf, E, allow_pickle=False)
    atomic_write(vectors_file, lambda f: f.write(buf.getvalue()))
    atomic_write(words_file, lambda f: f.write("\n".join(texts).encode("utf-8")))
    with _lock:
        _loaded.pop(words_file, None)
    return vectors_file


def missing() -> bool:
    """Whether the lexicon is on but not built on this machine (a file check, no reading)."""
    size = lexicon_size()
    return size > 0 and not all(f.is_file() for f in files(size))


__all__ = ["LEXICON_ENV", "LEXICON_WORDS", "Lexicon", "build", "files", "lexicon",
           "lexicon_dir", "lexicon_size", "lexicon_texts", "missing"]
