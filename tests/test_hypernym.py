"""Issue 37: a model fitted on a handful of pictures never searches a word it has not seen
worse than the bare index does. `bird` is a hypernym: no Corel caption of the model says it,
WordNet names ImageNet's bird classes under it."""

from __future__ import annotations

import shutil

import numpy as np

from pamir.data import load_corel5k
from pamir.facts.collection import load_collection
from pamir.evaluation.metrics import average_precision
from pamir.index import Index
from pamir.training import fit_system
from pamir.jobs.indexing import index_folders

BIRDS = {"birds", "bird", "nest", "flight", "wings"}


def avgp(index_dir, query: str, relevant: set[str]) -> float:
    with Index.open(index_dir) as ix:
        hits = ix.search(query, ix.status()["pictures"])
    scores = np.zeros(len(hits))
    rel = np.array([h.path.endswith(tuple(relevant)) for h in hits])
    scores[:] = -np.arange(len(hits))  # the ranking itself
    return float(average_precision(scores[None, :], rel[None, :])[0])


def test_a_model_of_a_handful_finds_birds_as_the_bare_index_does(tmp_path, corel_root):
    coll = load_corel5k(corel_root)
    words = [set(c or ()) for c in coll.captions]
    test = [i for i, s in enumerate(coll.splits) if s == "test"]
    birds = [i for i in test if "birds" in words[i]][:12]
    others = [i for i in test if not words[i] & BIRDS][:36]
    train = [i for i, s in enumerate(coll.splits)
             if s == "train" and not words[i] & BIRDS][:10]
    assert len(birds) == 12
    taught = tmp_path / "taught"  # the handful, with a captions table beside them
    taught.mkdir()
    for i in train:
        shutil.copy(coll.paths[i], taught / f"{i}.jpeg")
    table = taught / "captions.tsv"
    table.write_text("path\tkeywords\n" + "".join(
        f"{i}.jpeg\t{' '.join(sorted(words[i]))}\n" for i in train))
    system = fit_system(load_collection(table), "pamir",
                        model_params={"n_updates": 500, "eval_every": 250}, grid={},
                        representation="cnn", cache_dir=tmp_path / "cache", progress=False,
                        log=None)
    assert not BIRDS & set(system.vocabulary)
    system.save(tmp_path / "model")
    folder = tmp_path / "pics"
    folder.mkdir()
    for i in birds + others:
        shutil.copy(coll.paths[i], folder / f"{i}.jpeg")
    index_folders(None, [folder], index=tmp_path / "bare")
    index_folders(tmp_path / "model", [folder], index=tmp_path / "fitted")
    relevant = {f"/{i}.jpeg" for i in birds}
    bare = avgp(tmp_path / "bare", "bird", relevant)
    fitted = avgp(tmp_path / "fitted", "bird", relevant)
    assert bare > 0.5  # ImageNet's bird classes do find Corel's birds
    assert fitted >= bare - 1e-9
