"""`pamir index` through Dask (pamir.jobs.indexing_dask, pamir.distributed): one 2-process LocalCluster for the module.

An index built through the cluster equals one built in this process, picture by picture and
score by score; a worker killed mid-run leaves an index that a rerun completes, nothing
indexed twice.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import numpy as np
import pytest

distributed = pytest.importorskip("distributed")

import cloudpickle  # noqa: E402  (a dependency of distributed)
import dask  # noqa: E402

from pamir.jobs.indexing_dask import BatchesFailed, DaskTransform, transform_batch  # noqa: E402
from pamir.index import Index, model_fingerprint  # noqa: E402
from pictures import coloured_pictures  # noqa: E402

# The kill switch below runs on the workers: send this module's functions by value (the
# workers cannot import the tests folder).
cloudpickle.register_pickle_by_value(sys.modules[__name__])


def make_collection(root: Path, n: int = 48) -> Path:
    """n small generated pictures (plain or striped colours), their captions table, and one
    file that is no picture."""
    table = coloured_pictures(root, n, digits=2)
    (root / "junk.png").write_bytes(b"\x00not a picture" * 10)  # recorded as unreadable
    return table


@pytest.fixture(scope="module")
def system_dir(tmp_path_factory):
    """(model folder, pictures folder): a tiny real visterms + PAMIR system."""
    from pamir.facts.collection import load_collection
    from pamir.features import FeatureSettings
    from pamir.training import fit_system

    root = tmp_path_factory.mktemp("dask")
    table = make_collection(root / "pictures")
    settings = FeatureSettings(short_side=40, n_visterms=16, n_colours=8, kmeans_iterations=4,
                               colour_max_pictures=48)
    coll = load_collection(table)
    system = fit_system(coll, "pamir", settings, {"n_updates": 3_000, "eval_every": 1_000},
                        progress=False, representation="visterms", cache_dir=root / "cache",
                        log=None, grid={})
    system.save(root / "model")
    return root / "model", root / "pictures"


@pytest.fixture(scope="module")
def client():
    """A 2-worker LocalCluster of processes; a task whose worker dies is given up at once
    (KilledWorker; by default the scheduler tries it on 3 more workers first)."""
    with dask.config.set({"distributed.scheduler.allowed-failures": 0}):
        cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                           dashboard_address=None)
        with distributed.Client(cluster) as c:
            yield c
        cluster.close()


def in_process_index(directory: Path, model: Path, pictures: Path) -> Index:
    from pamir.system import System

    system = System.load(model, progress=False)
    ix = Index.create(directory, system.vocabulary, system.idf)
    ix.update([pictures], system.transform_paths, batch_size=16)
    return ix


def contents(ix: Index) -> dict:
    """{path: (hash, size, mtime, state, reason, scores)} of every picture."""
    out = {}
    for p in ix.pictures():
        assert p.path not in out, f"{p.path} indexed twice"
        scores = tuple(ix.vector(p.id)) if p.state == "ok" else None
        out[p.path] = (p.hash, p.size, p.mtime_ns, p.state, p.reason, scores)
    return out


def test_cluster_index_equals_in_process(system_dir, client, tmp_path):
    model, pictures = system_dir
    with in_process_index(tmp_path / "local", model, pictures) as ref:
        expected = contents(ref)
    from pamir.system import System

    system = System.load(model, progress=False)
    transform = DaskTransform(client, model, model_fingerprint(model))
    with Index.create(tmp_path / "dask", system.vocabulary, system.idf) as ix:
        report = ix.update([pictures], transform, batch_size=8)
        got = contents(ix)
    assert report.added == 48 and [Path(p).name for p, _ in report.failed] == ["junk.png"]
    assert got.keys() == expected.keys()
    for path in expected:  # picture by picture, score by score, bit for bit
        assert got[path] == expected[path], path


def test_cli_index_on_a_scheduler(system_dir, client, tmp_path):
    """`pamir index --scheduler ADDRESS` drives the same path from the command line."""
    from typer.testing import CliRunner

    from pamir.cli import app

    model, pictures = system_dir
    r = CliRunner().invoke(app, ["index", str(model), str(pictures), "--index",
                                 str(tmp_path / "ix"), "--scheduler",
                                 client.scheduler.address, "--batch", "16"])
    assert r.exit_code == 0, r.output + repr(r.exception)
    assert "48 pictures indexed" in r.output and "junk.png" in r.output


def killing_task(marker_dir, victim, model_dir, fingerprint, classes, cache_dir, paths):
    """transform_batch, except that the worker running the batch holding `victim` dies
    (os._exit, as a kill or an out-of-memory would) the first time (noted in marker_dir)."""
    if victim in paths and not Path(marker_dir, "died").exists():
        Path(marker_dir, "died").touch()
        os._exit(1)
    return transform_batch(model_dir, fingerprint, classes, cache_dir, paths)


class Killing(DaskTransform):
    def __init__(self, *args, victim, marker_dir, **kw):
        super().__init__(*args, **kw)
        self.task = killing_task
        self.args = (marker_dir, victim) + self.args


def test_killed_worker_then_rerun_completes(system_dir, client, tmp_path):
    model, pictures = system_dir
    from pamir.system import System

    system = System.load(model, progress=False)
    fp = model_fingerprint(model)
    victim = str((pictures / "p20.png").resolve())
    with in_process_index(tmp_path / "local", model, pictures) as ref:
        expected = contents(ref)

    with Index.create(tmp_path / "ix", system.vocabulary, system.idf) as ix:
        # The worker running one batch dies (allowed-failures is 0 here): that batch is
        # given up, the others are committed...
        killing = Killing(client, model, fp, victim=victim, marker_dir=str(tmp_path),
                          retries=0)
        with pytest.raises(BatchesFailed) as failed:
            ix.update([pictures], killing, batch_size=8)
        # (the tasks queued on the dead worker die with it)
        assert (tmp_path / "died").exists() and 1 <= len(failed.value.failed) < 7
        partial = contents(ix)
        assert victim not in partial
        assert all(partial[p] == expected[p] for p in partial)
        # ... and a rerun computes only what is missing, nothing twice.
        report = ix.update([pictures], killing, batch_size=8)
        assert report.unchanged == len(partial)
        assert report.added == 48 - sum(v[3] == "ok" for v in partial.values())
        assert contents(ix) == expected


def test_fit_features_on_the_cluster_equal_in_process(system_dir, client, tmp_path):
    """`pamir fit --workers`: blocks and visterm assignment as Dask tasks give the same
    system, array for array (each run with an empty feature cache of its own)."""
    from pamir.facts.collection import load_collection
    from pamir.features import FeatureSettings
    from pamir.distributed import on_cluster
    from pamir.models.base import load_directory
    from pamir.training import fit_system

    _, pictures = system_dir
    coll = load_collection(pictures / "captions.tsv")
    settings = FeatureSettings(short_side=40, n_visterms=16, n_colours=8, kmeans_iterations=4,
                               colour_max_pictures=48)

    def fit(name):
        system = fit_system(coll, "pamir", settings, {"n_updates": 2_000, "eval_every": 1_000},
                            progress=False, representation="visterms", log=None, grid={},
                            cache_dir=tmp_path / f"cache-{name}")
        return load_directory(system.save(tmp_path / name))[1]

    local = fit("local")
    with on_cluster(client, batch=8):
        remote = fit("remote")
    assert local.keys() == remote.keys()
    for k in local:
        np.testing.assert_array_equal(local[k], remote[k], err_msg=k)
    blocks = list((tmp_path / "cache-remote" / "blocks").rglob("*.npy"))
    assert len(blocks) > 40  # the workers filled the feature cache


def test_fit_cnn_features_on_the_cluster_equal_in_process(system_dir, client, tmp_path):
    """`pamir fit --workers` with a CNN representation: the pooled vectors come from Dask
    tasks (the workers fill the feature cache) and the fitted system is the in-process one,
    array for array; an unreadable picture is left out with its reason either way."""
    from pamir.features.cnn import CNNRepresentation, CNNSettings
    from pamir.distributed import on_cluster

    _, pictures = system_dir
    paths = sorted(p for p in pictures.glob("*.png") if p.name != "junk.png")[:12]
    paths.append(tmp_path / "broken.jpg")
    paths[-1].write_bytes(b"not a picture")
    settings = CNNSettings(short_side=48, batch_size=4, n_jobs=1)

    def fitted(cache):
        rep = CNNRepresentation(settings, cache_dir=tmp_path / cache, progress=False)
        return rep, rep.fit_transform(paths)

    local, (X1, ok1, why1) = fitted("cache-local")
    with on_cluster(client, batch=4):
        remote, (X2, ok2, why2) = fitted("cache-remote")
    assert remote.stats_["engine"] == "dask"
    assert ok1.tolist() == ok2.tolist() == [True] * 12 + [False] and why2[-1] == why1[-1]
    np.testing.assert_allclose(X1, X2, atol=1e-5)
    np.testing.assert_allclose(local.mean_, remote.mean_, atol=1e-5)
    assert len(list((tmp_path / "cache-remote" / "cnn").rglob("*.npy"))) == 12


def test_a_bare_folder_and_its_text_on_the_cluster_equal_in_process(client, tmp_path,
                                                                    monkeypatch):
    """`pamir index FOLDER --scheduler ADDRESS` with no model: the zero-caption system's
    batches (ImageNet's classifier) and the text pass run as Dask tasks, and give the index
    that the same command gives in this process: the same pictures, class probabilities
    (within the network's float tolerance) and text facts, the junk file unreadable."""
    pytest.importorskip("rapidocr")
    import json

    import skimage.data
    from PIL import Image
    from fakes import run
    from pictures import paint

    monkeypatch.setenv("PAMIR_EMBEDDINGS", "0")
    folder = tmp_path / "bare"
    folder.mkdir()
    for name in ("chelsea", "coffee"):
        Image.fromarray(getattr(skimage.data, name)()).save(folder / f"{name}.png")
    Image.fromarray(paint("FRESH BREAD", "DejaVuSans-Bold.ttf", 48, (20, 20, 20),
                          (240, 232, 205), 0)).save(folder / "sign.jpg")
    (folder / "junk.png").write_bytes(b"\x00not a picture" * 10)

    def indexed(name, *options):
        # each run computes its features afresh (a feature cache of its own)
        monkeypatch.setenv("PAMIR_CACHE", str(tmp_path / f"cache-{name}"))
        r = json.loads(run("index", folder, "--index", tmp_path / name, "--json",
                           *options).stdout)
        with Index.open(tmp_path / name) as ix:
            got = {}
            for p in ix.pictures():
                row = ix.vector(p.id, classes=True) if p.state == "ok" else None
                got[Path(p.path).name] = (p.hash, p.state, row,
                                          [(f.kind, f.word) for f in ix.facts_of(p.id)])
        return r, got

    r1, local = indexed("local")
    r2, remote = indexed("remote", "--scheduler", client.scheduler.address)
    assert (r1["added"], r1["text"]["read"], r1["text"]["with_facts"]) == (3, 3, 1)
    assert (r2["added"], r2["text"]["read"], r2["text"]["with_facts"]) == (3, 3, 1)
    assert [Path(f["path"]).name for f in r2["failed"]] == ["junk.png"]
    assert local.keys() == remote.keys() == {"chelsea.png", "coffee.png", "sign.jpg",
                                             "junk.png"}
    for name, (digest, state, row, facts) in local.items():
        assert remote[name][:2] == (digest, state) and remote[name][3] == facts, name
        if row is not None:
            assert row.shape == (1000,)
            np.testing.assert_allclose(remote[name][2], row, atol=1e-5, err_msg=name)
    assert ("text", "fresh bread") in local["sign.jpg"][3]
    # the workers filled the feature cache the command named
    assert list((tmp_path / "cache-remote").rglob("*.npy"))


def test_a_video_is_read_on_the_workers(system_dir, client, tmp_path, monkeypatch):
    """A video's frames are read and scored where the cluster's tasks run (a remote worker
    cannot see frames written on this machine), as in this process."""
    from test_video import shot, write_video

    import pamir.index.videos
    from pamir.system import System

    model, _ = system_dir
    folder = tmp_path / "videos"
    folder.mkdir()
    write_video(folder / "walk.mp4", [shot("red"), shot("blue", stripes=True)])
    system = System.load(model, progress=False)
    with Index.create(tmp_path / "local", system.vocabulary, system.idf) as ix:
        ix.update([folder], system.transform_paths)
        [picture] = ix.pictures()
        expected, frames = ix.vector(picture.id), ix.frames_of([picture.id])[picture.id]

    def not_here(*args, **kwargs):
        raise AssertionError("a video read by the client, not by a worker")

    monkeypatch.setattr(pamir.index.videos, "read_video", not_here)
    transform = DaskTransform(client, model, model_fingerprint(model))
    with Index.create(tmp_path / "dask", system.vocabulary, system.idf) as ix:
        report = ix.update([folder], transform)
        assert report.added == 1 and report.failed == []
        [picture] = ix.pictures()
        np.testing.assert_allclose(ix.vector(picture.id), expected, rtol=1e-5, atol=1e-6)
        times, rows = ix.frames_of([picture.id])[picture.id]
    np.testing.assert_array_equal(times, frames[0])
    np.testing.assert_allclose(rows, frames[1], rtol=1e-3, atol=1e-3)
