"""A picture's keywords, in one place for the library, `pamir annotate` and the HTTP API.

A picture's keywords are two lists, best first:

- **the model's words**: the rows of its text-space vector, by the rule validation preferred
  (`pamir.calibration.annotate`): the k best words, or with per-word thresholds every word
  likely enough; each with its score, and its calibrated probability where the system has a
  calibration (raw scores alone where it has none);
- **ImageNet's words** (`pamir.zeroshot.classes.annotate`): for a system with an ImageNet CNN view
  (and the zero-caption system), WordNet's words a person uses (a picture's class, or a
  hypernym its classes' descriptions name them by: "cat", not "feline"), each with the
  probability, calibrated on Corel 5k's captions, that a person's caption has it; those the
  model already gave left out;
- **its facts** (`fact_keywords`), for a picture an index holds: where it was taken (its
  place, nearest first) and the words read on it (pamir.facts.ocr), each marked with its kind
  (`"source": "place"` or `"text"`): what the picture holds for certain, not a guess.

    import pamir.jobs.annotation
    keywords, ok, reasons = pamir.jobs.annotation.annotate_pictures(system, ["a.jpg"], k=5,
                                                               index=index)

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

from .. import config
from ..calibration import annotate as calibrated_words
from ..facts.fact import fold, shown, shown_order
from ..storage import atomic_write_bytes
from ..zeroshot.classes import MIN_PROBABILITY, ZeroCaptionSystem, annotate as class_words
from ..zeroshot.imagenet import class_probabilities


def model_words(Z, vocabulary: Sequence[str], calibration=None, k: int | None = None, *,
                count: bool = False, likely: bool = False
                ) -> list[list[tuple[str, float, float | None]]]:
    """Each text-space row's words as (word, score, probability or None), by the rule
    validation preferred (calibration None: the k best, 5 by default); count: the k best
    whatever the rule (pamir.calibration.annotate). likely (the folder's own words, no
    model): every word of probability MIN_PROBABILITY or more, the likeliest first, at most
    k (ANNOTATION_WORDS), as ImageNet's words are chosen: the k best by score left a
    picture's likelier words out (on the tagged library's untagged polar bears, "truck" at
    0.52 ranked above "bear" at 0.77: the words' scores are not on one scale, their
    probabilities are)."""
    Z = np.atleast_2d(np.asarray(Z))
    if not len(vocabulary):  # the zero-caption system with no folder words has no text space
        return [[] for _ in range(Z.shape[0])]
    return calibrated_words(calibration, Z, vocabulary, k, count=count,
                            floor=MIN_PROBABILITY if likely else None)


def imagenet_words(P, k: int | None = None) -> list[list]:
    """Each row of ImageNet class probabilities as its words
    (pamir.zeroshot.classes.Annotation: word, calibrated probability, mass, classes)."""
    return class_words(np.atleast_2d(P), k or config.ANNOTATION_WORDS)


def keyword_records(best, imagenet=(), facts=(), *, folder: bool = False) -> list[dict]:
    """A picture's keywords as `pamir annotate --json` and the API give them: the model's
    words [{word, score, probability where calibrated}] (best: (word, score, probability or
    None) triples), then ImageNet's words not among them [{word, probability (calibrated),
    mass (of its classes), classes (how many), source: "imagenet"}] (imagenet:
    pamir.zeroshot.classes.Annotation), then its facts' keywords (facts: `fact_keywords`'
    records, as they are). folder (no fitted model: the words are the folder's own,
    pamir.zeroshot.folder): they carry "source": "folder", and a word both give keeps the
    record of the higher probability, so that the folder's words never hide an ImageNet
    word surer of the picture (on a library of 1,500 tagged Corel pictures, its untagged
    pictures' `annotate --xmp` lost "bear" and "tiger", found with no index)."""
    mark = {"source": "folder"} if folder else {}
    out = [{"word": w, "score": s, **({"probability": round(p, 4)} if p is not None else {}),
            **mark} for w, s, p in best]
    at = {w["word"]: i for i, w in enumerate(out)}
    more = []
    for a in imagenet:
        record = {"word": a.word, "probability": round(a.probability, 4),
                  "mass": round(a.mass, 4), "classes": a.classes, "source": "imagenet"}
        i = at.get(a.word)
        if i is None:
            more.append(record)
        elif folder and out[i].get("probability", -1.0) < record["probability"]:
            out[i] = record
    return out + more + list(facts)


def fact_keywords(facts, k: int | None = None) -> list[dict]:
    """A picture's facts (pamir.facts.fact.Fact) as keyword records, marked with their kind:
    [{word, shown, source: "place" | "text", confidence}]. Its place nearest first (the
    place, city, region, country), each form shown once ("United Kingdom", not also "uk"
    and "britain"); then the words read on it, the most confident first, at most k
    (default config.ANNOTATION_WORDS: a page of print would drown the rest), phrases left
    out (their words are there)."""
    places, seen = [], set()
    for f in sorted((f for f in facts if f.kind == "place"), key=shown_order):
        form = shown(f)
        if form not in seen:
            seen.add(form)
            places.append({"word": fold(form), "shown": form, "source": "place",
                           "confidence": round(float(f.confidence), 4)})
    words = sorted((f for f in facts if f.kind == "text" and " " not in f.word),
                   key=lambda f: (-f.confidence, f.word))[:k or config.ANNOTATION_WORDS]
    return places + [{"word": f.word, "shown": f.word, "source": "text",
                      "confidence": round(float(f.confidence), 4)} for f in words]


def indexed_facts(index, paths: Sequence) -> list[list]:
    """The facts `index` holds of each picture (by its path; [] for one it does not hold)."""
    out = []
    for p in paths:
        picture_id = index.id_of_path(p)
        out.append(index.facts_of(picture_id) if picture_id is not None else [])
    return out


def keywords_of_rows(Z, vocabulary: Sequence[str], calibration=None, P=None,
                     k: int | None = None, facts=None, *, count: bool = False,
                     folder: bool = False) -> list[list[dict]]:
    """The keywords of each picture from its text-space row Z[i], where given its ImageNet
    class probabilities P[i], and where given its facts facts[i] (keyword_records; folder:
    the words are a bare folder's own, chosen by their probability: model_words' likely).
    k: at most k words by the rule (the API's k), or with count the k best (model_words)."""
    Z = np.atleast_2d(np.asarray(Z))
    best = model_words(Z, vocabulary, calibration, k, count=count, likely=folder)
    more = imagenet_words(P, k) if P is not None else [[] for _ in best]
    held = [fact_keywords(f, k) for f in facts] if facts is not None else [[] for _ in best]
    return [keyword_records(b, m, f, folder=folder) for b, m, f in zip(best, more, held)]


def annotate_pictures(system, paths: Sequence, k: int | None = None, *, index=None
                      ) -> tuple[list[list[dict]], np.ndarray, list]:
    """(keywords of each picture, which were read, the reason for each that was not): the
    system's words (k None: by the rule validation preferred; k: the k best, as
    `System.annotate(Z, k)` gives them) and, for a system with an ImageNet CNN view,
    ImageNet's words; with an `index` (pamir.index.Index), the place and text facts it
    holds of each picture. A picture the classifier cannot read counts as unread."""
    # pamir.system imports scipy.sparse (0.3 s): not at the start of every command
    from ..system import cnn_part  # noqa: PLC0415

    paths = [str(p) for p in paths]
    Z, ok, reasons = system.transform_paths(paths)
    ok = np.asarray(ok, dtype=bool)
    P = None
    part = cnn_part(getattr(system, "pipeline", None))
    if part is not None:
        logits, class_ok, _ = part.class_scores(paths)  # the pooled vectors are cached
        P, ok = class_probabilities(logits), ok & np.asarray(class_ok, bool)
    facts = indexed_facts(index, paths) if index is not None else None
    keywords = keywords_of_rows(Z, list(system.vocabulary),
                                getattr(system, "calibration", None), P, k, facts,
                                count=k is not None,
                                folder=isinstance(system, ZeroCaptionSystem))
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


__all__ = ["SIDECAR_REGISTRY", "annotate_pictures", "fact_keywords",
           "imagenet_words", "indexed_facts", "keyword_records", "keywords_of_rows",
           "model_words", "sidecar_path", "write_sidecar"]
