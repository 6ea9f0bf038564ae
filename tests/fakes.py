"""Stand-ins the tests share: a hand-made linear system on a tiny visual pipeline
(`FakeSystem`: colours map to words, so results are known), a sentence-embedding model
(`FakeEmbedder`), an index of the fake system's pictures (`build_index`), and `run`, the
`pamir` command line through typer's CliRunner; and `default_system`, a real system of
the default model's shape with a random W."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import scipy.sparse as sp
from PIL import Image
from typer.testing import CliRunner

from pamir.cli import app
from pamir.features import FeatureSettings
from pamir.features.cnn import CNNSettings
from pamir.features.pipeline import PictureVisterms
from pamir.features.registry import make_representation
from pamir.features.representation import Extracted
from pamir.features.visterms import tfidf
from pamir.index import Index
from pamir.models.pamir import PAMIR
from pamir.system import System
from pictures import disc_pictures, make_pictures

runner = CliRunner()


VOCAB = ["red", "green", "blue", "sky", "stripes"]


class FakePipeline:
    """A tiny visual pipeline with the real one's explanation interface: 2x2 blocks, each
    block's visterm its dominant colour channel (+3 if it is busy: "stripes")."""

    V = 6
    output = "bags"

    def __init__(self):
        self.idf_ = np.linspace(1.0, 2.0, self.V).astype(np.float32)

    def picture_visterms(self, path):
        with Image.open(path) as im:
            rgb = np.asarray(im.convert("RGB").resize((32, 32)), np.float32)
            w, h = im.size
        visterms = []
        for y in (0, 16):
            for x in (0, 16):
                b = rgb[y:y + 16, x:x + 16]
                v = int(np.argmax(b.mean(axis=(0, 1))))
                if b.std(axis=(0, 1)).max() > 30:
                    v += 3
                visterms.append(v)
        boxes = np.array([[x, y, w / 2, h / 2] for y in (0, h / 2) for x in (0, w / 2)])
        return PictureVisterms(np.array(visterms), boxes, (w, h))

    def transform(self, paths) -> Extracted:
        rows, ok, reasons = [], np.zeros(len(paths), bool), [None] * len(paths)
        for i, p in enumerate(paths):
            tf = np.zeros(self.V, np.float32)
            try:
                np.add.at(tf, self.picture_visterms(p).visterms, 1)
                ok[i] = True
            except Exception as e:  # as the real pipeline: a reason, never an exception
                reasons[i] = f"not a picture ({type(e).__name__})"
            rows.append(tf)
        return Extracted(tfidf(sp.csr_matrix(np.array(rows)), self.idf_), ok, reasons)


class FakeSystem:
    """A linear system with PAMIR's shape: z = W bag, W hand-made so colours map to words."""

    def __init__(self):
        self.vocabulary = VOCAB
        self.idf = np.array([1.0, 1.0, 1.5, 0.7, 2.0])
        self.pipeline = FakePipeline()
        rng = np.random.default_rng(0)
        W = rng.normal(0, 0.1, (len(VOCAB), FakePipeline.V))
        for t in range(3):
            W[t, t] += 1.0
            W[t, t + 3] += 0.8
        W[4, 3:] += 1.0
        W[3, 2] += 0.5
        self.model = PAMIR(c=0.1, epsilon=1.0)  # learns by its own methods
        self.model.W_, self.model.input = W.astype(np.float32), "bags"
        self.model.T_, self.model.V_ = W.shape
        self.model.idf_ = self.idf
        self.info = {}

    def features(self, paths):
        return self.pipeline.transform(paths)

    def transform_paths(self, paths):
        X, ok, reasons = self.pipeline.transform(paths)
        return np.asarray(X @ self.model.W_.T, np.float32), ok, reasons

    def save(self, path):
        """The model folder as the feedback loop keeps it: W in a file (atomically)."""
        import io as _io

        from pamir.storage import atomic_write_bytes
        buf = _io.BytesIO()
        np.save(buf, self.model.W_)
        Path(path).mkdir(parents=True, exist_ok=True)
        atomic_write_bytes(Path(path) / "model.json", b"{}")
        atomic_write_bytes(Path(path) / "W.npy", buf.getvalue())
        return Path(path)


def build_index(tmp_path: Path, system=None) -> Path:
    system = system or FakeSystem()
    folder = tmp_path / "pictures"
    make_pictures(folder)
    with Index.create(tmp_path / "index", system.vocabulary, system.idf) as ix:
        ix.update([folder], system.transform_paths)
    return tmp_path / "index"


class FakeEmbedder:
    """Stands in for the sentence-embedding model (test_bridge runs the real one): each
    vocabulary word and each of CLASSES is an axis; a few other words lie near some of them;
    any other text points its own (seeded) way in the remaining dimensions."""

    CLASSES = ["fire engine", "zebra"]
    AXES = VOCAB + CLASSES
    NEAR = {"crimson": {"red": 0.8}, "scarlet": {"red": 0.7, "blue": 0.45},
            "ocean": {"blue": 0.6, "sky": 0.5}, "zebras": {"stripes": 0.55, "zebra": 0.9},
            "firetruck": {"fire engine": 0.9}}
    dim = 64

    def encode(self, texts):
        out = []
        for t in texts:
            v = np.zeros(self.dim)
            if t in self.AXES:
                v[self.AXES.index(t)] = 1.0
            for w, s in self.NEAR.get(t, {}).items():
                v[self.AXES.index(w)] = s
            rest = np.sqrt(max(0.0, 1 - (v ** 2).sum()))
            if rest > 0:  # the rest of its meaning: its own direction, far from the axes
                r = np.random.default_rng(sum(map(ord, t))).normal(size=self.dim)
                r[: len(self.AXES)] = 0
                v += rest * r / np.linalg.norm(r)
            out.append(v)
        return np.array(out, np.float32)


def use_fake_embedder(monkeypatch):
    import pamir.text.embedding as embedding
    import pamir.zeroshot.classes as zeroshot
    monkeypatch.setattr(embedding, "_embedder", FakeEmbedder())
    monkeypatch.setenv("PAMIR_EMBEDDINGS", "1")
    # the class texts embedded by the fake too, not the real model's shipped embeddings
    monkeypatch.setattr(zeroshot, "packaged_class_embeddings", lambda: None)


def run(*args, ok=True):
    r = runner.invoke(app, [str(a) for a in args])
    if ok:
        assert r.exit_code == 0, r.output + repr(r.exception)
    return r


#: The default model's representation (config.DEFAULT_REPRESENTATIONS' first choice), and
#: small CNN settings for it: eager torch, one process.
DEFAULT = "cnn+cnn-lite1+cnn-lite2+visterms"
SMALL = CNNSettings(short_side=64, engine="torch", batch_size=4, n_jobs=1)


def default_system(root, name: str = DEFAULT, weights=(1.0, 0.7, 0.7, 0.5)) -> System:
    """A system of the default model's shape: the default four views (CNN views run by eager
    torch, visterms on a small codebook), fitted on generated pictures, and a PAMIR with a
    random W (exactness does not depend on training)."""
    paths = disc_pictures(root / "pictures")
    settings = FeatureSettings(short_side=48, n_visterms=16, n_colours=8, kmeans_iterations=4,
                               colour_max_pictures=60)
    rep = make_representation(name, feature_settings=settings, cnn_settings=SMALL,
                              weights=list(weights)[:len(name.split("+"))], progress=False,
                              sift_visterms=8)
    rep.fit(paths)
    X = rep.transform(paths).X
    model = PAMIR()
    model.W_ = np.random.default_rng(0).normal(0, 1, (len(VOCAB), X.shape[1])).astype(np.float32)
    idf = np.linspace(1.0, 2.0, len(VOCAB))
    return System(rep, model, VOCAB, idf)



def name_vector(path: str, T: int) -> np.ndarray:
    """A picture's (T,) vector as a function of its name alone ("rROUND-J.png"): what a
    writer stores, so that a reader in another process can check any answer."""
    stem = Path(path).stem
    n = int(stem.split("-")[-1]) + 1000 * int(stem.split("-")[0][1:])
    return np.random.default_rng(n).random(T).astype(np.float32)

# ------------------------------------------------------------------ a shared server
#: The tokens of a shared server (pamir.server.sharing): a viewer's and an editor's.
TOKENS = {"viewer": "v" * 20 + "-viewer-token", "editor": "e" * 20 + "-editor-token"}


def indexed_with_model(root):
    """(index folder, model folder, system): the stand-in system saved, and an index of the
    generated pictures that names it as its model."""
    from pamir.index import Index

    os.environ["PAMIR_EMBEDDINGS"] = "0"
    system = FakeSystem()
    index_dir = build_index(root, system)
    model_dir = system.save(root / "model")
    with Index.open(index_dir, writable=True) as ix:
        ix.set_model(model_dir, "fake")
    return index_dir, model_dir, system
