"""Learning after training, on a model folder and the indexes built with it: new captioned
pictures taught to the model (`learn_pictures`, `learn_captions`: `pamir learn`), saved over
its folder with the previous one beside, and those indexes rescored (`update_indexes`).

    import pamir
    report = pamir.learn_captions("models/mine", "new.tsv", index_dirs=["my-index"])

The learning itself is pamir.training.online's. Errors are WorkflowError (pamir.jobs.errors)
and OSError, with a message for a person.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import numpy as np

from .. import config
from ..data import load_captions_table
from ..features.representation import take_rows
from ..index import Index, IndexDirError, model_fingerprint
from ..training.online import learn, save_keeping_previous
from .errors import WorkflowError
from .loading import load_system, rescore


def update_indexes(model: Path, system, index_dirs) -> list[dict]:
    """Rescore the indexes built with `model` (the given ones, else the default one if it
    was built with it) for the model as it is now: one {"index", "status", ...} each."""
    model = Path(model)
    explicit = bool(index_dirs)
    dirs = list(index_dirs or [config.default_index_dir()])
    out = []
    fingerprint = model_fingerprint(model)
    for d in dirs:
        if not Index.exists(d):
            if explicit:
                out.append({"index": str(d), "status": "no index there"})
            continue
        try:
            index = Index.open(d, writable=True)
        except IndexDirError as e:
            out.append({"index": str(d), "status": f"not updated: {e}"})
            continue
        with index:
            if index.model_dir != str(model.resolve()):
                if explicit:
                    out.append({"index": str(d), "status": "built with another model "
                                f"({index.model_dir}): left alone"})
                continue
            try:
                r = rescore(index, system, model, fingerprint)
            except IndexDirError as e:
                out.append({"index": str(d), "status": f"needs a rebuild: {e}"})
                continue
            except (OSError, sqlite3.OperationalError) as e:
                # a full or failing disk: the rescoring's one transaction did not commit
                out.append({"index": str(d), "status": f"not updated, its previous scores "
                            f"kept: cannot write the index ({e}); free some space (or check "
                            f"the disk) and run `pamir index {model} FOLDER --index {d}`"})
                continue
            kept = f", {len(r['kept'])} unreadable kept their old scores" if r["kept"] else ""
            out.append({"index": str(d), "status": f"rescored {r['rescored']:,} pictures "
                        f"for {len(system.vocabulary)} words{kept}", **r})
    return out


def learn_pictures(model, system, pairs, *, index_dirs=None, n_updates: int | None = None
                   ) -> dict:
    """Teach the system new captioned pictures, pairs of (path, words): PA updates
    (pamir.training.online.learn), the model saved over `model` (the previous one kept as
    MODEL.previous), then the indexes built with it rescored (update_indexes). Returns
    learn's report with "skipped" [(path, reason)], "model", "previous" and "indexes"."""
    model = Path(model)
    if not pairs:
        raise WorkflowError("no captioned picture to learn from")
    F, ok, reasons = system.features([str(p) for p, _ in pairs])
    ok = np.asarray(ok, dtype=bool)
    skipped = [(str(p), why or "could not be read")
               for (p, _), good, why in zip(pairs, ok, reasons) if not good]
    kept = [c for (_, c), good in zip(pairs, ok) if good]
    report = learn(system, take_rows(F, np.flatnonzero(ok)), kept, n_updates=n_updates,
                   paths=[str(p) for (p, _), good in zip(pairs, ok) if good])
    save_keeping_previous(system, model)
    report["skipped"] = skipped
    report["model"] = str(model)
    report["previous"] = str(model.resolve().with_name(model.resolve().name + ".previous"))
    report["indexes"] = update_indexes(model, system, index_dirs)
    return report


def learn_captions(model_dir, captions, *, index_dirs=None, n_updates: int | None = None
                   ) -> dict:
    """`pamir learn` as a call: the captioned pictures of the table `captions` taught to
    the system in model_dir (see learn_pictures)."""
    coll = load_captions_table(captions, include_uncaptioned=False)
    pairs = [(p, c) for p, c in zip(coll.paths, coll.captions) if c]
    if not pairs:
        raise WorkflowError(f"{captions}: no captioned picture to learn from")
    return learn_pictures(model_dir, load_system(model_dir), pairs, index_dirs=index_dirs,
                          n_updates=n_updates)
