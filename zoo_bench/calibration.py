"""Seconds per image of int8 calibration, MXNet's collector beside the zoo's.

Both quantize the same network (random weights) on the same random images in one process:
``monitor`` is MXNet's collector (a Python callback on every operator's inputs and outputs),
``outputs`` the zoo's (one executor whose outputs are the calibrated layers); see
:data:`zoo.choices.COLLECTORS`. Each time covers the whole of :func:`quantize` (graph
passes, statistics, thresholds, weight quantization), and the report says whether the two
int8 graphs got the same thresholds. An fp32 forward of the same graph comes first: it
creates MKL-DNN's kernels, which whichever collector ran first would otherwise pay for
alone, and its second run is the inference time to compare with.
"""
import os

import mxnet as mx
import numpy as np

from zoo.predictor import Predictor
from zoo.inference.quantization import MKLDNN_QUANTIZE, calibration_thresholds, quantize
from zoo.model import get_model
from zoo_bench.options import CalibrationBenchmarkOptions  # its options, defined without MXNet
from zoo_bench.timing import Stopwatch, print_line, seconds

__all__ = ["CalibrationBenchmarkOptions", "benchmark_calibration"]


def random_calibration_data(model, images, batch_size, seed=0):
    """``images`` uniform-noise inputs of ``model`` (already normalised) as a DataIter."""
    shape = (images,) + tuple(model.input_shapes(1)["data"][1:])
    data = np.random.RandomState(seed).uniform(-2, 2, shape).astype(np.float32)
    return mx.io.NDArrayIter({name: mx.nd.array(array)
                              for name, array in model.input_arrays(data).items()},
                             batch_size=batch_size)


def inference_seconds(model, arg_params, aux_params, calib_data):
    """Seconds of an fp32 forward of the graph calibration runs (fused for quantization) on
    the first batch, after an untimed one."""
    predictor = Predictor(model.symbol().get_backend_symbol(MKLDNN_QUANTIZE), arg_params,
                          aux_params)
    inputs = {desc.name: array for desc, array in zip(calib_data.provide_data,
                                                       next(iter(calib_data)).data)}
    mx.nd.waitall()
    def run():
        for output in predictor(**inputs):
            output.wait_to_read()
    run()
    return seconds(run)


def benchmark_calibration(options, log=print_line):
    """Quantize with each collector; report lines go to ``log``. Returns
    ``{collector or "fp32 inference": seconds}``."""
    model = get_model(options.network, **options.overrides)
    arg_params, aux_params = model.init_params(seed=0)
    calib_data = random_calibration_data(model, options.images, options.batch_size)
    height, width = model.input_shapes(1)["data"][2:]
    log("%s %dx%d, %d random images in batches of %d, %s calibration, random weights, "
        "OMP_NUM_THREADS=%s" % (options.network, height, width, options.images,
                                options.batch_size, options.calib_mode,
                                os.environ.get("OMP_NUM_THREADS")))
    seconds = {"fp32 inference": inference_seconds(model, arg_params, aux_params, calib_data)}
    log("fp32 inference %6.2f s/image (no calibration)"
        % (seconds["fp32 inference"] / options.batch_size))
    thresholds = {}
    for collector in options.collectors:
        seconds[collector], thresholds[collector] = timed_calibration(
            model, arg_params, aux_params, calib_data, options.calib_mode, collector)
        log("%-8s %8.1f s  %7.2f s/image  %d calibrated layers" % (
            collector, seconds[collector], seconds[collector] / options.images,
            len(thresholds[collector])))
    for line in comparison_lines(seconds, thresholds):
        log(line)
    return seconds


def timed_calibration(model, arg_params, aux_params, calib_data, calib_mode, collector):
    """``(seconds, thresholds)`` of quantizing ``model`` on all of ``calib_data``."""
    calib_data.reset()
    watch = Stopwatch()
    symbol = quantize(model.symbol(), arg_params, aux_params, calib_data, calib_mode,
                      collector=collector)[0]
    return watch(), calibration_thresholds(symbol)


def comparison_lines(seconds, thresholds):
    """``monitor / outputs`` time ratio and whether their thresholds are the same."""
    if not {"monitor", "outputs"} <= set(seconds):
        return []
    same = thresholds["monitor"] == thresholds["outputs"]
    return ["monitor / outputs: %.1fx the time; thresholds %s" % (
        seconds["monitor"] / seconds["outputs"], "identical" if same else "DIFFER")]
