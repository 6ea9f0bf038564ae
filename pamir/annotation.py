"""A picture's keywords, in one place for the library, `pamir annotate` and the HTTP API.

A picture's keywords are two lists, best first:

- **the model's words**: the rows of its text-space vector, by the rule validation preferred
  (`pamir.calibration.annotate`): the k best words, or with per-word thresholds every word
  likely enough; each with its score, and its calibrated probability where the system has a
  calibration (raw scores alone where it has none);
- **ImageNet's words** (`pamir.zeroshot.annotate`): for a system with an ImageNet CNN view
  (and the zero-caption system), WordNet's words whose classes hold a good share of the
  classifier's probability, those the model already gave left out.

    import pamir.annotation
    keywords, ok, reasons = pamir.annotation.annotate_pictures(system, ["a.jpg"], k=5)

`write_sidecar` writes them beside a picture (PICTURE.txt, `pamir annotate --sidecar`),
never over a file pamir did not write.

`System.annotate` gives the model's words of text-space rows by the same rule; `pamir
annotate` prints `annotate_pictures`; the API gives `keywords_of_rows` of an index's stored
row or of an upload's, so the three agree. A count of words asked for (`pamir annotate -k
5`, `System.annotate(Z, k=5)`) is the k best words whatever the rule; the API's `k` (5 by
default) is a most: the rule's words, at most k (tests/test_annotation.py compares them).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from . import config
from .storage import atomic_write_bytes


def model_words(Z, vocabulary: Sequence[str], calibration=None, k: int | None = None, *,
                count: bool = False) -> list[list[tuple[str, float, float | None]]]:
    """Each text-space row's words as (word, score, probability or None), by the rule
    validation preferred (calibration None: the k best, 5 by default); count: the k best
    whatever the rule (pamir.calibration.annotate)."""
    from .calibration import annotate  # noqa: PLC0415

    Z = np.atleast_2d(np.asarray(Z))
    if not len(vocabulary):  # the zero-caption system has no text space
        return [[] for _ in range(Z.shape[0])]
    return annotate(calibration, Z, vocabulary, k, count=count)


def imagenet_words(P, k: int | None = None) -> list[list[tuple[str, float]]]:
    """Each row of ImageNet class probabilities as (word, probability mass) pairs."""
    from .zeroshot import annotate  # noqa: PLC0415

    return annotate(np.atleast_2d(P), k or config.ANNOTATION_WORDS)


def keyword_records(best, imagenet=()) -> list[dict]:
    """A picture's keywords as `pamir annotate --json` and the API give them: the model's
    words [{word, score, probability where calibrated}] (best: (word, score, probability or
    None) triples), then ImageNet's words not among them [{word, probability, source:
    "imagenet"}] (imagenet: (word, probability) pairs)."""
    out = [{"word": w, "score": s, **({"probability": round(p, 4)} if p is not None else {})}
           for w, s, p in best]
    own = {w["word"] for w in out}
    return out + [{"word": w, "probability": round(p, 4), "source": "imagenet"}
                  for w, p in imagenet if w not in own]


def keywords_of_rows(Z, vocabulary: Sequence[str], calibration=None, P=None,
                     k: int | None = None, *, count: bool = False) -> list[list[dict]]:
    """The keywords of each picture from its text-space row Z[i] and, where given, its
    ImageNet class probabilities P[i] (keyword_records). k: at most k words by the rule
    (the API's k), or with count the k best (model_words)."""
    Z = np.atleast_2d(np.asarray(Z))
    best = model_words(Z, vocabulary, calibration, k, count=count)
    more = imagenet_words(P, k) if P is not None else [[] for _ in best]
    return [keyword_records(b, m) for b, m in zip(best, more)]


def annotate_pictures(system, paths: Sequence, k: int | None = None
                      ) -> tuple[list[list[dict]], np.ndarray, list]:
    """(keywords of each picture, which were read, the reason for each that was not): the
    system's words (k None: by the rule validation preferred; k: the k best, as
    `System.annotate(Z, k)` gives them) and, for a system with an ImageNet CNN view,
    ImageNet's words. A picture the classifier cannot read counts as unread."""
    from .imagenet import class_probabilities  # noqa: PLC0415
    from .system import cnn_part  # noqa: PLC0415

    paths = [str(p) for p in paths]
    Z, ok, reasons = system.transform_paths(paths)
    ok = np.asarray(ok, dtype=bool)
    P = None
    part = cnn_part(getattr(system, "pipeline", None))
    if part is not None:
        logits, class_ok, _ = part.class_scores(paths)  # the pooled vectors are cached
        P, ok = class_probabilities(logits), ok & np.asarray(class_ok, bool)
    keywords = keywords_of_rows(Z, list(system.vocabulary),
                                getattr(system, "calibration", None), P, k,
                                count=k is not None)
    return keywords, ok, reasons


# ------------------------------------------------------------------------- sidecars
#: Sidecars pamir wrote in a folder, with a hash of what it wrote: a sidecar is replaced only
#: if it is still exactly what pamir wrote (not the user's, not edited since).
SIDECAR_REGISTRY = ".pamir-sidecars.json"


def sidecar_path(picture: Path) -> Path:
    return picture.with_suffix(".txt")


def write_sidecar(picture: Path, words: list[str]) -> tuple[bool, str]:
    """Write the words beside the picture, one comma-separated line (`pamir annotate
    --sidecar`), never over a file pamir did not write. (written?, what)"""
    target = sidecar_path(picture)
    registry_file = picture.parent / SIDECAR_REGISTRY
    try:
        registry = json.loads(registry_file.read_text(encoding="utf-8"))
        if not isinstance(registry, dict):
            registry = {}
    except (OSError, ValueError):
        registry = {}
    if target.exists():
        ours = registry.get(target.name)
        if ours is None:
            return False, f"left {target} alone: pamir did not write it"
        if ours != _digest(target.read_bytes()):
            return False, f"left {target} alone: edited since pamir wrote it"
    text = (", ".join(words) + "\n").encode("utf-8")
    try:
        atomic_write_bytes(target, text)
        registry[target.name] = _digest(text)
        atomic_write_bytes(registry_file, json.dumps(registry, indent=1, sort_keys=True).encode())
    except OSError as e:
        return False, f"could not write {target}: {e.strerror or e}"
    return True, f"wrote {target}"


def _digest(data: bytes) -> str:
    return hashlib.blake2b(data, digest_size=16).hexdigest()


__all__ = ["SIDECAR_REGISTRY", "annotate_pictures", "imagenet_words", "keyword_records",
           "keywords_of_rows", "model_words", "sidecar_path", "write_sidecar"]
