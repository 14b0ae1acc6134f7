"""Detections do not depend on batching: for every architecture (SSD, Faster R-CNN C4, FPN),
on mixed portrait and landscape images of odd sizes, ``zoo.Detector`` at batch 1, 2 and 8 and
evaluation (:func:`zoo.inference.evaluation.dataset_rows`) on a VOC folder of the same images at
batch 1, 2 and 8 give the same detections, to float tolerance."""
import os

import cv2
import numpy as np
import pytest

import zoo
from zoo.data.voc import VOCDataset, annotation_xml
from zoo.inference.evaluation import dataset_rows

from factories import smooth_image, unit_variance_params

CLASSES = ["bird", "cat", "dog"]
SIZES = [(97, 143), (143, 97), (120, 161), (161, 120), (101, 101), (88, 150), (150, 88),
         (77, 131), (131, 77)]
"""(height, width) of the images: landscape and portrait alternating, odd sides, one square."""
BATCH_SIZES = (1, 2, 8)
MODELS = {
    "ssd": ("ssd_mobilenetv2_stride8", {"data_shape": 128}),
    "c4": ("faster_rcnn_mobilenetv2", {"data_shape": 96, "max_size": 160}),
    "fpn": ("faster_rcnn_fpn_mobilenetv2", {"data_shape": 96, "max_size": 160}),
}
FEW_PROPOSALS = {"rpn_pre_nms_top_n_test": 200, "rpn_post_nms_top_n_test": 20}
"""Faster R-CNN: few proposals per image keep the ROI heads (most of the time) small."""
CLASS_LOGIT_SCALE = 8.0
"""Class-score weights this much larger than unit variance: scores spread over (0, 1), so that
detections are not near-ties that float rounding may reorder."""
BLOCK = 12
"""The images' random blocks (pixels), enlarged smoothly (bicubic)."""


@pytest.fixture(scope="module")
def voc(tmp_path_factory):
    """A VOC folder of the :data:`SIZES` images (split ``val``), one object each."""
    root = str(tmp_path_factory.mktemp("voc"))
    for folder in ("JPEGImages", "Annotations", os.path.join("ImageSets", "Main")):
        os.makedirs(os.path.join(root, folder))
    ids = ["img%02d" % index for index in range(len(SIZES))]
    for index, (image_id, (height, width)) in enumerate(zip(ids, SIZES)):
        cv2.imwrite(os.path.join(root, "JPEGImages", image_id + ".jpg"),
                    smooth_image(height, width, index, BLOCK, cv2.INTER_CUBIC))
        box = (width // 4, height // 4, width // 2, height // 2)
        with open(os.path.join(root, "Annotations", image_id + ".xml"), "w") as handle:
            handle.write(annotation_xml(image_id + ".jpg", width, height,
                                        [(CLASSES[index % 3], box, False)]))
    with open(os.path.join(root, "ImageSets", "Main", "val.txt"), "w") as handle:
        handle.write("\n".join(ids) + "\n")
    return root


def canonical(rows):
    """Rows ``[label, score, x1, y1, x2, y2]`` in one order: by score, then the rest."""
    rows = np.asarray(rows, np.float64).reshape(-1, 6)
    return rows[np.lexsort(rows.T[::-1])]


def detector_rows(found):
    return canonical(np.column_stack([found.labels, found.scores, found.boxes]))


@pytest.mark.parametrize("architecture", sorted(MODELS))
def test_detection_and_evaluation_agree_at_every_batch_size(architecture, voc):
    name, overrides = MODELS[architecture]
    if architecture != "ssd":
        overrides = dict(overrides, **FEW_PROPOSALS)
    model = zoo.get_model(name, num_classes=len(CLASSES), class_names=CLASSES, **overrides)
    model.arg_params, model.aux_params = unit_variance_params(
        model, 0, class_scale=CLASS_LOGIT_SCALE, damp_residuals=False)
    dataset = VOCDataset(voc, "val")
    paths = [os.path.join(voc, "JPEGImages", "img%02d.jpg" % i) for i in range(len(SIZES))]
    detector = zoo.Detector.from_model(model)
    reference = None
    for batch_size in BATCH_SIZES:
        found = detector(paths, score_threshold=0.0, max_detections=10000,
                         batch_size=batch_size)
        evaluated = dataset_rows(detector, dataset, batch_size, progress=False)
        assert len(found) == len(evaluated) == len(SIZES)
        for image, (height, width), ours, rows in zip(paths, SIZES, found, evaluated):
            rows = rows.copy()
            rows[:, 2:6] *= [width, height, width, height]
            assert len(ours) == len(rows) > 0, (image, batch_size)
            np.testing.assert_allclose(detector_rows(ours), canonical(rows), rtol=1e-4,
                                       atol=2e-3, err_msg="%s at batch %d" % (image, batch_size))
        if reference is None:
            reference = [detector_rows(ours) for ours in found]
            assert len({round(float(s), 4) for ours in found for s in ours.scores}) > 10, \
                "scores do not spread"
            continue
        for image, ours, first in zip(paths, found, reference):
            np.testing.assert_allclose(detector_rows(ours), first, rtol=1e-4, atol=2e-3,
                                       err_msg="%s: batch %d against batch 1"
                                       % (image, batch_size))
