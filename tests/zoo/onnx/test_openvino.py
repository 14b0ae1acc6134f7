"""OpenVINO deployment: every registered model exported, calibrated to int8 and run on
OpenVINO without MXNet; the file's contract; its errors; and the deployed runtimes in
``zoo benchmark --compare all``. The int8 accuracy test on a trained model is in
test_jobs.py (it shares that module's trained artifact)."""
import json
import os
import re
import subprocess
import sys

import cv2
import numpy as np
import onnx
import pytest

import zoo
from symbols.boxes import iou
from zoo.cli import main as zoo_main
from zoo.data import embedded
from zoo.errors import OptionsError
from zoo_bench import inference as benchmark_job
from zoo_bench.inference import BenchmarkOptions, benchmark
from zoo.inference.runner import BatchDetector, BatchRunner, ImageList
from zoo.onnx.export import export_model
from zoo.onnx.int8 import fold_batch_norms, quantize_file, quantized_layers
from zoo.onnx.openvino_runtime import OpenVinoDetector, layer_precisions, write_ir
from zoo.onnx.runtime import OnnxDetector, OnnxModelError

from conftest import END_TO_END_MODELS
from factories import random_image, unit_variance_params
from test_onnx_export import small_model
from test_onnx_runtime import NAMES, SHORT_SIDE, write_export

from factories import ROOT
INT8 = {"u8", "i8"}


def calibrated(model, params, images, folder):
    """``(IR path, layers quantized)`` of ``model`` exported and calibrated on ``images``."""
    fp32 = export_model(model, *params, os.path.join(folder, "fp32.onnx"))
    prepared = OnnxDetector(fp32)
    batches = (prepared.inputs(batch.data, batch.im_info)
               for batch in prepared.runner.batches(ImageList(images), 2))
    int8, layers = quantize_file(fp32, batches, os.path.join(folder, "int8.onnx"))
    return write_ir(int8, os.path.join(folder, "int8.xml"), {"dtype": "int8"}), layers


QUICK = ("ssd_mobilenetv2", "faster_rcnn_mobilenetv2")
"""The models of the per-model tests in ``make test``; the others are marked slow."""
IMAGES = ((150, 231), (263, 170))
"""Odd sizes, one landscape and one portrait."""


def per_model(kind):
    return [pytest.param(name, marks=() if name in QUICK else pytest.mark.slow)
            for name in END_TO_END_MODELS if ("max_size" in zoo.get_config(name)) == (
                kind == "faster_rcnn")]


AGREEMENT = 0.5
"""The least share of the int8 IR's best detections that the fp32 IR finds too. Random
weights leave a Faster R-CNN's scores within a few hundredths of each other, which int8
reorders, so the best 30 are compared, not the very best: there every model agreed on 0.7
or more, and boxes found by chance (another image's, or these shifted by 15 pixels) on 0.2
or less."""


@pytest.mark.parametrize("name", per_model("ssd") + per_model("faster_rcnn"))
def test_every_model_exports_and_runs_in_openvino_int8(name, tmp_path):
    """Every registered model, SSD and Faster R-CNN (C4 and FPN), calibrated to int8 runs
    on OpenVINO's CPU plugin, its convolutions in int8, and finds what its fp32 IR finds."""
    model = small_model(name)
    images = [random_image(*size, seed=seed) for seed, size in enumerate(IMAGES)]
    path, layers = calibrated(model, unit_variance_params(model, seed=3), images, str(tmp_path))
    detector = zoo.load_openvino_detector(path)
    found = detector(images, score_threshold=0.0)
    assert [len(f) > 0 for f in found] == [True, True]
    assert detector.precision == {"dtype": "int8"} and detector.network == name
    weighted = [precision for _, kind, precision in layer_precisions(detector.compiled)
                if kind in ("Convolution", "FullyConnected")]
    # every quantized convolution and fully connected layer runs int8 (OpenVINO also
    # reports the first convolution, fp32 weights on the image, in its output's u8)
    assert layers > 0 and sum(precision in INT8 for precision in weighted) >= layers
    fp32 = write_ir(str(tmp_path / "fp32.onnx"), str(tmp_path / "fp32.xml"), {"dtype": "fp32"})
    expected = zoo.load_openvino_detector(fp32)(images, score_threshold=0.0)
    shares = [agreement(theirs, ours) for theirs, ours in zip(expected, found)]
    print("%s: int8 agrees with fp32 on %s of its best 30 detections"
          % (name, ", ".join("%.2f" % share for share in shares)))
    assert min(shares) >= AGREEMENT, shares


def agreement(expected, found, top=30):
    """The share of ``found``'s best ``top`` detections that ``expected`` holds too: one of
    the same class overlapping it by an IoU of 0.5 or more, boxes read as pixel indices (so
    that the zero-width boxes random weights leave on the image's border match their
    like)."""
    best = np.argsort(-found.scores, kind="stable")[:top]
    overlaps = iou(found.boxes[best], expected.boxes, offset=1.0)
    same = found.labels[best][:, None] == expected.labels[None, :]
    return float(np.mean(((overlaps >= 0.5) & same).any(axis=1)))


def test_an_int8_graph_openvino_cannot_run_is_refused_in_one_line(toy_ir, tmp_path):
    """The export runs the int8 IR once before writing it (zoo.jobs.export_openvino
    check_runs): a graph OpenVINO reads but cannot run is one line, not a failure at the
    user's first detection. Here the toy export whose rows are reshaped to a count they
    cannot fill; before zoo.onnx.int8 shielded its integer casts, every int8 Faster R-CNN
    was such a graph (its empty anchor grid failed a Broadcast)."""
    from zoo.artifact import ArtifactError
    from zoo.jobs.export_openvino import check_runs
    model = onnx.load(toy_ir[1])
    (last,) = [node for node in model.graph.node if "detections" in node.output]
    last.output[list(last.output).index("detections")] = "rows"
    model.graph.initializer.append(onnx.numpy_helper.from_array(
        np.array([-1, len(NAMES) + 2, 6], np.int64), "too_many_rows"))
    model.graph.node.append(onnx.helper.make_node("Reshape", ["rows", "too_many_rows"],
                                                  ["detections"]))
    onnx.save(model, str(tmp_path / "bad.onnx"))
    path = write_ir(str(tmp_path / "bad.onnx"), str(tmp_path / "bad.xml"), {"dtype": "int8"})
    with pytest.raises(ArtifactError, match=r"^out/m.xml: OpenVINO cannot run this int8 graph "
                                            r"\(\[CPU\] Reshape .+\); export it in fp32"):
        check_runs(path, "out/m.xml", [random_image(40, 70, seed=3)])


def test_batch_norms_fold_into_the_convolutions_they_follow(tmp_path):
    model = small_model("ssd_mobilenetv2")
    path = export_model(model, *unit_variance_params(model, seed=0), str(tmp_path / "m.onnx"))
    graph = onnx.load(path)
    norms = [node.output[0] for node in graph.graph.node if node.op_type == "BatchNormalization"]
    assert fold_batch_norms(graph) == len(norms) > 0
    assert not any(node.op_type == "BatchNormalization" for node in graph.graph.node)
    data = np.random.RandomState(0).randn(1, 3, 192, 192).astype(np.float32)
    # the batch norms' outputs, now the convolutions', before and after (the detections
    # themselves rank near-equal scores either way)
    runs = [probe(g, norms, {"data": data}) for g in (onnx.load(path), graph)]
    for before, after in zip(*runs):
        np.testing.assert_allclose(after, before, rtol=1e-4, atol=1e-4)
    # every convolution but the first, on the image
    assert len(quantized_layers(graph)) == sum(n.op_type == "Conv" for n in graph.graph.node) - 1


def probe(graph, names, feed):
    """The tensors ``names`` of ``graph`` on ONNX Runtime."""
    import onnxruntime
    graph.graph.output.extend(onnx.helper.make_empty_tensor_value_info(n) for n in names)
    return onnxruntime.InferenceSession(graph.SerializeToString(), providers=[
        "CPUExecutionProvider"]).run(names, feed)


@pytest.fixture(scope="module")
def toy_ir(tmp_path_factory):
    """A toy export (see test_onnx_runtime.py) written as an OpenVINO IR."""
    folder = tmp_path_factory.mktemp("toy")
    onnx_path = write_export(folder / "toy.onnx", SHORT_SIDE, "normalize", im_info=True)
    return write_ir(onnx_path, str(folder / "toy.xml"), {"dtype": "fp32"}), onnx_path


@pytest.fixture(scope="module")
def shapes_exports(tmp_path_factory):
    """``{".onnx": path, ".xml": path}``: a toy export (see test_onnx_runtime.py) naming the
    embedded dataset's classes, and its IR."""
    folder = tmp_path_factory.mktemp("shapes_toy")
    onnx_path = write_export(folder / "toy.onnx", SHORT_SIDE, metadata={
        "zoo.class_names": json.dumps(list(embedded.CLASSES))})
    return {".onnx": onnx_path,
            ".xml": write_ir(onnx_path, str(folder / "toy.xml"), {"dtype": "fp32"})}


DATA_THREADS = 5
"""More than the default ever is (half the cores, at most 4)."""


@pytest.mark.parametrize("kind", ["artifact", ".onnx", ".xml"])
def test_data_threads_are_the_decoding_threads_of_every_checkpoint_kind(
        kind, detect_prefix, shapes_exports, shapes, tmp_path, monkeypatch):
    """``zoo eval --data-threads N`` and ``zoo detect --data-threads N`` decode the images
    on N threads whatever runs the checkpoint (MXNet, ONNX Runtime, OpenVINO), and
    ``zoo.open_detector`` takes them."""
    checkpoint = detect_prefix if kind == "artifact" else shapes_exports[kind]
    made = []
    init = BatchRunner.__init__

    def recorded(runner, *args, **kwargs):
        init(runner, *args, **kwargs)
        made.append(runner.workers)
    monkeypatch.setattr(BatchRunner, "__init__", recorded)
    assert zoo_main(["eval", "--checkpoint", checkpoint, "--data-root", shapes,
                     "--data-threads", str(DATA_THREADS), "--no-progress",
                     "--output", str(tmp_path / "eval.json")]) == 0
    assert made == [DATA_THREADS]
    image = os.path.join(shapes, "JPEGImages", sorted(os.listdir(
        os.path.join(shapes, "JPEGImages")))[0])
    assert zoo_main(["detect", "--checkpoint", checkpoint, image, "--no-pictures",
                     "--data-threads", str(DATA_THREADS), "--no-progress",
                     "--output", str(tmp_path / "detect")]) == 0
    assert made == [DATA_THREADS] * 2
    detector = zoo.open_detector(checkpoint, data_threads=DATA_THREADS)
    assert isinstance(detector, BatchDetector) and detector.runner.workers == DATA_THREADS
    assert zoo.open_detector(checkpoint).runner.workers < DATA_THREADS


@pytest.mark.parametrize("kind", [".onnx", ".xml"])
def test_open_detector_refuses_an_epoch_of_a_deployed_file(kind, shapes_exports):
    path = shapes_exports[kind]
    with pytest.raises(OptionsError, match=r"^epoch 3: %s is a deployed file, of one epoch; "
                                           r"give no epoch$" % re.escape(path)):
        zoo.open_detector(path, 3)


def test_the_ir_detects_what_onnx_runtime_detects(toy_ir):
    path, onnx_path = toy_ir
    images = [random_image(40, 70, seed=3), random_image(90, 30, seed=4)]
    expected = zoo.load_onnx_detector(onnx_path)(images, score_threshold=0.0)
    found = zoo.load_deployed_detector(path)(images, score_threshold=0.0)
    assert isinstance(zoo.load_deployed_detector(path), OpenVinoDetector)
    for theirs, ours in zip(expected, found):
        assert ours.names == theirs.names and sorted(ours.names) == sorted(NAMES)
        np.testing.assert_allclose(ours.scores, theirs.scores, atol=1e-6)
        np.testing.assert_allclose(ours.boxes, theirs.boxes, atol=1e-3)


def test_a_bad_ir_is_one_line_naming_the_file(toy_ir, tmp_path):
    path, onnx_path = toy_ir
    with pytest.raises(OnnxModelError, match="toy.onnx: not an OpenVINO IR"):
        OpenVinoDetector(onnx_path)
    lonely = tmp_path / "lonely.xml"
    lonely.write_bytes(open(path, "rb").read())
    with pytest.raises(OnnxModelError, match="lonely.bin: no such file"):
        OpenVinoDetector(str(lonely))
    import openvino
    plain = str(tmp_path / "plain.xml")
    openvino.save_model(openvino.convert_model(onnx_path), plain)  # no zoo metadata
    with pytest.raises(OnnxModelError, match="plain.xml: not a zoo export"):
        OpenVinoDetector(plain)


def test_an_ir_runs_where_mxnet_cannot_be_imported(toy_ir, tmp_path):
    image = tmp_path / "image.png"
    cv2.imwrite(str(image), random_image(40, 70))
    code = """
import sys
sys.modules["mxnet"] = None  # "import mxnet" raises ImportError
import zoo
found = zoo.load_openvino_detector(%r, threads=1)([%r], score_threshold=0.0)[0]
print(len(found), sorted(found.names))
print(sorted(name for name, module in sys.modules.items()
             if name.split(".")[0] == "mxnet" and module is not None))
""" % (toy_ir[0], str(image))
    env = dict(os.environ, PYTHONPATH=ROOT, OMP_NUM_THREADS="1")
    done = subprocess.run([sys.executable, "-c", code], cwd=str(tmp_path), env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.splitlines() == ["3 %s" % sorted(NAMES), "[]"]


def test_a_signal_after_detectors_come_and_go_is_handled(toy_ir, tmp_path):
    """OpenVINO's CPU plugin gives the thread that compiles an alternate signal stack per
    Core, and puts back the one it found when that Core goes. Detectors dropped in the order
    they came must not leave the thread on a freed stack, where the next signal (Ctrl-C,
    SIGTERM) would kill the process with SIGSEGV and no traceback."""
    code = """
import gc, os, signal
import zoo
first = zoo.load_deployed_detector(%r, threads=1)
second = zoo.load_deployed_detector(%r, threads=1)
del first
gc.collect()
del second
gc.collect()
signal.signal(signal.SIGINT, lambda number, frame: print("handled", flush=True))
os.kill(os.getpid(), signal.SIGINT)
print("went on")
""" % (toy_ir[0], toy_ir[0])
    env = dict(os.environ, PYTHONPATH=ROOT, OMP_NUM_THREADS="1")
    done = subprocess.run([sys.executable, "-c", code], cwd=str(tmp_path), env=env,
                          capture_output=True, text=True, timeout=300)
    assert (done.returncode, done.stdout.split()) == (0, ["handled", "went", "on"]), \
        done.stderr[-2000:]


@pytest.mark.parametrize("flags,expected", [
    (["--format", "onnx", "--int8"], "int8 is calibrated into an OpenVINO model: it needs "
                                     "format openvino (zoo quantize makes an MXNet int8 "
                                     "artifact)"),
    (["--format", "openvino", "--int8"], "int8 calibrates on images: give data_root (and "
                                         "dataset, split), or a COCO split's annotations and "
                                         "image_dir"),
    (["--format", "openvino", "--data-root", "."], "data_root .: only int8 calibrates on a "
                                                   "dataset; add int8 or leave data_root out"),
    (["--format", "openvino", "--annotations", "a.json"], "annotations a.json: only int8 "
                                                          "calibrates on a dataset; add int8 "
                                                          "or leave annotations out"),
    (["--format", "openvino", "--int8", "--data-root", ".", "--annotations", "a.json"],
     "--annotations and --image-dir are for --dataset coco, not 'voc'"),
])
def test_int8_export_flags_are_checked_in_one_line(flags, expected, tmp_path, capsys):
    code = zoo_main(["export", "--network", "ssd_mobilenetv2", "--output",
                     str(tmp_path / "m")] + flags)
    assert (code, capsys.readouterr().err.strip()) == (1, "zoo export: error: " + expected)
    assert not os.listdir(tmp_path)


@pytest.mark.slow  # 10-30 s: in `make test-slow`, to keep `make test` within its 12 minutes
def test_benchmark_compare_all_times_every_deployment_and_names_the_fastest(monkeypatch):
    monkeypatch.setattr(benchmark_job, "gluoncv_names", lambda network: ())
    monkeypatch.setattr(benchmark_job, "matmul_peak_gflops", lambda: 100.0)  # seconds each
    monkeypatch.setattr(benchmark_job, "int8_matmul_peak_gops", lambda: 400.0)
    lines = []
    result = benchmark(BenchmarkOptions(network="ssd_mobilenetv2", data_shape=192, runs=1,
                                        warmup=0, compare="all"), log=lines.append)
    sides = [m.subject.split(":")[0] for m in result.measurements]
    assert sides == ["ours fp32", "onnxruntime fp32", "openvino fp32", "openvino int8"]
    assert result.int8_peak_gops == 400.0  # an int8 subject among them
    (fastest,) = result.fastest
    assert fastest.images_per_s == max(m.images_per_s for m in result.measurements)
    assert lines[-1].startswith("fastest at batch 1 on this machine: " + fastest.subject)
