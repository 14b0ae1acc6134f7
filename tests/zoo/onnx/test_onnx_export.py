"""ONNX export: each converted operator against MXNet's, every registered model's export
against its MXNet graph on ONNX Runtime, the file's contract and the export job."""
import json
import os

import mxnet as mx
import numpy as np
import onnx
import onnxruntime
import pytest

import zoo
from zoo.predictor import Predictor
from zoo.inference.detector import Detections
from zoo_bench.inference import openvino_session
from zoo.onnx import converters, parity
from zoo.onnx.export import export_artifact, export_model

from conftest import END_TO_END_RUNS
from factories import unit_variance_params

SMALL_FASTER_RCNN = {"data_shape": 128, "max_size": 224, "rpn_pre_nms_top_n_test": 1000,
                     "rpn_post_nms_top_n_test": 50}


def session(path):
    return onnxruntime.InferenceSession(path, providers=["CPUExecutionProvider"])


def both(symbol, tmp_path, **inputs):
    """``symbol``'s first output from MXNet and from ONNX Runtime on ``inputs``."""
    names = [n for n in symbol.list_arguments() if n in inputs]
    path = str(tmp_path / "op.onnx")
    with converters.input_shapes(symbol, **{n: inputs[n].shape for n in names}):
        mx.onnx.export_model(symbol, {}, in_shapes=[inputs[n].shape for n in names],
                             in_types=[np.float32] * len(names), onnx_file_path=path)
    executor = symbol.bind(mx.cpu(), {n: mx.nd.array(inputs[n]) for n in names})
    return executor.forward()[0].asnumpy(), session(path).run(None, {n: inputs[n]
                                                                     for n in names})[0]


def kept(rows):
    """Rows with a class (>= 0), best first, ties in their order."""
    rows = rows[rows[:, 0] >= 0]
    return rows[np.argsort(-rows[:, 1], kind="stable")]


def multibox_inputs(rng, batch=2, classes=4, anchors=300):
    logits = rng.randn(batch, classes, anchors).astype(np.float32)
    prob = np.exp(logits) / np.exp(logits).sum(1, keepdims=True)
    centre = rng.rand(1, anchors, 2)
    half = rng.rand(1, anchors, 2) * 0.15
    return {"cls_prob": np.round(prob, 2).astype(np.float32),  # many equal scores
            "loc_pred": (0.5 * rng.randn(batch, anchors * 4)).astype(np.float32),
            "anchor": np.concatenate([centre - half, centre + half], 2).astype(np.float32)}


@pytest.mark.parametrize("force_suppress", [False, True])
@pytest.mark.parametrize("nms_topk", [-1, 50])
def test_multibox_detection_converts_exactly(force_suppress, nms_topk, tmp_path):
    symbol = mx.sym.contrib.MultiBoxDetection(
        *(mx.sym.var(n) for n in ("cls_prob", "loc_pred", "anchor")), nms_threshold=0.45,
        force_suppress=force_suppress, nms_topk=nms_topk, variances=(0.1, 0.1, 0.2, 0.2))
    ours, theirs = both(symbol, tmp_path, **multibox_inputs(np.random.RandomState(0)))
    for image in range(len(ours)):
        expected, found = kept(ours[image]), kept(theirs[image])
        assert len(expected) == len(found) > 10
        np.testing.assert_allclose(found, expected, atol=1e-6)


@pytest.mark.parametrize("id_index,topk,force_suppress", [(0, -1, False), (0, 40, False),
                                                          (-1, 40, False), (0, -1, True)])
def test_box_nms_converts_exactly(id_index, topk, force_suppress, tmp_path):
    rng = np.random.RandomState(1)
    corners = rng.rand(2, 200, 2) * 80
    rows = np.concatenate([rng.randint(0, 3, (2, 200, 1)), np.round(rng.rand(2, 200, 1), 2),
                           corners, corners + rng.rand(2, 200, 2) * 40], 2).astype(np.float32)
    rows[:, ::7, 1] = -1.0  # invalid rows, below valid_thresh
    symbol = mx.sym.contrib.box_nms(mx.sym.var("rows"), overlap_thresh=0.5, valid_thresh=0.01,
                                    topk=topk, coord_start=2, score_index=1, id_index=id_index,
                                    force_suppress=force_suppress)
    ours, theirs = both(symbol, tmp_path, rows=rows)
    # box_nms puts the kept rows first, best first, then rows of -1, as the conversion does.
    np.testing.assert_allclose(theirs, ours, atol=1e-6)
    assert (ours[:, :, 0] >= 0).sum() > 20


@pytest.mark.parametrize("sample_ratio", [2, -1])
def test_roi_align_converts_exactly(sample_ratio, tmp_path):
    rng = np.random.RandomState(2)
    feature = rng.randn(2, 4, 16, 24).astype(np.float32)
    start = rng.rand(30, 2) * [90, 60]
    rois = np.concatenate([rng.randint(0, 2, (30, 1)), start,
                           np.minimum(start + rng.rand(30, 2) * 50, [96, 64])], 1)
    rois[::5, 0] = -1  # skipped by MXNet, zeroed by the graphs that use it and here
    symbol = mx.sym.contrib.ROIAlign(mx.sym.var("feature"), mx.sym.var("rois"),
                                     pooled_size=(7, 7), spatial_scale=0.25,
                                     sample_ratio=sample_ratio)
    ours, theirs = both(symbol, tmp_path, feature=feature, rois=rois.astype(np.float32))
    pooled = rois[:, 0] >= 0
    np.testing.assert_allclose(theirs[pooled], ours[pooled], atol=1e-5)
    assert not theirs[~pooled].any()


def test_scalar_comparison_and_constants_convert(tmp_path):
    x = np.array([[-1.0, 0.0, 0.5, 2.0]], np.float32)
    symbol = mx.sym.broadcast_add(mx.sym.full((1, 4), 3.0), mx.sym.var("x") >= 0.5)
    ours, theirs = both(symbol, tmp_path, x=x)
    np.testing.assert_array_equal(theirs, ours)
    np.testing.assert_array_equal(ours, [[3.0, 3.0, 4.0, 4.0]])


def small_model(name):
    """``name`` at a small input (Faster R-CNN 128 x 224, SSD its smallest data shape)."""
    config = zoo.get_config(name)
    if "max_size" in config:
        return zoo.get_model(name, num_classes=3, **SMALL_FASTER_RCNN)
    return zoo.get_model(name, num_classes=3, data_shape=min(config["shapes"]))


def graph_detections(rows):
    """:class:`Detections` of one image's best output rows, as many as parity compares
    (boxes in units of the image side)."""
    rows = kept(rows)[:parity.TOP + parity.TIE_MARGIN]
    labels = rows[:, 0].astype(np.int64)
    return Detections(boxes=rows[:, 2:6], scores=rows[:, 1], labels=labels,
                      names=[str(label) for label in labels])


def canvases(model):
    """Input batches to compare on: the reference input; for a Faster R-CNN on MobileNetV2
    (the cheap ones: one C4, one FPN) also another canvas, where the second image's valid
    region is smaller, which its free height and width must take."""
    shapes = model.input_shapes(2)
    height, width = shapes["data"][2:]
    if "im_info" not in shapes or model.config["backbone"] != "mobilenetv2":
        return [(height, width, None)]
    other = (height + 32, width - 64)
    im_info = np.array([[other[0], other[1], 1.0], [other[0] - 40, other[1] - 24, 1.0]],
                       np.float32)
    return [(height, width, None), other + (im_info,)]


@pytest.mark.parametrize("name", END_TO_END_RUNS)
def test_every_model_detects_the_same_on_onnx_runtime(name, tmp_path):
    model = small_model(name)
    params = unit_variance_params(model, seed=3)
    path = export_model(model, *params, str(tmp_path / "model.onnx"))
    runtime = session(path)
    predictor = Predictor(model.symbol(), *params)
    rng = np.random.RandomState(4)
    compared = 0
    batches = canvases(model)
    for height, width, im_info in batches:
        inputs = model.input_arrays(rng.randn(2, 3, height, width).astype(np.float32), im_info)
        ours = predictor(**{k: mx.nd.array(v) for k, v in inputs.items()})[0].asnumpy()
        theirs = runtime.run(None, inputs)[0]
        result = parity.compare([graph_detections(r) for r in ours],
                                [graph_detections(r) for r in theirs], [(1, 1)] * 2)
        assert result.equal, result.mismatches
        compared += result.detections
    assert compared >= 2 * 40 * len(batches)  # two images a batch, 40 detections or more


@pytest.mark.parametrize("post_processing", ["multibox", "per_class"])
def test_an_ssds_score_threshold_is_exported(post_processing, tmp_path):
    """The config's pre-NMS ``score_threshold`` reaches the ONNX graph: ONNX Runtime keeps
    what MXNet keeps, nothing under it."""
    threshold = 0.45  # about half of the candidates (scores spread over 0.39 to 0.6)
    model = zoo.get_model("ssd_mobilenetv2_stride8", num_classes=3, data_shape=128,
                          post_processing=post_processing, score_threshold=threshold)
    params = unit_variance_params(model, seed=3)
    runtime = session(export_model(model, *params, str(tmp_path / "model.onnx")))
    inputs = model.input_arrays(np.random.RandomState(4).randn(2, 3, 128, 128).astype(np.float32))
    ours = Predictor(model.symbol(), *params)(**{k: mx.nd.array(v)
                                                 for k, v in inputs.items()})[0].asnumpy()
    theirs = runtime.run(None, inputs)[0]
    for mine, other in zip(ours, theirs):
        expected, found = kept(mine), kept(other)
        assert len(found) == len(expected) > 10 and found[:, 1].min() >= threshold
        np.testing.assert_allclose(found, expected, atol=1e-5)


@pytest.fixture(scope="module")
def small_ssd(tmp_path_factory):
    """``(model, params, path)`` of a small SSD's export."""
    model = zoo.get_model("ssd_mobilenetv2", data_shape=192, num_classes=2,
                          class_names=["cat", "dog"])
    params = unit_variance_params(model, seed=0)
    path = str(tmp_path_factory.mktemp("onnx") / "ssd.onnx")
    return model, params, export_model(model, *params, path)


def test_the_file_describes_itself(small_ssd):
    model, _, path = small_ssd
    exported = onnx.load(path)
    meta = {p.key: p.value for p in exported.metadata_props}
    assert meta["zoo.format"] == "1" and meta["zoo.network"] == "ssd_mobilenetv2"
    assert json.loads(meta["zoo.class_names"]) == ["cat", "dog"]
    assert json.loads(meta["zoo.preprocessing"]) == model.preprocessing()
    assert meta["zoo.graph_preprocessing"] == "none"
    runtime = session(path)
    assert [(i.name, i.shape[1:]) for i in runtime.get_inputs()] == [("data", [3, 192, 192])]
    assert [o.name for o in runtime.get_outputs()] == ["detections"]
    assert not {t.name for t in exported.graph.initializer} & {
        i.name for i in exported.graph.input}


def test_preprocessing_in_the_graph_equals_normalised_input(small_ssd, tmp_path):
    model, params, plain = small_ssd
    path = export_model(model, *params, str(tmp_path / "pixels.onnx"),
                        graph_preprocessing="normalize")
    pixels = np.random.RandomState(5).uniform(0, 255, (2, 192, 192, 3)).astype(np.float32)
    stats = model.preprocessing()
    data = ((pixels - stats["mean"]) / stats["std"]).transpose(0, 3, 1, 2)
    expected = session(plain).run(None, {"data": data.astype(np.float32)})[0]
    found = session(path).run(None, {"image": pixels})[0]
    np.testing.assert_allclose(found, expected, atol=1e-5)
    assert (expected[:, :, 0] >= 0).sum() > 20


def test_what_cannot_be_exported_says_so(small_ssd, tmp_path):
    model, params, _ = small_ssd
    with pytest.raises(zoo.errors.OptionsError, match="graph_preprocessing"):
        export_model(model, *params, str(tmp_path / "x.onnx"), graph_preprocessing="rgb")
    int8 = type("Int8", (), {"precision": {"dtype": "int8", "calibration": {
        "source": "out/ssd-0003"}}, "name": "out/ssd-int8-0003"})()
    with pytest.raises(zoo.artifact.ArtifactError, match=(
            r"^out/ssd-int8-0003 is an int8 artifact, which runs on MXNet's MKL-DNN only: "
            r"export the fp32 artifact it was made from \(out/ssd-0003\)$")):
        export_artifact(int8, str(tmp_path / "y.onnx"))
    assert not os.listdir(tmp_path)


@pytest.mark.parametrize("name", ["ssd_mobilenetv2", "faster_rcnn_fpn_mobilenetv2"])
def test_openvino_runs_the_export_and_detects_the_same(name, tmp_path):
    """A second consumer of the files: OpenVINO's CPU plugin, in fp32."""
    model = small_model(name)
    path = export_model(model, *unit_variance_params(model, seed=3), str(tmp_path / "m.onnx"))
    inputs = model.input_arrays(np.random.RandomState(1).randn(
        *model.input_shapes(2)["data"]).astype(np.float32))
    expected = session(path).run(None, inputs)[0]
    found = openvino_session(path)(inputs)[0]
    result = parity.compare([graph_detections(r) for r in expected],
                            [graph_detections(r) for r in found], [(1, 1)] * 2)
    assert result.equal, result.mismatches
    assert result.detections >= 100


def test_a_fixed_gamma_batch_norm_runs_at_scale_one_as_in_mxnet(tmp_path):
    """GluonCV's SSD extra layers are BatchNorms with ``fix_gamma`` (``scale=False``): MXNet
    runs them at a scale of 1 whatever the parameter holds; the exported file must too."""
    model = small_model("ssd_mobilenetv2_stride8_gluoncv")
    arg_params, aux_params = unit_variance_params(model, seed=3)
    fixed = [name for name in arg_params if name.startswith("extra") and name.endswith("gamma")]
    assert fixed  # the layout still has them
    arg_params = {name: value * 3 if name in fixed else value
                  for name, value in arg_params.items()}
    path = export_model(model, arg_params, aux_params, str(tmp_path / "model.onnx"))
    inputs = model.input_arrays(np.random.RandomState(4).randn(
        2, 3, *model.input_shapes(2)["data"][2:]).astype(np.float32), None)
    ours = Predictor(model.symbol(), arg_params, aux_params)(
        **{k: mx.nd.array(v) for k, v in inputs.items()})[0].asnumpy()
    theirs = session(path).run(None, inputs)[0]
    result = parity.compare([graph_detections(r) for r in ours],
                            [graph_detections(r) for r in theirs], [(1, 1)] * 2)
    assert result.equal, result.mismatches
