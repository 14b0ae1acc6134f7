"""Deployed graphs: MKL-DNN fusion computes what the plain graph does, fused exports load,
and int8 quantization tracks fp32 and runs on every detector."""
import json
import os
import subprocess
import sys

import mxnet as mx
import numpy as np
import pytest

import zoo
from zoo import artifact
from zoo.predictor import Predictor, fuse
from zoo.inference.quantization import (InputBatches, calibration_iter, calibration_thresholds,
                                        int8_layers, quantize)

from conftest import END_TO_END_MODELS, graph_runs

from factories import ROOT
SMALL_RCNN = dict(data_shape=160, max_size=192, rpn_pre_nms_top_n_test=200,
                  rpn_post_nms_top_n_test=8, roi_size=[8, 8])
SMALL_SSD_SHAPES = {"ssd_resnet50": 300, "ssd_resnet101": 300, "ssd_inceptionv3": 300,
                    "ssd_mobilenetv2": 192, "ssd_mobilenetv2_stride8": 192,
                    # GluonCV's anchors are written out for its one input size
                    "ssd_resnet50_v1_gluoncv_voc": 512, "ssd_resnet50_v1_gluoncv_coco": 512,
                    "ssd_mobilenet1.0_gluoncv_voc": 512, "ssd_mobilenet1.0_gluoncv_coco": 512,
                    "ssd_mobilenet0.25_gluoncv_voc": 300, "ssd_mobilenet0.25_gluoncv_coco": 300,
                    "ssd_mobilenetv2_stride8_gluoncv": 192}


def small_model(name):
    overrides = dict(SMALL_RCNN) if name.startswith("faster_rcnn") else {
        "data_shape": SMALL_SSD_SHAPES[name]}
    return zoo.get_model(name, num_classes=3, **overrides)


def images(model, batch_size, seed):
    shape = model.input_shapes(batch_size)["data"]
    return np.random.RandomState(seed).uniform(-2, 2, shape).astype(np.float32)


def ssd_heads(model):
    """The SSD graph up to its class and box predictions (before NMS, so outputs compare
    element by element)."""
    internals = model.symbol().get_internals()
    return mx.sym.Group([internals["cls_concat_output"], internals["loc_concat_output"]])


def run(symbol, model, arg_params, aux_params, data):
    return [o.asnumpy() for o in Predictor(symbol, arg_params, aux_params)(
        **model.input_arrays(data))]


@pytest.fixture(scope="module")
def stride8():
    model = small_model("ssd_mobilenetv2_stride8")
    arg_params, aux_params = model.init_params(seed=0)
    return model, arg_params, aux_params


def test_fused_graph_computes_what_the_plain_graph_does(stride8, monkeypatch):
    model, arg_params, aux_params = stride8
    heads = ssd_heads(model)
    fused = fuse(heads)
    assert "_sg_mkldnn_conv" in fused.tojson() and "_sg_mkldnn_conv" not in heads.tojson()
    data = images(model, 2, seed=1)
    # Without this the executor would fuse the plain graph itself at bind time.
    monkeypatch.setenv("MXNET_SUBGRAPH_BACKEND", "NONE")
    plain = run(heads, model, arg_params, aux_params, data)
    monkeypatch.delenv("MXNET_SUBGRAPH_BACKEND")
    for want, got in zip(plain, run(fused, model, arg_params, aux_params, data)):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * np.abs(want).max())


def test_fused_export_loads_and_detects_the_same(stride8, tmp_path):
    model, arg_params, aux_params = stride8
    model.arg_params, model.aux_params = arg_params, aux_params
    artifact.export(model, str(tmp_path / "fused"))
    artifact.export(model, str(tmp_path / "plain"), fused=False)
    data = images(model, 1, seed=2)
    loaded = {kind: mx.model.load_checkpoint(str(tmp_path / kind), 0)
              for kind in ("fused", "plain")}
    assert loaded["plain"][0].tojson() == model.symbol().tojson()
    assert "_sg_mkldnn_conv" in loaded["fused"][0].tojson()
    fused, plain = (run(*loaded[kind][:1], model, *loaded[kind][1:], data)[0][0]
                    for kind in ("fused", "plain"))
    kept = plain[:, 0] >= 0
    assert kept.any()
    np.testing.assert_allclose(fused[kept], plain[kept], atol=1e-4)


def relative_error(got, want):
    """Root-mean-square error relative to the reference's root mean square."""
    return np.sqrt(np.mean((got - want) ** 2) / np.mean(want ** 2))


def test_int8_heads_track_fp32_and_calibration_matters(stride8):
    """Calibrated on some images, the int8 graph's predictions on others stay within a few
    percent of fp32's; a calibration far off the data's range does much worse."""
    model, arg_params, aux_params = stride8
    heads = ssd_heads(model)

    def calibrated_on(data):
        calib = mx.io.NDArrayIter({"data": mx.nd.array(data)}, batch_size=2)
        symbol, q_args, q_aux = quantize(heads, arg_params, aux_params, calib, "naive")
        return symbol, q_args, q_aux

    symbol, q_args, q_aux = calibrated_on(images(model, 4, seed=3))
    assert len(int8_layers(symbol)) == len([n for n in heads.list_arguments()
                                            if n.endswith("_weight")])
    test = images(model, 2, seed=4)
    fp32 = run(heads, model, arg_params, aux_params, test)
    int8 = run(symbol, model, q_args, q_aux, test)
    errors = [relative_error(got, want) for got, want in zip(int8, fp32)]
    assert max(errors) < 0.1, errors
    tiny = calibrated_on(images(model, 4, seed=3) * 1e-3)
    worse = [relative_error(got, want) for got, want in zip(run(tiny[0], model, *tiny[1:], test),
                                                             fp32)]
    assert min(worse) > 3 * max(errors), (worse, errors)


@pytest.mark.parametrize("name", graph_runs(END_TO_END_MODELS))
def test_every_detector_quantizes_and_runs_in_int8(name, tmp_path):
    model = small_model(name)
    arg_params, aux_params = model.init_params(seed=0)
    data = images(model, 1, seed=5)
    calib = mx.io.NDArrayIter({k: mx.nd.array(v) for k, v in model.input_arrays(data).items()},
                              batch_size=1)
    symbol, q_args, q_aux = quantize(model.symbol(), arg_params, aux_params, calib, "naive")
    layers = int8_layers(symbol)
    assert len(layers) >= 20, layers
    fp32 = run(model.symbol(), model, arg_params, aux_params, data)[0]
    int8 = run(symbol, model, q_args, q_aux, data)[0]
    assert int8.shape == fp32.shape and np.isfinite(int8).all()
    found = int8[0][int8[0][:, 0] >= 0]
    assert np.all((found[:, 4:6] >= found[:, 2:4]))
    if clips_boxes(model.config):
        assert np.all((found[:, 2:] >= 0) & (found[:, 2:] <= 1))
    assert set(found[:, 0].astype(int)) <= set(range(model.config["num_classes"]))


def clips_boxes(config):
    """Whether the model's detections are clipped to the image (GluonCV's are not)."""
    return config.get("clip_detections", True) and config.get("post_processing") != "per_class"


def both_collectors(symbol, arg_params, aux_params, calib_data, calib_mode, **options):
    """Thresholds of ``symbol`` quantized with each collector, after checking that they are
    the same numbers (a zero's sign aside)."""
    graphs = {}
    for collector in ("monitor", "outputs"):
        calib_data.reset()
        graphs[collector] = quantize(symbol, arg_params, aux_params, calib_data, calib_mode,
                                     collector=collector, **options)[0]
    thresholds = {c: calibration_thresholds(g) for c, g in graphs.items()}
    assert thresholds["outputs"] == thresholds["monitor"]
    return thresholds["outputs"]


def test_fast_naive_calibration_matches_mxnet_collector_on_faster_rcnn():
    """The zoo's collector (min/max computed in the graph) stores the thresholds MXNet's
    per-operator callback finds, and stops after the batch reaching ``num_examples``."""
    model = small_model("faster_rcnn_mobilenetv2")
    arg_params, aux_params = model.init_params(seed=0)
    inputs = model.input_arrays(images(model, 6, seed=6))
    calib = mx.io.NDArrayIter({k: mx.nd.array(v) for k, v in inputs.items()}, batch_size=2)
    two_batches = both_collectors(model.symbol(), arg_params, aux_params, calib, "naive",
                                  num_examples=3)
    assert len(two_batches) >= 20
    assert len({low for low, _ in two_batches.values()}) > 1
    calib.reset()
    every_batch = quantize(model.symbol(), arg_params, aux_params, calib, "naive")[0]
    assert calibration_thresholds(every_batch) != two_batches


def test_faster_rcnn_calibrates_on_canvases_of_different_shapes(tmp_path):
    """Batches of short-side images padded onto canvases keep their own shapes and
    im_info, and both collectors take every one: calibrating on two such batches gives
    each layer the widest range of calibrating on each alone."""
    from zoo.data import VOCDataset, embedded

    model = small_model("faster_rcnn_mobilenetv2")
    arg_params, aux_params = model.init_params(seed=0)
    root = embedded.generate(str(tmp_path / "shapes"), seed=2, num_train=4, num_val=1,
                             image_size=96)
    voc = VOCDataset(root, "train")
    dataset = [(image[:, :width], label) for (image, label), width
               in zip((voc[i] for i in range(4)), (96, 96, 48, 48))]
    calib = calibration_iter(model, dataset, batch_size=2, num_batches=2, num_workers=1)
    batches = [batch.data for batch in calib]
    assert batches[0][0].shape[3] > batches[1][0].shape[3]
    # Both images of a batch have one size, which fills the canvas.
    assert [b[1].asnumpy()[0, 1] for b in batches] == [b[0].shape[3] for b in batches]

    def thresholds(batches):
        calibrated = quantize(model.symbol(), arg_params, aux_params,
                              InputBatches(batches, 2), "naive")[0]
        return calibration_thresholds(calibrated)

    first, second = thresholds(calib.batches[:1]), thresholds(calib.batches[1:])
    both = both_collectors(model.symbol(), arg_params, aux_params, calib, "naive")
    assert first != second
    assert both == {layer: (min(first[layer][0], second[layer][0]),
                            max(first[layer][1], second[layer][1])) for layer in both}


def residual_net():
    """Conv + batch norm + ReLU and a residual sum fused into a convolution (which writes
    in place into its summand): the kinds of layer MKL-DNN calibrates, small enough for
    entropy calibration."""
    data = mx.sym.var("data")
    first = mx.sym.Activation(mx.sym.BatchNorm(mx.sym.Convolution(
        data, num_filter=8, kernel=(3, 3), pad=(1, 1), name="conv0"), fix_gamma=False,
        name="bn0"), act_type="relu", name="relu0")
    second = mx.sym.Convolution(first, num_filter=8, kernel=(3, 3), pad=(1, 1), name="conv1")
    return mx.sym.Activation(first + second, act_type="relu", name="relu1")


def random_params(symbol, data_shape, seed):
    rng = np.random.RandomState(seed)
    arg_shapes, _, aux_shapes = symbol.infer_shape(data=data_shape)
    arg_params = {name: mx.nd.array(rng.normal(0, 0.3, shape))
                  for name, shape in zip(symbol.list_arguments(), arg_shapes) if name != "data"}
    aux_params = {name: mx.nd.array(rng.uniform(0.5, 1.5, shape))
                  for name, shape in zip(symbol.list_auxiliary_states(), aux_shapes)}
    return arg_params, aux_params


@pytest.mark.slow  # 10-30 s: in `make test-slow`, to keep `make test` within its 12 minutes
def test_fast_entropy_calibration_matches_mxnet_collector():
    """Histograms gathered from the graph's outputs give MXNet's KL thresholds, including
    when a later batch widens a layer's range (the second batch is scaled up)."""
    symbol = residual_net()
    arg_params, aux_params = random_params(symbol, (2, 3, 16, 16), seed=7)
    data = np.random.RandomState(8).normal(0, 1, (4, 3, 16, 16)).astype(np.float32)
    data[2:] *= 3
    calib = mx.io.NDArrayIter({"data": mx.nd.array(data)}, batch_size=2)
    thresholds = both_collectors(symbol, arg_params, aux_params, calib, "entropy")
    assert len(thresholds) >= 3


def test_calibration_batches_come_from_the_dataset_in_order(stride8, tmp_path):
    from zoo.data import VOCDataset, embedded
    from zoo.data import inference_transform

    model = stride8[0]
    root = embedded.generate(str(tmp_path / "shapes"), seed=1, num_train=6, num_val=1,
                             image_size=96)
    dataset = VOCDataset(root, "train")
    calib = calibration_iter(model, dataset, batch_size=2, num_batches=2, num_workers=1)
    batches = [batch.data[0].asnumpy() for batch in calib]
    assert len(batches) == 2 and batches[0].shape == (2, 3, 192, 192)
    image, label = dataset[2]
    transform = inference_transform(model.preprocessing())
    np.testing.assert_allclose(batches[1][0], transform(image, label)[0], atol=1e-5)
    with pytest.raises(ValueError, match="at least one batch"):
        calibration_iter(model, dataset, batch_size=8)


def test_unknown_calibration_mode_or_collector_is_refused(stride8):
    model, arg_params, aux_params = stride8
    calib = mx.io.NDArrayIter({"data": mx.nd.array(images(model, 1, 0))}, batch_size=1)
    with pytest.raises(ValueError, match="naive, entropy"):
        quantize(model.symbol(), arg_params, aux_params, calib, "minmax")
    with pytest.raises(ValueError, match="outputs, monitor"):
        quantize(model.symbol(), arg_params, aux_params, calib, collector="callback")


def tool(name, *flags):
    """Run ``tools/<name>.py`` with ``flags``; returns its stdout (it must succeed)."""
    result = subprocess.run([sys.executable, os.path.join(ROOT, "tools", name + ".py")]
                            + [str(f) for f in flags], capture_output=True, text=True,
                            env=dict(os.environ, PYTHONPATH=ROOT))
    assert result.returncode == 0, result.stderr[-2000:]
    return result.stdout


@pytest.mark.slow  # 10-30 s: in `make test-slow`, to keep `make test` within its 12 minutes
def test_quantize_tool_writes_a_checkpoint_that_eval_demo_and_benchmark_take(tmp_path):
    from zoo import artifact
    from zoo.data import embedded

    root = embedded.generate(str(tmp_path / "shapes"), seed=1, num_train=8, num_val=4,
                             image_size=192)
    data = ["--dataset", "voc", "--data-root", root]
    tool("train", "--network", "ssd_mobilenetv2_stride8", *data, "--data-shape", 192,
         "--batch-size", 4, "--epochs", 1, "--no-progress", "--val-split", "",
         "--output-dir", tmp_path / "train")
    fp32 = str(tmp_path / "train" / "ssd_mobilenetv2_stride8")
    out = tool("quantize", "--checkpoint", fp32, *data, "--calib-batches", 2,
               "--batch-size", 2, "--calib-mode", "naive")
    int8 = fp32 + "-int8"
    assert "artifact written to %s" % int8 in out
    quantized = artifact.load(int8)
    assert artifact.load_optimizer_state(int8, quantized.epoch) is None
    calibration = quantized.precision["calibration"]
    assert quantized.is_int8 and calibration["images"] == 4
    assert calibration["int8_layers"] == len(int8_layers(quantized.symbol))
    scores = {}
    for prefix in (fp32, int8):
        out = tool("eval", "--checkpoint", prefix, *data, "--split", "val", "--no-progress",
                   "--output", prefix + ".json")
        assert ("int8 (naive calibration)" in out) == (prefix == int8)
        with open(prefix + ".json") as stream:
            scores[prefix] = json.load(stream)["voc"]["voc07"]["mAP"]
    assert all(0 <= s <= 1 for s in scores.values())
    image = os.path.join(root, "JPEGImages", sorted(os.listdir(os.path.join(
        root, "JPEGImages")))[0])
    assert "drawn to" in tool("demo", "--checkpoint", int8, "--image", image,
                              "--output", tmp_path / "int8.png")
    assert os.path.getsize(tmp_path / "int8.png") > 0
    lines = tool("benchmark", "--checkpoint", int8, "--runs", 1, "--warmup", 0).splitlines()
    assert lines[1].split()[:6] == ["ours", "int8:", "ssd_mobilenetv2_stride8-int8-0001",
                                    "192x192", "batch", "1"]
    again = subprocess.run([sys.executable, os.path.join(ROOT, "tools", "quantize.py"),
                            "--checkpoint", int8] + data, capture_output=True, text=True,
                           env=dict(os.environ, PYTHONPATH=ROOT))
    assert again.returncode == 1 and ("%s-0001 is an int8 artifact, which runs on MXNet's "
                                      "MKL-DNN only: quantize the fp32 artifact it was made "
                                      "from (%s-0001)" % (int8, fp32)) in again.stderr


def test_calibration_benchmark_times_both_collectors_and_compares_thresholds():
    from zoo_bench.calibration import (CalibrationBenchmarkOptions,
                                                benchmark_calibration)

    lines = []
    seconds = benchmark_calibration(CalibrationBenchmarkOptions(
        network="ssd_mobilenetv2", data_shape=192, images=2), log=lines.append)
    assert set(seconds) == {"fp32 inference", "outputs", "monitor"}
    assert lines[0].startswith("ssd_mobilenetv2 192x192, 2 random images in batches of 1")
    assert lines[-1].endswith("thresholds identical"), lines
    with pytest.raises(ValueError, match="multiple of the batch size"):
        CalibrationBenchmarkOptions(images=3, batch_size=2)
