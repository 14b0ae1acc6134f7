"""Training in bfloat16 (``zoo train --dtype bf16``, zoo.engine.precision): every architecture
learns as in fp32, the checkpoint is an ordinary fp32 artifact that detects, resuming and
fine-tuning work, and a CPU without bf16 units is refused in one line (a mocked one)."""
import csv
import json
import os

import cv2
import mxnet as mx
import numpy as np
import pytest

import zoo
from zoo import artifact
from zoo.cli import main
from zoo.data import DetectionLoader, ValTransform
from zoo.data.voc import annotation_xml
from zoo.engine import precision
from zoo.engine.trainer import OptimizerOptions, Trainer, TrainerOptions
from zoo.errors import OptionsError
from zoo.predictor import Predictor, fuse

from test_trainer import TINY, InMemoryDataset

NO_BF16 = precision.bf16_unavailable()
needs_bf16 = pytest.mark.skipif(NO_BF16 is not None, reason="no native bf16: %s" % NO_BF16)

RCNN = dict(data_shape=64, max_size=64, num_classes=2, class_names=["square", "bar"],
            rpn_batch_size=32, rcnn_batch_rois=16, rpn_pre_nms_top_n_train=200,
            rpn_post_nms_top_n_train=50)
"""A Faster R-CNN small enough for a few steps a test."""
ARCHITECTURES = {
    # architecture: (model, overrides, steps, lr, the losses compared, their largest ratio
    # last / first step in fp32 on this batch, with margin). An FPN's box-head
    # classification saturates at this size (its loss jumps between a few values), so its
    # RPN's is compared.
    "ssd": ("ssd_mobilenetv2_stride8", TINY, 6, 0.00125, ("cls_loss", "box_loss"), 0.5),
    "c4": ("faster_rcnn_mobilenetv2", RCNN, 3, 0.005, ("rpn_cls_loss", "rcnn_cls_loss"), 0.75),
    "fpn": ("faster_rcnn_fpn_mobilenetv2", RCNN, 3, 0.0025, ("rpn_cls_loss",), 0.75),
}
AS_IN_FP32 = 0.1
"""Largest relative gap between the bf16 and the fp32 loss at any step."""


def losses_on_a_fixed_batch(name, overrides, steps, lr, dtype):
    """Per-step rows of ``steps`` updates on one batch of two images, from seed 0."""
    model = zoo.get_model(name, **overrides)
    data = DetectionLoader(InMemoryDataset(2), 2, ValTransform(overrides["data_shape"]),
                           shuffle=False, num_workers=1, max_objects=1)
    trainer = Trainer(model, data, TrainerOptions(epochs=steps, batch_size=2, dtype=dtype),
                      OptimizerOptions(lr=lr))
    return trainer.fit()


@needs_bf16
@pytest.mark.parametrize("architecture", sorted(ARCHITECTURES))
def test_each_architecture_learns_in_bf16_as_in_fp32(architecture):
    name, overrides, steps, lr, compared, fall = ARCHITECTURES[architecture]
    runs = {dtype: [sum(row[loss] for loss in compared)
                    for row in losses_on_a_fixed_batch(name, overrides, steps, lr, dtype)]
            for dtype in ("fp32", "bf16")}
    fp32, bf16 = runs["fp32"], runs["bf16"]
    assert fp32[-1] < fall * fp32[0], runs  # the case itself learns
    assert bf16[-1] < fall * bf16[0], runs
    gaps = [abs(b - f) / f for b, f in zip(bf16, fp32)]
    # bf16 rounding shows (the runs are not identical) but stays small
    assert 0 < max(gaps) < AS_IN_FP32, runs


def test_bf16_graph_keeps_fp32_parameters_and_converts_the_backbone():
    model = zoo.get_model("ssd_mobilenetv2_stride8", **TINY)
    symbol, shapes = model.train_symbol(), model.train_input_shapes(2, 1)
    converted = precision.bf16_training_symbol(symbol, shapes)
    assert converted.list_arguments() == symbol.list_arguments()
    assert converted.list_auxiliary_states() == symbol.list_auxiliary_states()
    assert converted.list_outputs() == symbol.list_outputs()
    arg_types, out_types, aux_types = converted.infer_type(
        **dict.fromkeys(shapes, np.float32))
    assert set(arg_types) == set(out_types) == set(aux_types) == {np.float32}
    layers = precision.bf16_layers(converted, shapes)
    nodes = json.loads(symbol.tojson())["nodes"]
    convolutions = [n["name"] for n in nodes if n["op"] == "Convolution"]
    # all but the 3-channel stem and layers of 24 channels or heads of 9 * 4 anchors...
    assert "conv1" not in layers and "block2_expand" in layers
    assert sum(name in layers for name in convolutions) > 0.7 * len(convolutions)
    # ... anchors, targets and losses stay fp32
    assert not any(n["name"] in layers for n in nodes if n["op"].startswith(
        ("_contrib_MultiBox", "SoftmaxOutput", "smooth_l1", "MakeLoss")))


def write_voc(root, sizes, split_names):
    """A VOC folder of JPEG images of odd ``sizes``, a bright box on each, classes of our own."""
    classes = ("kettle", "lamp")
    for folder in ("JPEGImages", "Annotations", os.path.join("ImageSets", "Main")):
        os.makedirs(os.path.join(root, folder), exist_ok=True)
    rng = np.random.RandomState(7)
    ids = []
    for index, (height, width) in enumerate(sizes):
        image = rng.randint(0, 50, (height, width, 3)).astype(np.uint8)
        box = (width // 5 + index, height // 4, width // 2 + 2 * index, 3 * height // 4)
        image[box[1]:box[3], box[0]:box[2]] = (230, 60 + 150 * (index % 2), 90)
        image_id = "pic%d" % index
        cv2.imwrite(os.path.join(root, "JPEGImages", image_id + ".jpg"), image)
        with open(os.path.join(root, "Annotations", image_id + ".xml"), "w") as stream:
            stream.write(annotation_xml(image_id + ".jpg", width, height,
                                        [(classes[index % 2], box, False)]))
        ids.append(image_id)
    with open(os.path.join(root, "classes.txt"), "w") as stream:
        stream.write("\n".join(classes) + "\n")
    for split, chosen in split_names.items():
        with open(os.path.join(root, "ImageSets", "Main", split + ".txt"), "w") as stream:
            stream.write("\n".join(ids[i] for i in chosen) + "\n")
    return root


@pytest.fixture(scope="module")
def voc(tmp_path_factory):
    return write_voc(str(tmp_path_factory.mktemp("voc")),
                     [(101, 133), (97, 120), (140, 99), (111, 111), (90, 150), (123, 87)],
                     {"train": range(4), "val": range(4, 6)})


def train_argv(voc, output, *extra):
    return ["train", "--network", "ssd_mobilenetv2_stride8", "--dataset", "voc",
            "--data-root", voc, "--data-shape", "128", "--batch-size", "2",
            "--max-expand", "1", "--no-crop", "--no-progress", "--data-threads", "1",
            "--output-dir", str(output), *extra]


@needs_bf16
def test_a_bf16_run_resumes_fine_tunes_and_its_artifact_detects(voc, tmp_path, caplog):
    caplog.set_level("INFO")
    first = tmp_path / "first"
    assert main(train_argv(voc, first, "--epochs", "1", "--dtype", "auto")) == 0
    header = next(r.getMessage() for r in caplog.records
                  if r.getMessage().startswith("training "))
    assert ", bf16 (auto: this CPU has %s), output" % " and ".join(
        precision.bf16_instruction_sets()) in header
    # resumed in bf16 from its own checkpoint (optimizer state included)
    assert main(train_argv(voc, first, "--epochs", "2", "--dtype", "bf16",
                           "--resume", "auto")) == 0
    assert "resumed from %s at epoch 1" % (first / "ssd_mobilenetv2_stride8") in caplog.text
    prefix = str(first / "ssd_mobilenetv2_stride8")
    saved = artifact.load(prefix, 2)
    assert saved.meta["training"]["trainer"]["dtype"] == "bf16"
    assert saved.meta["precision"]["dtype"] == "fp32"
    arrays = list(saved.arg_params.values()) + list(saved.aux_params.values())
    assert {np.dtype(array.dtype) for array in arrays} == {np.dtype(np.float32)}
    # every other command takes it as it is: the detector, and a fine-tuning run in bf16
    image = os.path.join(voc, "JPEGImages", "pic5.jpg")
    found = zoo.load_detector(prefix, 2)(image)
    assert found.boxes.dtype == np.float32 and len(found.boxes) == len(found.scores)
    assert main(train_argv(voc, tmp_path / "tuned", "--epochs", "1", "--dtype", "bf16",
                           "--init-from", prefix, "--val-split", "")) == 0
    assert artifact.latest_epoch(str(tmp_path / "tuned" / "ssd_mobilenetv2_stride8")) == 1


@needs_bf16
def test_the_batchnorm_check_scores_a_bf16_run(voc, tmp_path, monkeypatch):
    """Its moments are taken in fp32 from the bfloat16 layers' inputs (NumPy has no bfloat16
    arithmetic: a bf16 run used to stop at its first check), and read as the fp32 twin's."""
    from zoo.engine.health import batchnorm
    monkeypatch.setattr(batchnorm, "MIN_STEPS", 1)
    factors = {}
    for dtype in ("fp32", "bf16"):
        assert main(train_argv(voc, tmp_path / dtype, "--epochs", "2", "--dtype", dtype)) == 0
        prefix = str(tmp_path / dtype / "ssd_mobilenetv2_stride8")
        with open(batchnorm.batchnorm_path(prefix), newline="") as stream:
            factors[dtype] = {row["layer"]: float(row["factor"])
                              for row in csv.DictReader(stream) if row["epoch"] == "2"}
    # The same layers, as far off as in the fp32 twin (after 2 short epochs from the
    # initialiser, the depthwise layers' statistics are still 20-200x off in both).
    assert set(factors["bf16"]) == set(factors["fp32"]) and factors["bf16"]
    for layer, factor in factors["bf16"].items():
        assert 0.5 < factor / factors["fp32"][layer] < 2, layer


@needs_bf16
def test_bf16_with_memory_saving_trains_as_bf16_alone():
    model = zoo.get_model("ssd_mobilenetv2_stride8", **TINY)
    rows = {}
    for saving in (False, True):
        data = DetectionLoader(InMemoryDataset(2), 2, ValTransform(TINY["data_shape"]),
                               shuffle=False, num_workers=1, max_objects=1)
        trainer = Trainer(model, data, TrainerOptions(epochs=2, batch_size=2, dtype="bf16",
                                                      memory_saving=saving),
                          OptimizerOptions(lr=0.005))
        rows[saving] = trainer.fit()
        nodes = json.loads(trainer.module.symbol.tojson(remove_amp_cast=False))["nodes"]
        assert any(node["op"] == "amp_cast" for node in nodes)
    for plain, saving in zip(rows[False], rows[True]):
        for loss in model.loss_names:
            assert saving[loss] == pytest.approx(plain[loss], rel=1e-5)


def test_bf16_is_refused_in_one_line_on_a_cpu_without_it(voc, tmp_path, monkeypatch,
                                                         capsys, caplog):
    monkeypatch.setattr(zoo.predictor, "cpu_flags", lambda: frozenset({"fpu", "avx512f", "avx2"}))
    assert main(train_argv(voc, tmp_path / "bf16", "--dtype", "bf16")) == 1
    assert capsys.readouterr().err == (
        "zoo train: error: --dtype bf16: this CPU has neither avx512_bf16 nor amx_bf16 among "
        "its /proc/cpuinfo flags: bfloat16 would be emulated, slower than fp32; use --dtype "
        "fp32 (or auto, which picks fp32 here)\n")
    assert not (tmp_path / "bf16").exists()
    with pytest.raises(OptionsError, match="--dtype bf16: this CPU has neither"):
        TrainerOptions(epochs=1, batch_size=2, dtype="bf16")
    # auto trains in fp32 there, and says why
    caplog.set_level("INFO")
    assert main(train_argv(voc, tmp_path / "auto", "--dtype", "auto", "--epochs", "1",
                           "--val-split", "")) == 0
    assert ", fp32 (auto: this CPU has neither avx512_bf16 nor amx_bf16 among its " \
        "/proc/cpuinfo flags: bfloat16 would be emulated, slower than fp32), output" in caplog.text
    saved = artifact.load(str(tmp_path / "auto" / "ssd_mobilenetv2_stride8"), 1)
    assert saved.meta["training"]["trainer"]["dtype"] == "fp32"
    # the benchmarks refuse it the same way, before any timing
    capsys.readouterr()
    for command in (["benchmark", "--network", "ssd_mobilenetv2_stride8"],
                    ["benchmark-train", "--network", "ssd_resnet50_v1_gluoncv_voc"]):
        assert main(command + ["--dtypes", "fp32,bf16"]) == 1
        assert capsys.readouterr().err == (
            "zoo %s: error: --dtypes bf16: this CPU has neither avx512_bf16 nor amx_bf16 "
            "among its /proc/cpuinfo flags: bfloat16 would be emulated, slower than fp32; use "
            "--dtypes fp32 (or auto, which picks fp32 here)\n" % command[0])


def test_bf16_on_a_gpu_is_refused():
    with pytest.raises(OptionsError, match="--dtype bf16: bfloat16 runs on "
                       "the CPU's oneDNN kernels, not on gpu0"):
        precision.check_dtype("bf16", "gpu0")
    assert precision.resolve_dtype("auto", "gpu0")[0] == "fp32"


def test_cpu_flags_are_read_from_cpuinfo(tmp_path):
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text("processor\t: 0\nflags\t\t: fpu avx512f avx512_bf16\n\nprocessor\t: 1\n")
    assert zoo.predictor.cpu_flags(str(cpuinfo)) == {"fpu", "avx512f", "avx512_bf16"}
    assert zoo.predictor.cpu_flags(str(tmp_path / "missing")) == frozenset()


@needs_bf16
def test_bf16_inference_graph_detects_as_fp32_in_either_order():
    """``zoo benchmark --dtypes bf16``'s graphs: both orders of conversion and fusion give
    fused bfloat16 convolutions with bfloat16 weights, and the detections of fp32."""
    from factories import unit_variance_params
    model = zoo.get_model("ssd_mobilenetv2_stride8", **TINY)
    arg_params, aux_params = unit_variance_params(model, 0, class_scale=8.0,
                                                  damp_residuals=False)
    shapes = model.input_shapes(1)
    inputs = model.input_arrays(np.random.RandomState(0).uniform(-1, 1, shapes["data"])
                                .astype(np.float32))
    fp32 = fuse(model.symbol())
    expected = Predictor(fp32, arg_params, aux_params)(**inputs)[0].asnumpy()[0]
    fused = sum(node["op"] == "_sg_mkldnn_conv" for node in json.loads(fp32.tojson())["nodes"])
    for fuse_first in (False, True):
        symbol, args, aux = precision.bf16_inference_graph(model.symbol(), arg_params,
                                                           aux_params, shapes, fuse_first)
        nodes = json.loads(symbol.tojson(remove_amp_cast=False))["nodes"]
        assert sum(node["op"] == "_sg_mkldnn_conv" for node in nodes) == fused
        assert args["block2_expand_weight"].dtype != np.float32  # stored in bfloat16
        assert arg_params["block2_expand_weight"].dtype == np.float32  # given ones kept
        found = Predictor(symbol, args, aux)(**inputs)[0].asnumpy()[0]
        top = [np.sort(rows[rows[:, 0] >= 0, 1])[::-1][:10] for rows in (expected, found)]
        assert np.abs(top[0] - top[1]).max() < 0.02


@needs_bf16
@pytest.mark.slow
def test_two_dist_sync_workers_train_in_bf16_and_end_identical(shapes, tmp_path):
    """The graph changes, not the kvstore: fp32 gradients are summed and every worker
    applies the same update to its fp32 weights."""
    from test_launcher import (NETWORK, assert_same_params, dumped_params, launch_training,
                               saved_params, train_flags)
    output = tmp_path / "dist"
    done = launch_training(train_flags(shapes, output, 2) + ["--dtype", "bf16"])
    assert ", 2 epochs, bf16, output" in done.stdout + done.stderr
    workers = [dumped_params(output / ("final-rank%d.params" % rank)) for rank in (0, 1)]
    assert_same_params(workers[0], workers[1])
    assert_same_params(workers[0], saved_params(str(output / NETWORK), 2))


@needs_bf16
def test_a_layer_and_a_pooling_of_one_fp32_tensor_concatenate():
    """The shape of a C4 Inception head (every registered model converts and trains a step
    in bf16; this one failed MXNet 1.9's AMP): bfloat16 convolutions and a max-pooling of
    the fp32 ROI features, concatenated."""
    data, rois = mx.sym.var("data"), mx.sym.var("rois")
    features = mx.sym.Convolution(data, num_filter=32, kernel=(3, 3), pad=(1, 1), name="c0")
    pooled = mx.sym.contrib.ROIAlign(features, rois, pooled_size=(7, 7), spatial_scale=1.0,
                                     name="roi_align")
    branches = [mx.sym.Convolution(pooled, num_filter=32, kernel=(1, 1), name="c1"),
                mx.sym.Pooling(pooled, kernel=(3, 3), pad=(1, 1), pool_type="max", name="p")]
    loss = mx.sym.MakeLoss(mx.sym.sum(mx.sym.Concat(*branches, name="concat")))
    shapes = {"data": (1, 16, 16, 16), "rois": (2, 5)}
    converted = precision.bf16_training_symbol(loss, shapes)
    assert {"c0", "c1", "p"} <= set(precision.bf16_layers(converted, shapes))
    executor = converted.simple_bind(mx.cpu(), grad_req="write", **shapes)
    executor.arg_dict["rois"][:] = mx.nd.array([[0, 1, 1, 9, 9], [0, 2, 3, 14, 12]])
    executor.forward(is_train=True)
    executor.backward()
    assert np.isfinite(executor.grad_dict["c0_weight"].asnumpy()).all()
