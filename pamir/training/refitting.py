"""Refitting a model after a few more keywords: `pamir fit` on a folder whose
model exists reuses the model's representation (fitted as it is: no new codebook) and its
chosen parameters, keeps its validation pictures, and starts PAMIR from its weights, the
new words from zero: the features of the new pictures, one short warm-started fit, the
neighbours, prior and calibration chosen again. Seconds, not the full selection's minutes.

A full selection runs again (`reselect_reason`) when what it chose may have moved: the
captioned pictures grew or shrank by more than REFIT_MAX_GROWTH, the folder crossed
SMALL_FOLDER_PICTURES (the candidates differ there), the vocabulary changed by more than
REFIT_MAX_WORD_CHANGE, or the model cannot be warm-started; `pamir fit --reselect` forces it.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..data import Collection
from ..protocol import Protocol
from ..system import System
from .candidates import SMALL_FOLDER_PICTURES

#: A full selection runs again when the captioned pictures changed by more than this share
#: of the model's. The selection's choice moves with the folder's size on the scale of a
#: doubling: on Corel 5k subsets the winner was cnn+cnn-lite2+visterms at 1,000 training
#: pictures and cnn+cnn-lite1+cnn-lite2+visterms at 2,000 (benchmarks/results/fit_memory.md),
#: and the same at 2,000 and 4,000 (fit_speed.md). A quarter more is well inside a doubling,
#: and keeps the representation's own fit (the visterm codebook: MIN_BLOCKS_PER_VISTERM)
#: on at least 80 % of the training pictures it would have.
REFIT_MAX_GROWTH = 0.25

#: ... or when the vocabulary's words changed (new or gone) by more than this share of the
#: model's: the vocabulary itself then changed, not its edge. A new word starts from a zero
#: row (and learns from the refit's updates), a word gone is dropped, so a few are cheap;
#: and a few change with any new keywords, as words cross the vocabulary's threshold
#: (config.MIN_WORD_PICTURES): tagging 20 more pictures changed 3 to 6 of about 130 words on
#: Corel 5k samples of 300 captioned pictures (three seeds), 13 of 118 in the folder of
#: benchmarks/results/fit_speed.md's refit part (11 %: a tenth would have refused it), 1 or
#: 2 of about 270 at 1,500 and 3 to 6 for 100 more there.
REFIT_MAX_WORD_CHANGE = 0.25

#: The refit's update budget, as a share of the full fit's (PAMIR.update_budget), early
#: stopping on the same checkpoints: it starts where the full fit ended. On Corel 5k samples
#: of 300 captioned pictures plus 20 (cnn; benchmarks/results/fit_speed_refit_share.md) a
#: quarter reached validation AvgP 76.16 and 76.08 (all of the budget: 76.16 and 76.91; a
#: tenth: 74.90 and 74.98; the full selection on the grown sample: 76.12 and 78.27, on 32
#: validation pictures, where a point is noise).
REFIT_UPDATE_SHARE = 0.25


def refit_protocol(old: System, collection: Collection) -> Protocol:
    """The protocol of a refit: the model's validation pictures stay the validation split
    (those still captioned), every other captioned picture is a training one."""
    return Protocol(collection, valid_ids=old.info["split"]["valid"])


def reselect_reason(old: System, collection: Collection, model: str) -> str | None:
    """Why `pamir fit` must run the full selection rather than refit `old` on `collection`
    (module docstring), or None when a warm refit will do."""
    info = old.info
    if info.get("data") != collection.name or info.get("model") != model:
        return (f"the existing model was fitted with {info.get('model')} on "
                f"{info.get('data')}, not {model} on {collection.name}")
    if "split" not in info:
        return "the existing model does not record its validation pictures (made before refits)"
    if not hasattr(type(old.model), "starting_from"):
        return f"a {model} model cannot start from its weights"
    before = int(info["split"]["development"])
    protocol = refit_protocol(old, collection)
    now = len(protocol.development)
    if abs(now - before) > REFIT_MAX_GROWTH * before:
        return (f"{now:,} captioned pictures against the model's {before:,}: more than "
                f"{REFIT_MAX_GROWTH:.0%} changed")
    if (before < SMALL_FOLDER_PICTURES) != (now < SMALL_FOLDER_PICTURES):
        return (f"{now:,} captioned pictures against the model's {before:,}: the small-folder "
                f"rule ({SMALL_FOLDER_PICTURES:,}) chooses among other candidates now")
    if len(protocol.valid) < len(old.info["split"]["valid"]) // 2:
        return "most of the model's validation pictures lost their keywords"
    changed = len(set(protocol.vocabulary) ^ set(old.vocabulary))
    if changed > REFIT_MAX_WORD_CHANGE * len(old.vocabulary):
        return (f"{changed:,} words came or went in a vocabulary of {len(old.vocabulary):,}: "
                f"more than {REFIT_MAX_WORD_CHANGE:.0%}")
    return None


def starting_weights(old: System, vocabulary: list[str]) -> np.ndarray:
    """The model's W with a row per word of `vocabulary`: a known word's row, zeros for a
    new one (a word gone is dropped)."""
    W = old.model.W_
    out = np.zeros((len(vocabulary), W.shape[1]), np.float32)
    for t, word in enumerate(vocabulary):
        if word in old.word_index:
            out[t] = W[old.word_index[word]]
    return out


def refit_system(old: System, collection: Collection, *, retrain: bool | None = None,
                 progress: bool = False, cache_dir=None, log=None, **fit) -> System:
    """`old` refitted on `collection` (module docstring): its representation and
    parameters, its validation pictures, PAMIR warm-started from its weights for
    REFIT_UPDATE_SHARE of the update budget. retrain: as `old` was when None. `fit`:
    more of fit_system's keywords (time_budget, neighbours). info["refit"] says what was
    reused and what it started from."""
    # pamir.training imports this module (a cycle at import)
    from . import fit_system  # noqa: PLC0415

    say = log or (lambda *a: None)
    protocol = refit_protocol(old, collection)
    F, ok, _ = old.pipeline.transform([str(p) for p in collection.paths])
    cls = type(old.model)
    budget = cls.update_budget(len(protocol.train))
    n_updates = max(budget["eval_every"], int(REFIT_UPDATE_SHARE * budget["n_updates"]))
    params = {**old.model.get_params(), "n_updates": n_updates,
              "eval_every": budget["eval_every"]}
    chosen = {k for point in old.info.get("grid") or [] for k in point.get("params", {})}
    reused = {"representation": old.info.get("representation"),
              "params": {k: v for k, v in (old.info.get("params") or {}).items()
                         if k in chosen}}  # what the selection chose
    new_words = [w for w in protocol.vocabulary if w not in old.word_index]
    say(f"refit: reusing {reused['representation']} and "
        f"{_fmt(reused['params'])}, PAMIR starting from "
        f"the model's weights ({len(new_words)} new words from zero), {n_updates:,} updates "
        f"at most; `pamir fit --reselect` runs the full selection")
    system = fit_system(collection, old.info["model"], model_params=params, grid={},
                        protocol=protocol, inputs=(F, ok, old.pipeline),
                        coef_init=starting_weights(old, protocol.vocabulary),
                        retrain=bool(old.info.get("retrained")) if retrain is None else retrain,
                        progress=progress, cache_dir=cache_dir, log=log, **fit)
    system.info["representation_settings"] = old.info.get("representation_settings")
    system.info["refit"] = {
        "reused": reused, "start": "the model's weights", "new_words": new_words,
        "development": {"model": int(old.info["split"]["development"]),
                        "now": int(len(protocol.development))},
        "updates": n_updates, "rule": {"max_growth": REFIT_MAX_GROWTH,
                                       "max_word_change": REFIT_MAX_WORD_CHANGE}}
    return system


def saved_for_refit(folder, representation=None, *, log=None) -> System | None:
    """The system saved in `folder` that a refit may start from, or None where there is none,
    it cannot be read (the full selection then replaces it, and `log` says so), or
    `representation` names other candidates than those it chose among."""
    folder = Path(folder)
    if not (folder / "model.json").is_file():
        return None
    try:
        old = System.load(folder)
    except (OSError, ValueError, KeyError) as e:
        if log:
            log(f"{folder}: the model there cannot be read ({e}); fitting a new one")
        return None
    tried = {r["representation"] for r in old.info.get("representations", [])}
    return old if not representation or set(representation) == tried else None


def fit_or_refit(collection: Collection, output, model: str = "pamir", *,
                 reselect: bool = False, representation=None, retrain: bool | None = None,
                 log=None, **fit) -> System:
    """What `pamir fit DATA -o OUTPUT` trains: where OUTPUT holds a model of this collection
    that a refit may start from (saved_for_refit) and reselect_reason finds none, that
    model refitted (refit_system: seconds); else the full selection (fit_system: minutes).
    reselect: always the full selection, as does a request that changes what the selection
    chooses among (fit's `model_params` or a `grid` without its choices). `fit`: more of
    fit_system's keywords (feature_settings, model_params, grid, ensemble, time_budget,
    progress, cache_dir). The system is not saved."""
    # pamir.training imports this module (a cycle at import)
    from . import fit_system  # noqa: PLC0415

    say = log or (lambda *a: None)
    changed = fit.get("model_params") or fit.get("grid") == [{}]
    old = None if reselect or changed else saved_for_refit(output, representation, log=log)
    reason = None if old is None else reselect_reason(old, collection, model)
    if reason:
        say(f"{output}: the full selection runs: {reason}")
    if old is not None and reason is None:
        keep = {k: fit[k] for k in ("progress", "cache_dir", "time_budget") if k in fit}
        return refit_system(old, collection, retrain=retrain, log=log, **keep)
    return fit_system(collection, model, representation=representation, retrain=retrain,
                      log=log, **fit)


def _fmt(params: dict) -> str:
    return ", ".join(f"{k}={v}" for k, v in params.items()) or "the default parameters"


__all__ = ["REFIT_MAX_GROWTH", "REFIT_MAX_WORD_CHANGE", "REFIT_UPDATE_SHARE", "refit_protocol",
           "refit_system", "reselect_reason", "starting_weights"]
