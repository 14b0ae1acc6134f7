"""OnnxDetector: exported detectors on ONNX Runtime, called as zoo.Detector is, without MXNet.

The exports here are toy graphs that follow the file contract of :mod:`zoo.onnx.runtime`
and compute their rows from their inputs, so that what the detector fed them is checkable:
row k of an image is ``[k, sigmoid(mean of input plane k), k / 10, k / 10, x2, y2]``, with
``x2, y2`` = 0.9 or, for a graph taking ``im_info``, 0.5 + its width and height / 1000 (a
box of some area: the runner drops those of none); a last row has class -1 (no detection)
and score 1.
"""
import json
import os
import subprocess
import sys

import cv2
import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import zoo
from zoo.schema import preprocessing as image_preprocessing
from zoo.onnx.runtime import OnnxDetector, OnnxModelError, load_onnx_detector
from conftest import runner_inputs
from factories import random_image

NAMES = ["circle", "square", "triangle"]
ALL = dict(score_threshold=0.0, max_detections=10000)
STATISTICS = {"mean_pixels": [120.0, 110.0, 100.0], "std_pixels": [60.0, 50.0, 40.0]}
STRETCH = image_preprocessing.stretch(dict(STATISTICS, data_shape=32))
SHORT_SIDE = image_preprocessing.short_side(dict(STATISTICS, data_shape=32, max_size=48), 8)
from factories import ROOT


def constant(name, values):
    return helper.make_node("Constant", [], [name], value=helper.make_tensor(
        name, TensorProto.FLOAT, np.shape(values), np.asarray(values, np.float32).ravel()))


def normalising_nodes(preprocessing):
    """``image`` (B, H, W, 3) pixels to ``data`` (B, 3, H, W) normalised."""
    return [constant("mean", preprocessing["mean"]), constant("std", preprocessing["std"]),
            helper.make_node("Sub", ["image", "mean"], ["centred"]),
            helper.make_node("Div", ["centred", "std"], ["scaled"]),
            helper.make_node("Transpose", ["scaled"], ["data"], perm=[0, 3, 1, 2])]


def corner_nodes(im_info):
    """``corners`` (B, 2): ``[x2, y2]`` of each image, 0.5 + from im_info, or 0.9."""
    if not im_info:
        return [constant("corner", [0.9, 0.9]), constant("one2", [1.0, 1.0]),
                helper.make_node("Mul", ["zero", "one2"], ["z2"]),
                helper.make_node("Add", ["z2", "corner"], ["corners"])]
    return [constant("wh_from_hw", [[0.0, 0.001], [0.001, 0.0], [0.0, 0.0]]),
            constant("half", [0.5, 0.5]),
            helper.make_node("MatMul", ["im_info", "wh_from_hw"], ["wh"]),
            helper.make_node("Add", ["wh", "half"], ["corners"])]


def row_nodes(im_info):
    """``detections`` (B, 4, 6) from ``data`` (B, 3, H, W) and, if taken, ``im_info``."""
    return [
        helper.make_node("ReduceMean", ["data"], ["means"], axes=[2, 3], keepdims=0),
        helper.make_node("Sigmoid", ["means"], ["scores"]),
        helper.make_node("ReduceMean", ["means"], ["average"], axes=[1], keepdims=1),
        constant("zero_factor", 0.0),
        helper.make_node("Mul", ["average", "zero_factor"], ["zero"]),  # (B, 1) zeros
        *corner_nodes(im_info),
        constant("tops", [[k / 10, k / 10] for k in range(3)]),
        constant("classes", [0.0, 1.0, 2.0]),
        helper.make_node("Add", ["zero", "classes"], ["row_classes"]),  # (B, 3)
        helper.make_node("Unsqueeze", ["row_classes", "axis2"], ["class_column"]),
        helper.make_node("Unsqueeze", ["scores", "axis2"], ["score_column"]),
        helper.make_node("Unsqueeze", ["zero", "axis2"], ["zero3"]),  # (B, 1, 1)
        helper.make_node("Add", ["zero3", "tops"], ["top_left"]),  # (B, 3, 2)
        helper.make_node("Unsqueeze", ["corners", "axis1"], ["corner_row"]),  # (B, 1, 2)
        helper.make_node("Add", ["corner_row", "zero3"], ["corner_row_b"]),
        helper.make_node("Concat", ["corner_row_b"] * 3, ["bottom_right"], axis=1),
        helper.make_node("Concat", ["class_column", "score_column", "top_left", "bottom_right"],
                         ["valid"], axis=2),
        constant("empty_row", [[[-1.0, 1.0, 0.0, 0.0, 1.0, 1.0]]]),
        helper.make_node("Add", ["zero3", "empty_row"], ["empty"]),  # (B, 1, 6)
        helper.make_node("Concat", ["valid", "empty"], ["detections"], axis=1),
    ]


def write_export(path, preprocessing=STRETCH, graph_preprocessing="none", im_info=False,
                 metadata=None, output="detections", size=("height", "width")):
    """A toy export at ``path`` (see the module's docstring) whose image input has height
    and width ``size``; ``metadata`` replaces keys of the contract's metadata_props (None
    values drop them)."""
    nodes = [helper.make_node("Constant", [], ["axis%d" % axis], value=helper.make_tensor(
        "axis%d" % axis, TensorProto.INT64, [1], [axis])) for axis in (1, 2)]
    if graph_preprocessing == "normalize":
        nodes += normalising_nodes(preprocessing)
    nodes += row_nodes(im_info)
    if output != "detections":
        nodes.append(helper.make_node("Identity", ["detections"], [output]))
    shape = (["batch", 3, *size] if graph_preprocessing == "none" else ["batch", *size, 3])
    inputs = [helper.make_tensor_value_info(
        "data" if graph_preprocessing == "none" else "image", TensorProto.FLOAT, shape)]
    if im_info:
        inputs.append(helper.make_tensor_value_info("im_info", TensorProto.FLOAT, ["batch", 3]))
    graph = helper.make_graph(nodes, "toy", inputs, [helper.make_tensor_value_info(
        output, TensorProto.FLOAT, ["batch", 4, 6])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    props = {"zoo.format": "1", "zoo.network": "toy", "zoo.class_names": json.dumps(NAMES),
             "zoo.preprocessing": json.dumps(preprocessing),
             "zoo.graph_preprocessing": graph_preprocessing}
    props.update(metadata or {})
    helper.set_model_props(model, {key: value for key, value in props.items()
                                   if value is not None})
    onnx.checker.check_model(model)
    onnx.save(model, str(path))
    return str(path)


def expected_rows(images, preprocessing):
    """The toy graph's rows of ``images``, each on its own canvas, computed here."""
    data, im_info = (np.concatenate(arrays) if arrays[0] is not None else None
                     for arrays in zip(*runner_inputs(images, preprocessing)))
    rows = np.zeros((len(images), 3, 6), np.float32)
    rows[:, :, 0] = [0, 1, 2]
    rows[:, :, 1] = 1 / (1 + np.exp(-data.mean(axis=(2, 3))))
    rows[:, :, 2:4] = np.array([0.0, 0.1, 0.2])[:, None]
    rows[:, :, 4:6] = 0.9 if im_info is None else 0.5 + im_info[:, None, 1::-1] / 1000
    return rows


def as_rows(found):
    """Detections as rows ``[label, score, x1, y1, x2, y2]`` in a canonical order."""
    rows = np.column_stack([found.labels, found.scores, found.boxes]).astype(np.float64)
    return rows[np.lexsort(rows.T[::-1])]


def in_pixels(rows, image):
    height, width = image.shape[:2]
    rows = rows.astype(np.float64)
    rows[:, 2:6] *= [width, height, width, height]
    return rows[np.lexsort(rows.T[::-1])]


@pytest.mark.parametrize("graph_preprocessing", ["none", "normalize"])
def test_rows_are_the_graphs_in_the_images_pixels(tmp_path, graph_preprocessing):
    path = write_export(tmp_path / "toy.onnx", graph_preprocessing=graph_preprocessing)
    detector = OnnxDetector(path, threads=1)
    image = random_image(40, 70)
    found = detector(image, **ALL)
    assert isinstance(found, zoo.Detections) and len(found) == 3, "the class -1 row is dropped"
    assert found.boxes.dtype == np.float32 and found.labels.dtype == np.int64
    assert np.all(np.diff(found.scores) <= 0), "highest score first"
    assert found.names == [NAMES[label] for label in found.labels]
    np.testing.assert_allclose(as_rows(found), in_pixels(expected_rows([image], STRETCH)[0],
                                                         image), rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("graph_preprocessing", ["none", "normalize"])
def test_short_side_batches_feed_each_images_im_info(tmp_path, graph_preprocessing):
    path = write_export(tmp_path / "toy.onnx", SHORT_SIDE, graph_preprocessing, im_info=True)
    images = [random_image(40, 70, seed=0), random_image(60, 30, seed=1),
              random_image(50, 50, seed=2)]
    found = load_onnx_detector(path, threads=1)(images, batch_size=2, **ALL)
    assert len(found) == len(images), "the padding of the last batch is dropped"
    expected = np.concatenate([expected_rows([image], SHORT_SIDE) for image in images])
    for one, rows, image in zip(found, expected, images):
        np.testing.assert_allclose(as_rows(one), in_pixels(rows, image), rtol=1e-5, atol=1e-4)
    assert not np.allclose(as_rows(found[0]), as_rows(found[1])), "each image has its own"


def test_a_stretched_image_gets_the_whole_canvas_as_im_info(tmp_path):
    path = write_export(tmp_path / "toy.onnx", im_info=True)
    found = OnnxDetector(path, threads=1)(random_image(20, 90), **ALL)
    side = 0.5 + STRETCH["data_shape"][0] / 1000
    np.testing.assert_allclose(found.boxes[:, 2:] / [90, 20], side, rtol=1e-6)


def test_the_graphs_normalisation_gives_what_a_normalised_input_gives(tmp_path):
    images = [random_image(40 + 9 * i, 70 - 8 * i, seed=i) for i in range(3)]
    found = [OnnxDetector(write_export(tmp_path / ("%s.onnx" % kind), SHORT_SIDE, kind,
                                       im_info=True), threads=1)(images, batch_size=3, **ALL)
             for kind in ("none", "normalize")]
    for plain, normalised in zip(*found):
        np.testing.assert_allclose(as_rows(normalised), as_rows(plain), rtol=1e-5, atol=1e-4)


def test_batches_give_what_single_images_give(tmp_path):
    detector = OnnxDetector(write_export(tmp_path / "toy.onnx"), threads=1)
    images = [random_image(40 + 10 * i, 60 + 7 * i, seed=i) for i in range(5)]
    one_by_one = [detector(image, **ALL) for image in images]
    batched = detector(tuple(images), batch_size=2, **ALL)
    assert isinstance(batched, list) and len(batched) == len(images)
    for single, in_batch in zip(one_by_one, batched):
        np.testing.assert_allclose(as_rows(in_batch), as_rows(single), rtol=1e-6, atol=1e-5)
    assert detector([]) == []


def test_score_threshold_and_max_detections(tmp_path):
    detector = OnnxDetector(write_export(tmp_path / "toy.onnx"), threads=1)
    image = random_image(64, 64)
    every = detector(image, **ALL)
    threshold = float(np.median(every.scores))
    above = detector(image, score_threshold=threshold, max_detections=10000)
    assert len(above) == int((every.scores >= threshold).sum()) < len(every)
    best = detector(image, score_threshold=0.0, max_detections=1)
    assert len(best) == 1 and best.scores[0] == every.scores[0]
    assert len(detector(image, max_detections=0)) == 0
    with pytest.raises(ValueError, match="batch_size >= 1"):
        detector(image, batch_size=0)


@pytest.mark.parametrize("graph_preprocessing", ["none", "normalize"])
def test_a_fixed_size_input_takes_the_stretched_images(tmp_path, graph_preprocessing):
    path = write_export(tmp_path / "toy.onnx", graph_preprocessing=graph_preprocessing,
                        size=(32, 32))
    image = random_image(40, 70)
    found = OnnxDetector(path, threads=1)(image, **ALL)
    np.testing.assert_allclose(as_rows(found), in_pixels(expected_rows([image], STRETCH)[0],
                                                         image), rtol=1e-5, atol=1e-4)


def test_metadata_is_the_files(tmp_path):
    detector = OnnxDetector(write_export(tmp_path / "toy.onnx", SHORT_SIDE, "normalize",
                                         im_info=True), threads=1)
    assert detector.network == "toy" and detector.class_names == NAMES
    assert detector.preprocessing == SHORT_SIDE and detector.graph_preprocessing == "normalize"


@pytest.mark.parametrize("change, expected", [
    (dict(metadata={"zoo.format": None}),
     "not a zoo export (no zoo.format in its metadata_props); export one with"),
    (dict(metadata={"zoo.format": "2"}), "zoo.format '2'; this zoo reads zoo.format '1'"),
    (dict(metadata={"zoo.graph_preprocessing": "bgr"}),
     "zoo.graph_preprocessing = 'bgr': expected one of 'none', 'normalize'"),
    (dict(metadata={"zoo.class_names": "[circle"}), "zoo.class_names is not valid JSON"),
    (dict(metadata={"zoo.class_names": "[]"}),
     "zoo.class_names = []: expected a JSON list of class names"),
    (dict(metadata={"zoo.preprocessing": None}), "no zoo.preprocessing in its metadata_props"),
    (dict(metadata={"zoo.preprocessing": '{"mean": [0, 0, 0]}'}),
     "expected a JSON object with mean, std and data_shape"),
    (dict(metadata={"zoo.tiles": '{"size": 0, "overlap": 0.2}'}),
     'zoo.tiles = {"size": 0, "overlap": 0.2}: expected a JSON object {"size": pixels'),
    (dict(metadata={"zoo.graph_preprocessing": "normalize"}),
     "inputs data: expected 'image' (and 'im_info' for a Faster R-CNN)"),
    (dict(output="rows"), "outputs rows: expected 'detections'"),
    (dict(size=(32, 16)), "input data of shape ['batch', 3, 32, 16]: expected height and width "
                          "[32, 32], zoo.preprocessing's data_shape"),
    (dict(size=(16, 32), graph_preprocessing="normalize"),
     "input image of shape ['batch', 16, 32, 3]: expected height and width [32, 32]"),
])
def test_a_bad_export_is_one_line_naming_the_file(tmp_path, change, expected):
    path = write_export(tmp_path / "toy.onnx", **change)
    with pytest.raises(OnnxModelError) as caught:
        OnnxDetector(path)
    message = str(caught.value)
    assert message.startswith(path + ": ") and expected in message and "\n" not in message


def test_a_missing_or_damaged_file_is_one_line(tmp_path):
    missing = str(tmp_path / "missing.onnx")
    with pytest.raises(OnnxModelError, match="^%s: no such file$" % missing):
        OnnxDetector(missing)
    damaged = tmp_path / "damaged.onnx"
    damaged.write_bytes(b"not a protobuf")
    with pytest.raises(OnnxModelError, match="damaged.onnx: not an ONNX model"):
        OnnxDetector(damaged)


def test_without_onnxruntime_the_error_says_what_to_install(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "onnxruntime", None)
    path = write_export(tmp_path / "toy.onnx")
    with pytest.raises(ImportError) as caught:
        OnnxDetector(path)
    assert str(caught.value) == ("%s: a .onnx file runs on ONNX Runtime, which is not "
                                 "installed: pip install -r requirements/onnxruntime.txt in the "
                                 "zoo's checkout (no MXNet needed)" % path)


def run_python(code, tmp_path):
    """Run ``code`` in a fresh interpreter with the repository importable."""
    env = dict(os.environ, PYTHONPATH=ROOT, OMP_NUM_THREADS="1")
    env.pop("MXNET_ENGINE_TYPE", None)
    return subprocess.run([sys.executable, "-c", code], cwd=str(tmp_path), env=env,
                          capture_output=True, text=True, timeout=300)


def test_an_export_runs_where_mxnet_cannot_be_imported(tmp_path):
    path = write_export(tmp_path / "toy.onnx", SHORT_SIDE, "normalize", im_info=True)
    image = tmp_path / "image.png"
    cv2.imwrite(str(image), random_image(40, 70))
    code = """
import sys
sys.modules["mxnet"] = None  # "import mxnet" raises ImportError
import zoo, zoo.data, zoo.metrics
detector = zoo.load_onnx_detector(%r, threads=1)
found = detector([%r], score_threshold=0.0)[0]
assert isinstance(found, zoo.Detections)
print(len(found), sorted(found.names))
print(sorted(name for name, module in sys.modules.items()
             if name.split(".")[0] == "mxnet" and module is not None))
""" % (path, str(image))
    done = run_python(code, tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.splitlines() == ["3 %s" % sorted(NAMES), "[]"]


def test_names_and_submodules_load_mxnet_on_first_use(tmp_path):
    code = """
import sys
import zoo
print("mxnet" in sys.modules)
print(zoo.artifact.__name__, zoo.get_model.__module__, "mxnet" in sys.modules)
try:
    zoo.no_such_name
except AttributeError as err:
    print(err)
"""
    done = run_python(code, tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.splitlines() == ["False", "zoo.artifact zoo.model True",
                                        "module 'zoo' has no attribute 'no_such_name'"]
