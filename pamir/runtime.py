"""ONNX Runtime on the CPU: one way to open a graph for every network pamir runs (the CNN
views' trunks, the text detector, the sentence-embedding model, a quantized graph's check).
It sits in the bottom layer so that text and features both reach it downwards."""


def cpu_session(source: str | bytes, threads: int = 0, arena: bool | None = None):
    """An ONNX Runtime session on the CPU for a graph (its path or bytes): `threads`
    intra-op threads (0: ONNX Runtime's choice), one inter-op thread, every graph
    optimisation, warnings only; its memory arena on or off (None: ONNX Runtime's default).
    The CNN views' trunks, the text detector in int8, and a quantized graph's check."""
    import onnxruntime as ort  # noqa: PLC0415 - the [cnn] extra

    options = ort.SessionOptions()
    options.intra_op_num_threads = max(0, threads)
    options.inter_op_num_threads = 1
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.log_severity_level = 3
    if arena is not None:
        options.enable_cpu_mem_arena = arena
    return ort.InferenceSession(source, options, providers=["CPUExecutionProvider"])
