"""The batch runner's default batch size (a megapixel of network input, 1 to 8 images), seen
as users run it: ``zoo detect`` with default flags and a detector called on a list of photos;
and executors of several input shapes sharing one memory pool without their detections
changing."""

import cv2
import numpy as np
import pytest

import zoo
from zoo.cli import main
from zoo.inference import runner
from zoo.inference.runner import BatchRunner

from factories import smooth_image, unit_variance_params

CLASSES = ["bird", "cat", "dog"]
SIZES = [(300, 400), (400, 300), (300, 400), (411, 233), (233, 411)]
"""(height, width) of the photos: both orientations, odd sizes, so several input shapes."""


@pytest.fixture(scope="module")
def photo_paths(tmp_path_factory):
    folder = tmp_path_factory.mktemp("photos")
    paths = []
    for index, (height, width) in enumerate(SIZES):
        paths.append(str(folder / ("photo%d.jpg" % index)))
        cv2.imwrite(paths[-1], smooth_image(height, width, index, 12, cv2.INTER_CUBIC))
    return paths


@pytest.fixture
def batch_sizes(monkeypatch):
    """The number of images of every batch the runner runs, as they run."""
    sizes = []
    batches = BatchRunner.batches

    def recorded(self, source, batch_size=None):
        for batch in batches(self, source, batch_size):
            sizes.append(len(batch.indices))
            yield batch
    monkeypatch.setattr(BatchRunner, "batches", recorded)
    return sizes


@pytest.mark.parametrize("pixels, most", [(192 * 192, 8), (512 * 512, 4), (600 * 1000, 1),
                                          (320 * 533, 6), (2000 * 2000, 1)])
def test_a_default_batch_holds_a_megapixel_of_input(pixels, most):
    """Whatever the input's size, a default batch holds about a megapixel: the batch size
    times the input's pixels stays within it, and one image more would not."""
    assert runner.default_batch_size({"resize": "short_side", "short_side": pixels,
                                      "max_size": 1}) == most
    assert most == runner.MAX_BATCH or (most + 1) * pixels > runner.BATCH_PIXELS
    assert most == 1 or most * pixels <= runner.BATCH_PIXELS


def test_zoo_detect_runs_a_large_faster_rcnn_one_photo_a_batch(tmp_path, photo_paths,
                                                                 batch_sizes, capsys):
    """``zoo detect`` with default flags on a Faster R-CNN exported to run at 600x1000:
    batches of one photo (8 before, which held 4 GB for an FPN ResNet-50 over phone photos),
    and ``--batch-size`` still chooses."""
    prefix = str(tmp_path / "rcnn")
    assert main(["export", "--network", "faster_rcnn_mobilenetv2", "--data-shape", "600",
                 "--max-size", "1000", "--output", prefix]) == 0
    # three photos of both orientations (each 600x1000 forward costs about a second)
    assert main(["detect", "--checkpoint", prefix, *photo_paths[:2], photo_paths[3],
                 "--output", str(tmp_path / "out")]) == 0
    assert batch_sizes == [1] * 3
    del batch_sizes[:]
    assert main(["detect", "--checkpoint", prefix, photo_paths[0], photo_paths[2],
                 "--output", str(tmp_path / "out2"), "--batch-size", "2"]) == 0
    assert batch_sizes == [2]
    capsys.readouterr()


def test_a_small_ssd_detector_batches_eight(tmp_path, photo_paths, batch_sizes, detect_prefix):
    """A detector called on a list from Python batches by the same default: 8 photos of a
    small SSD's input in one batch."""
    detector = zoo.open_detector(detect_prefix)
    found = detector(photo_paths * 2)
    assert len(found) == 2 * len(SIZES)
    assert batch_sizes == [8, 2]


def test_executors_of_several_shapes_share_memory_and_detect_as_alone(photo_paths):
    """One detector over photos of three input shapes (its executors sharing one pool) finds
    what a fresh detector finds on each photo alone, bit for bit."""
    model = zoo.get_model("faster_rcnn_fpn_mobilenetv2", num_classes=len(CLASSES),
                          class_names=CLASSES, data_shape=96, max_size=160,
                          rpn_pre_nms_top_n_test=200, rpn_post_nms_top_n_test=20)
    model.arg_params, model.aux_params = unit_variance_params(model, 0, class_scale=8.0,
                                                              damp_residuals=False)
    shared = zoo.Detector.from_model(model)
    together = [shared(path, score_threshold=0.0) for path in photo_paths + photo_paths[::-1]]
    assert len(shared.predictor._executors) >= 3
    alone = {path: zoo.Detector.from_model(model)(path, score_threshold=0.0)
             for path in photo_paths}
    for path, found in zip(photo_paths + photo_paths[::-1], together):
        assert len(found) > 0
        np.testing.assert_array_equal(found.boxes, alone[path].boxes, err_msg=path)
        np.testing.assert_array_equal(found.scores, alone[path].scores, err_msg=path)
