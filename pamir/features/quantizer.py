"""pamir's one int8 quantizer, at work: ONNX Runtime's static QDQ quantization of an ONNX
graph in each of a list of variants (`quantize_variants`). What the variants are, why, and
how a variant is checked against fp32 and kept are pamir.features.cnn_int8's.

onnx and ONNX Runtime's quantization tools (the [cnn] extra) are imported at this module's
top: cnn_int8 imports it only when a graph is quantized, once per machine and network. A
change here that changes a quantized graph bumps cnn_int8.QUANT_VERSION.
"""

from __future__ import annotations

import inspect
import tempfile
from pathlib import Path

import onnx
from onnx import version_converter
from onnxruntime.quantization import (
    CalibrationDataReader,
    CalibrationMethod,
    QuantFormat,
    QuantType,
    quantize_static,
)
from onnxruntime.quantization.shape_inference import quant_pre_process


def quantize_variants(fp32: bytes, feeds: list, variants, options=None):
    """(variant, quantized graph's bytes) for each of `variants` (pamir.features.cnn_int8's
    Variant) in turn, made when asked for: pamir.features.cnn_int8.quantize_variants says
    how."""
    class Feeds(CalibrationDataReader):
        def __init__(self):
            self.feeds = iter(feeds)

        def get_next(self):
            return next(self.feeds, None)

    with tempfile.TemporaryDirectory(prefix="pamir-int8-") as tmp:
        source, prepared, out, ranges = (Path(tmp) / n for n in
                                         ("fp32.onnx", "pre.onnx", "int8.onnx", "ranges.json"))
        source.write_bytes(_opset13(fp32))
        # shape inference and graph fusions first, as ORT advises for static quantization;
        # the batch, height and width stay dynamic (no symbolic shape inference needed)
        quant_pre_process(str(source), str(prepared), skip_symbolic_shape=True)
        shared = ({"calibration_cache_path": str(ranges)} if "calibration_cache_path" in
                  inspect.signature(quantize_static).parameters else {})
        for variant in variants:
            settings = dict(quant_format=QuantFormat.QDQ, per_channel=True,
                            reduce_range=variant.reduce_range,
                            activation_type=(QuantType.QUInt8 if variant.activations == "uint8"
                                             else QuantType.QInt8),
                            weight_type=QuantType.QInt8,
                            calibrate_method=CalibrationMethod.MinMax,
                            nodes_to_exclude=_float_nodes(prepared, variant.float_blocks),
                            **shared)
            settings.update(options(prepared) if options else {})
            quantize_static(str(prepared), str(out), Feeds(), **settings)
            yield variant, out.read_bytes()


def _float_nodes(graph: Path, blocks: int) -> list[str]:
    """The names of the nodes of the first `blocks` MBConv blocks of an exported trunk (the
    exporter names them /_blocks.i/..., cnn_torch's modules): whole blocks, since a
    block cut in two measured worse than either (a Conv left fp32 while its ReLU6 is
    quantized: lite1 0.93 of fp32's on Corel, against 0.978 all int8)."""
    if not blocks:
        return []
    prefixes = tuple(f"/_blocks.{i}/" for i in range(blocks))
    return [n.name for n in onnx.load(str(graph)).graph.node if n.name.startswith(prefixes)]


def _opset13(data: bytes) -> bytes:
    """The graph as it is where its default opset is 13 or later, else converted to 13."""
    graph = onnx.load_from_string(data)
    if max((o.version for o in graph.opset_import if o.domain in ("", "ai.onnx")),
           default=13) >= 13:
        return data
    return version_converter.convert_version(graph, 13).SerializeToString()


__all__ = ["quantize_variants"]
