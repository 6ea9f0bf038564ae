"""int8 text detection (pamir.facts.ocr_int8): it reads painted words as the fp32 detector
does, where they were painted; it is made and checked once per processor into the cache;
where it cannot be made, or no variant reads as fp32 does, the reader detects in fp32 and says
why in one line; the fingerprint tells them apart."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("rapidocr")
pytest.importorskip("onnxruntime.quantization")

from pamir.facts import ocr_int8  # noqa: E402
from pamir.features import cnn_int8  # noqa: E402
from pamir.facts.ocr import (OcrSettings, TextReader, bundled_models, fingerprint,  # noqa: E402
                             phrase, text_facts)
from pictures import backdrop, paint  # noqa: E402

INT8, FP32 = OcrSettings(detect_precision="int8"), OcrSettings(detect_precision="fp32")
SIGNS = [("FRESH BREAD", "DejaVuSans-Bold.ttf", 48, (20, 20, 20), (240, 232, 205), 0),
         ("Museum", "DejaVuSerif.ttf", 40, (255, 255, 255), (20, 100, 50), 4),
         ("pharmacy open", "DejaVuSans.ttf", 32, (250, 210, 40), (25, 25, 25), -6),
         ("STATION", "DejaVuSansMono-Bold.ttf", 36, (255, 255, 255), None, 3)]


@pytest.fixture(scope="module")
def readers(cache_of_the_module):
    """The int8 and the fp32 reader, the int8 detector made and checked in this module's own
    cache (where no variant reads as fp32 does on this processor, the "int8" reader detects
    in fp32 and says so: what it guarantees is then fp32's reads)."""
    import warnings

    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "int8 text detection unavailable .Unfaithful")
        return TextReader(INT8), TextReader(FP32)


def kept() -> str:
    """The detector's variant kept on this processor ("fp32" where none is faithful)."""
    return detector_choice().variant


def test_the_int8_reader_reads_painted_words_as_fp32_does(readers):
    int8, fp32 = readers
    assert int8.settings.detect_precision == ("fp32" if kept() == "fp32" else "int8")
    for text, *style in SIGNS:
        rgb = paint(text, *style)
        a, b = int8.read(rgb), fp32.read(rgb)
        assert [line.text for line in a] == [line.text for line in b], (text, a, b)
        assert set(phrase(text).split()) <= {f.word for f in text_facts(a)}
        for x, y in zip(a, b):  # the same line, found where fp32 finds it (box fractions)
            assert np.abs(np.subtract(x.box, y.box)).max() < 0.03, (text, x.box, y.box)


def test_the_int8_reader_finds_nothing_where_nothing_is_written(readers):
    int8, _ = readers
    assert int8.read(np.asarray(backdrop(seed=3))) == []


def detector_choice(make: bool = False):
    return ocr_int8.detector_choice(bundled_models()["det"], TextReader._blob, None, make)


def test_the_int8_detector_is_made_once_and_cached(readers, monkeypatch):
    choice = detector_choice()  # made and checked by the readers fixture
    if choice.variant == "fp32":  # no variant faithful on this processor: none kept
        assert choice.graph is None and not any(t["faithful"] for t in choice.tried)
    else:
        assert Path(choice.graph).is_file() and choice.tried[-1]["faithful"]
        assert choice.tried[-1]["share"] >= ocr_int8.FAITHFUL_READS

    def refuse(*args):
        raise AssertionError("quantized again although the cache holds it")

    monkeypatch.setattr(cnn_int8, "quantize_variants", refuse)
    cnn_int8._CHOICES.clear()  # as a new process: from the record
    assert detector_choice().variant == choice.variant
    if choice.variant != "fp32":
        assert TextReader(INT8).settings.detect_precision == "int8"


def test_the_quantized_detector_is_int8_and_its_key_is_stable(readers):
    import onnx

    if kept() == "fp32":
        pytest.skip("no int8 variant of the detector reads as fp32 does on this processor")
    det = bundled_models()["det"]
    graph = onnx.load(detector_choice().graph)
    assert sum(n.op_type == "DequantizeLinear" for n in graph.graph.node) >= 50
    assert ocr_int8.detector_key(det, TextReader._blob) == \
        ocr_int8.detector_key(det, TextReader._blob)


def test_a_detector_that_cannot_be_quantized_falls_back_to_fp32_with_a_message(
        tmp_path, monkeypatch):
    monkeypatch.setenv("PAMIR_CACHE", str(tmp_path))  # nothing cached: it must be made

    def broken(*args):
        raise RuntimeError("no quantizer here")

    monkeypatch.setattr(cnn_int8, "quantize_variants", broken)
    with pytest.warns(RuntimeWarning, match=r"int8 text detection unavailable \(RuntimeError: "
                                            r"no quantizer here\); detecting in fp32"):
        reader = TextReader(INT8)
    assert reader.settings.detect_precision == "fp32"
    assert fingerprint(reader.settings) == fingerprint(FP32)
    rgb = paint(*SIGNS[0])
    assert {"fresh", "bread"} <= {f.word for f in text_facts(reader.read(rgb))}
    assert not list(tmp_path.rglob("*int8*"))  # no half-made graph left in the cache


def test_an_unknown_precision_is_named_and_detects_in_fp32():
    with pytest.warns(RuntimeWarning, match="unknown precision 'int4'"):
        reader = TextReader(OcrSettings(detect_precision="int4"))
    assert reader.settings.detect_precision == "fp32"


def test_the_fingerprint_tells_int8_from_fp32():
    assert fingerprint(INT8) != fingerprint(FP32)
    assert fingerprint(INT8).endswith("-detint8")
    assert "int8" not in fingerprint(FP32)  # indexes read in fp32 keep their fingerprint


def test_the_calibration_pictures_are_made_here_and_half_hold_a_word():
    pictures = ocr_int8.calibration_bgr()
    assert len(pictures) == 72
    assert all(p.dtype == np.uint8 and p.shape[2] == 3 for p in pictures)
    assert max(max(p.shape[:2]) for p in pictures) <= ocr_int8.SIDE + 1
    again = ocr_int8.calibration_bgr()
    assert all(np.array_equal(a, b) for a, b in zip(pictures, again))  # seeded


def test_rapidocr_defaults_stay_the_fp32_reference_without_a_warning():
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        reader = TextReader(OcrSettings(rapidocr_defaults=True, detect_precision="int8"))
    assert reader.settings.detect_precision == "fp32"
    assert "int8" not in fingerprint(OcrSettings(rapidocr_defaults=True, detect_precision="int8"))


def test_the_pass_is_named_after_the_precision_it_reads_with(tmp_path, monkeypatch):
    """Where the int8 detector cannot be made, the settings the pass is named after say fp32
    (it would read every picture again once int8 could be made), and the quantizer is not
    tried again for each reader."""
    from pamir.facts.ocr import settled

    monkeypatch.setenv("PAMIR_CACHE", str(tmp_path))
    tries = []

    def broken(*args):
        tries.append(1)
        raise RuntimeError("no quantizer in this cache")

    monkeypatch.setattr(cnn_int8, "quantize_variants", broken)
    with pytest.warns(RuntimeWarning, match="no quantizer in this cache"):
        assert settled(INT8).detect_precision == "fp32"
    assert fingerprint(settled(INT8)) == fingerprint(FP32) and tries == [1]
    assert settled(FP32) == FP32


def test_a_detector_that_reads_otherwise_falls_back_to_fp32_and_says_why(tmp_path, monkeypatch):
    """Where no variant reads the painted words as fp32 does (a processor whose int8 kernels
    saturate), the reader detects in fp32, and the line says what was measured."""
    from pamir.facts.ocr import settled

    monkeypatch.setenv("PAMIR_CACHE", str(tmp_path))
    made = []

    def variants(fp32, feeds, variants=cnn_int8.VARIANTS):
        for v in variants:
            made.append(v.name)
            yield v, b"a graph"

    def measure(pictures, reader):
        return lambda graph: {"words": 36, "same": 20, "share": 0.5556, "faithful": False,
                              "says": "reads had 20 of the 36 painted words fp32 reads"}

    monkeypatch.setattr(cnn_int8, "quantize_variants", variants)
    monkeypatch.setattr(ocr_int8, "read_fidelity", measure)
    with pytest.warns(RuntimeWarning, match=r"int8 text detection unavailable \(Unfaithful: "
                                            r"fp32: the int8 graph's reads had 20 of the 36 "):
        assert settled(INT8).detect_precision == "fp32"
    assert made == [v.name for v in cnn_int8.VARIANTS]
    assert detector_choice().variant == "fp32" and not list(tmp_path.rglob("*int8*.onnx"))


def test_painted_words_are_the_same_read_only_where_boxes_agree():
    from pamir.facts.ocr import TextLine

    a = [TextLine("x", 0.9, (0, 0, .1, .1)), TextLine("Museum of Art", 0.9, (.1, .2, .5, .3))]
    assert ocr_int8.same_word(a, a[1:], "Museum of Art")
    moved = [TextLine("Museum of Art", 0.9, (.1, .25, .5, .35))]
    assert not ocr_int8.same_word(moved, a, "Museum of Art")
    assert not ocr_int8.same_word([], a, "Museum of Art")
    assert [ocr_int8.painted_word(i) for i in range(4)] == [None, "OPEN", None, "Bakery"]
