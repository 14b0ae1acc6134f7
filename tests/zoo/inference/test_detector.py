"""The Detector API: images in, labelled boxes in the input's pixels out."""
import json
import os
import threading
import time

import cv2
import mxnet as mx
import numpy as np
import pytest
from pycocotools.coco import COCO

import zoo
from zoo import artifact
from zoo.data import VOCDataset, inference_transform
from zoo.predictor import Predictor, mkldnn_available
from zoo.inference.detector import Detections, Detector, write_coco_results
from zoo_bench.detector import (CachedRows, DetectorBenchmarkOptions, added_cpu_seconds,
                                benchmark_detector, report, without_inference)
from zoo.inference.evaluation import dataset_rows
from zoo.inference.quantization import calibration_iter, int8_layers, quantize
from zoo.inference.runner import BatchRunner, EncodedImage
from zoo.inference.visualize import draw, draw_detections
from conftest import runner_inputs
from factories import random_image

NAMES = ["circle", "square", "triangle"]
ALL = dict(score_threshold=0.0, max_detections=10000)


@pytest.fixture(scope="module")
def ssd():
    model = zoo.get_model("ssd_mobilenetv2_stride8", data_shape=128, num_classes=3,
                          class_names=NAMES)
    model.init_params(seed=0)
    return model


def graph_rows(detector, image):
    """The graph's own output rows for ``image``, run by a separate Predictor."""
    model = detector.model
    (data, im_info), = runner_inputs([image], model.preprocessing())
    predictor = Predictor(detector.predictor.symbol, model.arg_params, model.aux_params)
    rows = predictor(**model.input_arrays(data, im_info))[0].asnumpy()[0]
    return rows[rows[:, 0] >= 0]


def as_rows(found):
    """Detections as rows ``[label, score, x1, y1, x2, y2]`` in a canonical order."""
    rows = np.column_stack([found.labels, found.scores, found.boxes]).astype(np.float64)
    return rows[np.lexsort(rows.T[::-1])]


@pytest.mark.parametrize("name", ["ssd", "faster_rcnn"])
def test_boxes_are_the_graphs_rows_in_the_images_pixels(name, request):
    model = request.getfixturevalue(name)
    detector = Detector.from_model(model)
    image = random_image(90, 150)
    found = detector(image, **ALL)
    assert isinstance(found, Detections)
    assert found.boxes.dtype == np.float32 and found.boxes.shape == (len(found), 4)
    assert found.scores.dtype == np.float32 and found.labels.dtype == np.int64
    assert np.all(np.diff(found.scores) <= 0), "highest score first"
    expected = graph_rows(detector, image)
    expected[:, 2:6] *= [150, 90, 150, 90]
    assert len(found) == len(expected) > 0
    np.testing.assert_allclose(as_rows(found), expected[np.lexsort(expected.T[::-1])],
                               rtol=1e-6, atol=1e-4)
    names = model.config["class_names"] or ["0", "1", "2"]
    assert found.names == [names[label] for label in found.labels]


def test_gray_rgba_and_path_inputs_are_the_rgb_image(ssd, tmp_path):
    detector = Detector.from_model(ssd)
    gray = random_image(70, 90)[:, :, 0]
    rgb = np.dstack([gray] * 3)
    path = tmp_path / "image.png"
    cv2.imwrite(str(path), cv2.cvtColor(rgb, cv2.COLOR_RGB2BGR))  # PNG: lossless
    alpha = np.full_like(gray, 7)
    expected = as_rows(detector(rgb, **ALL))
    encoded = EncodedImage(path.read_bytes(), "upload.png")  # an HTTP upload's bytes
    for image in (gray, np.dstack([rgb, alpha]), path, str(path), encoded):
        assert np.array_equal(as_rows(detector(image, **ALL)), expected)
    found = detector((gray, str(path)), **ALL)
    assert isinstance(found, list) and len(found) == 2
    assert all(np.array_equal(as_rows(f), expected) for f in found)
    assert detector([]) == []


@pytest.mark.parametrize("bad, expected", [
    (random_image(20, 20).astype(np.float32), "float32 array of shape (20, 20, 3)"),
    (random_image(20, 20)[:, :, :2], "uint8 array of shape (20, 20, 2)"),
    (np.zeros((0, 20, 3), np.uint8), "shape (0, 20, 3)"),
    (random_image(20, 20)[None], "shape (1, 20, 20, 3)"),
    ("missing.jpg", "missing.jpg: cannot read image"),
    (EncodedImage(b"\xff\xd8 cut", "upload.jpg"), "upload.jpg: truncated JPEG"),
    ([[1, 2], [3, 4]], "got list"),
])
def test_a_bad_input_is_one_line_naming_its_index(ssd, bad, expected):
    with pytest.raises(ValueError) as caught:
        Detector.from_model(ssd)([random_image(20, 20), random_image(30, 20), bad], batch_size=2)
    message = str(caught.value)
    assert message.startswith("image 2: ") and expected in message and "\n" not in message
    assert isinstance(caught.value, zoo.DataError)


def test_batches_give_what_single_images_give(ssd):
    detector = Detector.from_model(ssd)
    images = [random_image(40 + 10 * i, 60 + 7 * i, seed=i) for i in range(5)]
    one_by_one = [detector(image, **ALL) for image in images]
    batched = detector(images, batch_size=2, **ALL)
    assert len(batched) == len(images), "the padding of the last batch is dropped"
    for single, in_batch in zip(one_by_one, batched):
        np.testing.assert_allclose(as_rows(in_batch), as_rows(single), rtol=1e-5, atol=1e-3)


def test_one_executor_per_input_shape_bound_once(ssd, monkeypatch):
    detector = Detector(ssd, ssd.arg_params, ssd.aux_params)
    bound = []
    original = mx.sym.Symbol.bind

    def counting_bind(symbol, ctx, args, *rest, **options):
        bound.append(args["data"].shape)
        return original(symbol, ctx, args, *rest, **options)

    monkeypatch.setattr(mx.sym.Symbol, "bind", counting_bind)
    images = [random_image(30, 40, seed=i) for i in range(5)]
    detector(images, batch_size=2)
    assert bound == [(2, 3, 128, 128)], "the padded last batch reuses the executor"
    detector(images, batch_size=2)
    detector(images[:2], batch_size=2)
    assert len(bound) == 1, "a second call binds nothing new"
    detector(images[0])
    assert bound[1:] == [(1, 3, 128, 128)]


def test_images_no_worker_has_started_are_prepared_by_the_caller(ssd, monkeypatch):
    detector = Detector.from_model(ssd)
    preparers = []
    prepare = detector.runner.prepare

    def slow_in_workers(*arguments):
        preparers.append(threading.current_thread() is threading.main_thread())
        if not preparers[-1]:
            time.sleep(0.3)  # a worker starved by a busy machine
        return prepare(*arguments)

    monkeypatch.setattr(detector.runner, "prepare", slow_in_workers)
    images = [random_image(30, 40, seed=i) for i in range(6)]
    found = detector(images, batch_size=3, **ALL)
    assert any(preparers) and len(preparers) == len(images)
    expected = Detector.from_model(ssd)(images, batch_size=3, **ALL)
    assert all(np.array_equal(as_rows(a), as_rows(b)) for a, b in zip(found, expected))


def test_score_threshold_and_max_detections(ssd):
    detector = Detector.from_model(ssd)
    image = random_image(64, 64)
    every = detector(image, **ALL)
    threshold = float(np.median(every.scores))
    above = detector(image, score_threshold=threshold, max_detections=10000)
    assert len(above) == int((every.scores >= threshold).sum()) < len(every)
    assert above.scores.min() >= threshold
    best = detector(image, score_threshold=0.0, max_detections=5)
    assert len(best) == 5 and len(str(best).splitlines()) == 5
    np.testing.assert_array_equal(best.scores, every.scores[:5])
    assert len(detector(image, max_detections=0)) == 0


def test_detector_defaults_to_numbered_class_names(faster_rcnn):
    found = Detector.from_model(faster_rcnn)(random_image(50, 50), **ALL)
    assert set(found.names) <= {"0", "1", "2"} and len(found) > 0


@pytest.fixture(scope="module")
def int8(ssd):
    """``(symbol, arg_params, aux_params)`` of the tiny SSD quantized to int8."""
    if not mkldnn_available():
        pytest.skip("int8 needs MXNet with MKL-DNN")
    calib = mx.io.NDArrayIter({"data": mx.nd.random.uniform(-2, 2, (4, 3, 128, 128))},
                              batch_size=2)
    return quantize(ssd.symbol(), ssd.arg_params, ssd.aux_params, calib, "naive")


def test_an_int8_graph_runs_in_int8(ssd, int8):
    symbol, args, aux = int8
    detector = Detector(ssd, args, aux, symbol=symbol)
    assert detector.predictor.symbol is symbol and int8_layers(symbol)
    image = random_image(50, 70)
    transform = inference_transform(ssd.preprocessing())
    data = transform(image, np.zeros((0, 6), np.float32))[0][None]
    expected = Predictor(symbol, args, aux)(data=data)[0].asnumpy()[0]
    expected = expected[expected[:, 0] >= 0]
    expected[:, 2:6] *= [70, 50, 70, 50]
    np.testing.assert_allclose(as_rows(detector(image, **ALL)),
                               expected[np.lexsort(expected.T[::-1])], rtol=1e-6, atol=1e-4)


def test_load_detector_runs_the_artifacts_graph(ssd, tmp_path):
    prefix = str(tmp_path / "ssd")
    artifact.export(ssd, prefix)
    loaded = zoo.load_detector(prefix)
    assert loaded.class_names == NAMES
    image = random_image(60, 80)
    np.testing.assert_allclose(as_rows(loaded(image, **ALL)),
                               as_rows(Detector.from_model(ssd)(image, **ALL)),
                               rtol=1e-6, atol=1e-4)


def test_an_int8_artifact_runs_in_int8(ssd, int8, tmp_path):
    symbol, args, aux = int8
    prefix = str(tmp_path / "ssd-int8")
    zoo.artifact.save(prefix, 0, ssd, args, aux, symbol=symbol,
                      precision={"dtype": "int8", "calibration": {"mode": "naive"}})
    loaded = zoo.load_detector(prefix)
    assert int8_layers(loaded.predictor.symbol)
    image = random_image(60, 80)
    np.testing.assert_array_equal(
        as_rows(loaded(image, **ALL)),
        as_rows(Detector(ssd, args, aux, symbol=symbol)(image, **ALL)))


def test_coco_results_load_in_pycocotools(ssd, tmp_path):
    detector = Detector.from_model(ssd)
    images = [random_image(40, 60), random_image(50, 30, seed=1)]
    found = detector(images, max_detections=5, score_threshold=0.0)
    path = write_coco_results(str(tmp_path / "results.json"), zip([7, 9], found),
                              category_ids=[10, 20, 30])
    ground_truth = COCO()
    ground_truth.dataset = {
        "images": [{"id": 7, "width": 60, "height": 40}, {"id": 9, "width": 30, "height": 50}],
        "categories": [{"id": i, "name": n} for i, n in zip([10, 20, 30], NAMES)],
        "annotations": []}
    ground_truth.createIndex()
    results = ground_truth.loadRes(path)
    annotations = results.loadAnns(results.getAnnIds(imgIds=[9]))
    assert len(annotations) == len(found[1]) == 5
    first = annotations[0]
    x1, y1, x2, y2 = found[1].boxes[0]
    np.testing.assert_allclose(first["bbox"], [x1, y1, x2 - x1, y2 - y1], rtol=1e-6)
    assert first["category_id"] == [10, 20, 30][found[1].labels[0]]
    assert first["score"] == pytest.approx(float(found[1].scores[0]))


def test_draw_marks_the_boxes_as_draw_detections_does(ssd):
    image = random_image(80, 120)
    found = Detector.from_model(ssd)(image, score_threshold=0.0, max_detections=3)
    drawn = draw(image, found)
    assert drawn.shape == image.shape and not np.array_equal(drawn, image)
    rows = np.column_stack([found.labels, found.scores,
                            found.boxes / np.array([120, 80, 120, 80], np.float32)])
    assert np.array_equal(draw_detections(image, rows, NAMES, score_threshold=0.0), drawn)
    assert draw(image[:, :, 0], found).shape == image.shape, "gray images are drawn in RGB"


def test_benchmark_returns_both_speeds(tmp_path):
    result = benchmark_detector(DetectorBenchmarkOptions(
        data_shape=128, num_images=3, image_size=64, batch_size=2, runs=1,
        work_dir=str(tmp_path)))
    assert result["num_images"] == 3 and result["batch_size"] == 2
    assert result["detector_images_per_s"] > 0 and result["inference_images_per_s"] > 0
    assert result["ratio"] == pytest.approx(
        result["detector_images_per_s"] / result["inference_images_per_s"])
    assert result["detect_job_ratio"] == pytest.approx(
        result["detect_job_images_per_s"] / result["inference_images_per_s"])
    with open(os.path.join(str(tmp_path), "detect", "results.json")) as handle:
        assert len(json.load(handle)["images"]) == 3, "the zoo detect job ran on the images"
    detector_cpu, job_cpu = result["added_ms"]
    assert 0 < detector_cpu < job_cpu, "the job adds pictures and JSON to the Detector's work"
    cores = result["cores"]
    all_cores, one_core = result["ceilings"][cores], result["ceilings"][1]
    per_image = 1 / result["inference_images_per_s"]
    assert one_core[0] == pytest.approx(per_image / (per_image + detector_cpu / 1000))
    assert all(0 < one <= every < 1 for one, every in zip(one_core, all_cores))
    lines = report(result).splitlines()
    assert lines[-3].startswith("  CPU added to inference per image: %.2f ms" % detector_cpu)
    assert "on %d core(s): %.3f" % (cores, all_cores[0]) in lines[-2]


def test_the_cpu_added_to_inference_leaves_the_graph_out(ssd, tmp_path):
    """The added work is measured with the graph's passes replaced by rows it computed once:
    the Detector's results stay the same, and the runner's own engine is back afterwards."""
    detector = Detector.from_model(ssd)
    paths = [str(tmp_path / ("%d.png" % k)) for k in range(3)]
    for path in paths:
        cv2.imwrite(path, random_image(40, 60))
    calls = []
    launch = detector.runner.engine.launch
    detector.runner.engine.launch = lambda *a: calls.append(1) or launch(*a)
    expected = detector(paths, batch_size=3, **ALL)
    calls.clear()
    spent, = added_cpu_seconds(detector, 2, lambda: detector(paths, batch_size=3, **ALL))
    assert spent > 0 and calls == [1], "one pass fills the cache, the timed calls run none"
    assert not isinstance(detector.runner.engine, CachedRows)
    with without_inference(detector):
        found = detector(paths, batch_size=3, **ALL)
    for before, after in zip(expected, found):
        np.testing.assert_array_equal(before.boxes, after.boxes)


def test_evaluation_detection_and_calibration_go_through_the_one_batch_runner(ssd, shapes,
                                                                               monkeypatch):
    """One runner prepares and runs every batch: the Detector's images, an evaluation's and a
    calibration's dataset; a Detector finds the same boxes on a dataset's images as on their
    files."""
    sources = []
    batches = BatchRunner.batches

    def recorded(runner, source, batch_size):
        sources.append(type(source).__name__)
        return batches(runner, source, batch_size)

    monkeypatch.setattr(BatchRunner, "batches", recorded)
    dataset = VOCDataset(shapes, "val")
    paths = [dataset.image_path(index) for index in range(len(dataset))]
    found = Detector.from_model(ssd)(paths, batch_size=3, **ALL)
    rows = dataset_rows(Detector.from_model(ssd), dataset, batch_size=2, progress=False)
    calibration_iter(ssd, dataset, batch_size=2, num_batches=1)
    assert sources == ["ImageList", "DatasetImages", "DatasetImages"]
    for detections, image_rows, record in zip(found, rows, dataset.records):
        image_rows = image_rows.astype(np.float64)
        image_rows[:, 2:6] *= [record.width, record.height] * 2
        np.testing.assert_allclose(as_rows(detections), image_rows[np.lexsort(image_rows.T[::-1])],
                                   rtol=1e-5, atol=1e-3)


def test_benchmark_sweep_times_each_batch_size_on_mixed_orientations(tmp_path, capsys):
    from zoo.cli import main
    # An SSD keeps the test fast; a Faster R-CNN goes through the same code.
    assert main(["benchmark-detector", "--network", "ssd_mobilenetv2_stride8", "--data-shape",
                 "128", "--mixed-orientations", "--num-images", "4", "--image-size", "96",
                 "--runs", "1", "--batch-sizes", "1,2", "--work-dir", str(tmp_path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("ssd_mobilenetv2_stride8 at 128 pixels, 4 images")
    assert [line.split(":")[0].strip() for line in lines[1:]] == ["batch   1", "batch   2"]
    shapes = {cv2.imread(str(path)).shape[:2] for path in (tmp_path / "mixed").iterdir()}
    assert any(h > w for h, w in shapes) and any(w > h for h, w in shapes)


@pytest.mark.slow
def test_benchmark_busy_times_the_detect_command_quiet_and_beside_busy_processes(tmp_path,
                                                                                capsys):
    """Three ``zoo detect`` processes (a warm-up, quiet, busy) and one busy loop: slow."""
    from zoo.cli import main
    assert main(["benchmark-detector", "--network", "ssd_mobilenetv2_stride8", "--data-shape",
                 "128", "--num-images", "2", "--image-size", "64", "--runs", "1", "--busy", "1",
                 "--work-dir", str(tmp_path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[1].startswith("zoo detect (ssd_mobilenetv2_stride8, 2 images, a process on "
                               "cores ")
    quiet = float(lines[2].split(":")[1].split()[0])
    busy = float(lines[3].split(":")[1].split()[0])
    assert lines[4].startswith("  ratio: ") and lines[4].endswith(
        "x its quiet time (target about 3x, at most 6x)")
    assert float(lines[4].split()[1].rstrip("x")) == pytest.approx(busy / quiet, abs=0.02)
    with open(str(tmp_path / "busy" / "detect" / "results.json")) as stream:
        assert len(json.load(stream)["images"]) == 2
