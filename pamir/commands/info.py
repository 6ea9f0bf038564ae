"""`pamir info`: this machine as pamir's networks see it: the processor's instruction sets,
ONNX Runtime's version, and the precision each network runs at here, and why (the int8
variant kept by the check against fp32, pamir.features.cnn_int8, and its measured fidelity)."""

from __future__ import annotations

import json

import typer
from rich.markup import escape

from .. import config
from ..facts import ocr, ocr_int8
from ..features import cnn_int8
from .common import console


def info_command(
    check: bool = typer.Option(False, "--check",
                               help="quantize and check the networks now where that has not "
                                    "been done on this processor (about a minute)"),
    as_json: bool = typer.Option(False, "--json", help="print JSON"),
):
    """The processor, ONNX Runtime and the precision each network runs at here, and why."""
    cpu = cnn_int8.processor()
    networks = {f"cnn {m}": n for m, n in cnn_int8.network_precisions(check).items()}
    networks["text detection"] = detector_precision(check)
    asked = {"cnn": config.CNN_PRECISION, "text detection": ocr.DETECT_PRECISION}
    if as_json:
        print(json.dumps({"processor": cpu, "onnxruntime": cnn_int8.onnxruntime_version(),
                          "asked": asked, "networks": networks}, indent=1))
        return
    vnni = {True: "yes", False: "no", None: "unknown"}[cpu["vnni"]]
    console.print(f"processor: {cpu['name'] or cpu['machine']} ({cpu['machine']}); "
                  f"int8 instruction sets: {', '.join(cpu['flags']) or 'none known'}; "
                  f"VNNI: {vnni}")
    console.print(f"ONNX Runtime: {cnn_int8.onnxruntime_version() or 'not installed'}")
    console.print(f"precision asked: cnn {asked['cnn']} (PAMIR_CNN_PRECISION), text detection "
                  f"{asked['text detection']} (PAMIR_OCR_PRECISION)")
    for name, n in networks.items():
        console.print(f"{name}: {escape(n['says'])}")


def detector_precision(make: bool = False) -> dict:
    """The text detector's precision on this processor: {"says": the line, "choice": the
    record} (None where it has not been checked here; make=True checks it now)."""
    try:
        choice = ocr_int8.detector_choice(ocr.bundled_models()["det"], ocr.TextReader._blob,
                                          ocr.fp32_reader, make)
    except Exception as e:  # noqa: BLE001 - no rapidocr, no quantization tools
        return {"says": f"fp32: int8 unavailable ({type(e).__name__}: {e})", "choice": None}
    if choice is None:
        return {"says": "not checked on this processor yet (the first `pamir index` that reads "
                        "text does; `pamir info --check` now)", "choice": None}
    return {"says": choice.says(), "choice": choice.record()}


def register(app: typer.Typer) -> None:
    app.command("info")(info_command)
