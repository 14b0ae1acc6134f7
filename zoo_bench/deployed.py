"""The deployed runtimes ``zoo benchmark --compare all`` times beside MXNet: our fp32 graph
exported to ONNX on ONNX Runtime and as an OpenVINO IR, and that IR quantized to int8
(:mod:`zoo.onnx.int8`, naively calibrated on the benchmark input, or on a dataset split's
images when the benchmark also scores accuracy, :mod:`zoo_bench.accuracy`). Each runs in
its own process, started fresh (``spawn``) and loading no MXNet: OpenVINO's, ONNX
Runtime's and MXNet's thread pools slow each other down in one process.

``zoo benchmark --checkpoint FILE.onnx|FILE.xml`` times a deployed file alone, in this
process (:func:`benchmark_file`), where MXNet need not be installed.
"""
import multiprocessing
import os
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass

import numpy as np

from zoo_bench.timing import environment, machine_line, median_seconds, print_line
from zoo.schema.preprocessing import canvas_size

__all__ = ["DEPLOYED_SIDES", "FileTiming", "benchmark_file", "deployed_graphs",
           "isolated_latency", "random_batch"]

DEPLOYED_SIDES = ("onnxruntime fp32", "openvino fp32", "openvino int8")
"""The subjects' sides, as the benchmark's tables name them: runtime and precision."""



def deployed_graphs(onnx_path, calibration_batches, scratch):
    """``{side: file}`` of :data:`DEPLOYED_SIDES`, written into the folder ``scratch`` from
    the fp32 export ``onnx_path``, int8 calibrated on ``calibration_batches`` (the graph's
    inputs by name, batch by batch)."""
    from zoo.onnx.int8 import quantize_file
    from zoo.onnx.openvino_runtime import write_ir
    int8_path, _ = quantize_file(onnx_path, calibration_batches,
                                 os.path.join(scratch, "int8.onnx"))
    return {"onnxruntime fp32": onnx_path,
            "openvino fp32": write_ir(onnx_path, os.path.join(scratch, "fp32.xml"),
                                      {"dtype": "fp32"}),
            "openvino int8": write_ir(int8_path, os.path.join(scratch, "int8.xml"),
                                      {"dtype": "int8"})}


def isolated_latency(path, inputs_by_batch):
    """``latency(batch_size, runs, warmup)``: the median seconds per batch of the deployed
    file ``path`` on ``inputs_by_batch[batch_size]``, all batch sizes timed at the first call
    in one fresh process."""
    measured = {}

    def latency(batch_size, runs, warmup):
        if not measured:
            spawn = multiprocessing.get_context("spawn")
            with ProcessPoolExecutor(1, mp_context=spawn) as pool:
                measured.update(pool.submit(time_deployed, path, inputs_by_batch, runs,
                                            warmup).result())
        return measured[batch_size]
    return latency


def time_deployed(path, inputs_by_batch, runs, warmup):
    """``{batch size: median seconds}`` of the deployed file ``path`` (run in a worker)."""
    run = session(path)
    return {batch_size: median_seconds(lambda: run(inputs), runs, warmup)
            for batch_size, inputs in inputs_by_batch.items()}


def session(path):
    """``run(inputs)`` of a deployed file with the runtime's default threads: ONNX Runtime's
    CPU provider for ``.onnx``, OpenVINO's CPU plugin (fp32 where not int8) for ``.xml``."""
    if path.endswith(".onnx"):
        import onnxruntime
        runtime = onnxruntime.InferenceSession(path, providers=["CPUExecutionProvider"])
        return lambda inputs: runtime.run(None, inputs)
    from zoo.onnx.openvino_runtime import compile_config, shared_core
    request = shared_core().compile_model(path, "CPU", compile_config(None)) \
        .create_infer_request()
    return request.infer


@dataclass(frozen=True)
class FileTiming:
    """The speed of a deployed file at one batch size: the median seconds of the graph's
    pass on a random batch, and the images per second that makes."""
    batch_size: int
    latency_s: float
    images_per_s: float


def random_batch(preprocessing, batch_size, seed=0):
    """A normalised random input batch (B, 3, H, W) of the size the file's preprocessing
    makes: its ``data_shape`` (a Faster R-CNN's reference input ``data_shape x max_size``,
    on its canvas)."""
    height, width = preprocessing["data_shape"]
    if preprocessing.get("resize") == "short_side":
        height, width = canvas_size([(height, width)], preprocessing["size_divisor"])
    shape = (batch_size, 3, height, width)
    return np.random.RandomState(seed).uniform(-1, 1, shape).astype(np.float32)


def benchmark_file(options, log=print_line):
    """Time the deployed file ``options.checkpoint`` (a :class:`zoo_bench.options.
    BenchmarkOptions`) on its runtime with the runtime's default threads: the graph's pass
    on a random batch at each of ``batch_sizes``, after ``warmup`` passes, the median of
    ``runs``. Loads no MXNet. Each line goes to ``log`` as it is measured; returns the
    :class:`FileTiming` of each batch size."""
    from zoo.checkpoint import open_detector
    detector = open_detector(options.checkpoint)
    engine = detector.engine()
    runtime = "openvino" if options.checkpoint.endswith(".xml") else "onnxruntime"
    name = "%s (%s %s)" % (options.checkpoint, runtime, detector.precision["dtype"])
    log(machine_line(environment("OMP_NUM_THREADS")))
    timings = []
    for batch_size in options.batch_sizes:
        data = random_batch(detector.preprocessing, batch_size)
        latency = median_seconds(lambda: engine.fetch(engine.launch(data, None)), options.runs,
                                 options.warmup)
        timings.append(FileTiming(batch_size, latency, batch_size / latency))
        log("%s %dx%d: batch %2d %9.4f s/batch %9.2f img/s" % (
            name, data.shape[2], data.shape[3], batch_size, latency, batch_size / latency))
    return timings
