"""Aspect-preserving inputs of Faster R-CNN: short-side resize, batch canvases, im_info."""
import json

import cv2
import mxnet as mx
import numpy as np
import pytest

import zoo
from zoo import artifact
from zoo.data import (DetectionDataset, DetectionLoader, Record, ShortSideTrainTransform,
                      ShortSideValTransform, ValTransform, inference_transform,
                      train_transform)
from zoo.data.transforms import NO_LABEL, normalise
from zoo.predictor import Predictor
from zoo.inference.detector import Detector
from zoo.engine.hooks import Hook
from zoo.engine.trainer import OptimizerOptions, Trainer, TrainerOptions
from zoo.schema.preprocessing import canvas_size, scaled_size
from conftest import runner_inputs
from factories import random_image

SHORT, LONGEST, DIVISOR = 60, 120, 16
LANDSCAPE, PORTRAIT = (90, 150), (150, 90)  # (height, width)
ALL = dict(score_threshold=0.0, max_detections=10000)


def test_scaled_size_fits_the_short_side_unless_the_long_side_passes_max_size():
    assert scaled_size(375, 500, 600, 1000) == (600, 800, 1.6)
    assert scaled_size(500, 375, 600, 1000) == (800, 600, 1.6)
    height, width, scale = scaled_size(300, 900, 600, 1000)  # 2x would make it 1800 long
    assert (height, width) == (333, 1000) and scale == pytest.approx(1000 / 900)
    assert scaled_size(10, 5000, 600, 1000)[:2] == (2, 1000)
    assert scaled_size(1, 5000, 600, 1000)[0] == 1, "a side never vanishes"


def test_canvas_size_rounds_the_largest_sides_up_to_the_divisor():
    assert canvas_size([(600, 800), (800, 600)], 16) == (800, 800)
    assert canvas_size([(333, 1000)], 32) == (352, 1024)
    assert canvas_size([(64, 48), (17, 50)], 16) == (64, 64)


def boxed_image(height, width, seed=0):
    """A random image and a label with one box at a known place."""
    label = np.array([[1, 0.1 * width, 0.2 * height, 0.5 * width, 0.9 * height, 0]],
                     np.float32)
    return random_image(height, width, seed), label


@pytest.mark.parametrize("shape", [LANDSCAPE, PORTRAIT, (40, 200)])
def test_short_side_transform_keeps_the_aspect_and_normalises_boxes(shape):
    image, label = boxed_image(*shape)
    data, out, scale = ShortSideValTransform(SHORT, LONGEST, DIVISOR)(image, label)
    expected_height, expected_width, expected_scale = scaled_size(*shape, SHORT, LONGEST)
    assert data.shape == (3, expected_height, expected_width) and data.dtype == np.float32
    assert min(data.shape[1:]) == SHORT or max(data.shape[1:]) == LONGEST
    assert scale == expected_scale
    np.testing.assert_allclose(out, [[1, 0.1, 0.2, 0.5, 0.9, 0]], atol=1e-6)


def test_short_side_training_flips_the_whole_image_and_its_boxes():
    image, label = boxed_image(*LANDSCAPE)
    plain, _, scale = ShortSideValTransform(SHORT, LONGEST, DIVISOR)(image, label)
    flipping = ShortSideTrainTransform(SHORT, LONGEST, DIVISOR, colour=False)
    outputs = [flipping(image, label, np.random.RandomState(seed)) for seed in range(8)]
    flipped = [output for output in outputs if not np.array_equal(output[0], plain)]
    assert 0 < len(flipped) < len(outputs)
    data, out, flipped_scale = flipped[0]
    assert flipped_scale == scale
    # the same bilinear weights mirrored: equal up to one uint8 step of rounding
    np.testing.assert_allclose(data, plain[:, :, ::-1], atol=1.01 / 57)
    np.testing.assert_allclose(out, [[1, 0.5, 0.2, 0.9, 0.9, 0]], atol=1e-6)


def test_transforms_follow_the_preprocessing_dict():
    stretched = zoo.get_model("ssd_mobilenetv2_stride8", data_shape=128, num_classes=3)
    assert stretched.preprocessing()["resize"] == "stretch"
    assert type(inference_transform(stretched.preprocessing())) is ValTransform
    faster = zoo.get_model("faster_rcnn_mobilenetv2", data_shape=128, max_size=224,
                           num_classes=3)
    preprocessing = faster.preprocessing()
    assert preprocessing["resize"] == "short_side"
    assert preprocessing["data_shape"] == [128, 224] and preprocessing["max_size"] == 224
    assert isinstance(train_transform(preprocessing), ShortSideTrainTransform)
    old_artifact = dict(preprocessing, resize="stretch", data_shape=[128, 128])
    (data, im_info), = runner_inputs([random_image(*LANDSCAPE)], old_artifact)
    assert data.shape == (1, 3, 128, 128) and im_info is None, "stretched as it was trained"



def test_an_interpolation_field_resizes_inference_inputs_but_not_training():
    """GluonCV's Faster R-CNN resizes with OpenCV's bilinear resize: the config field carries
    it into the preprocessing, whose inference transform keeps the aspect and resizes so."""
    model = zoo.get_model("faster_rcnn_mobilenetv2", data_shape=SHORT, max_size=LONGEST,
                          num_classes=3, interpolation="bilinear")
    preprocessing = model.preprocessing()
    assert preprocessing["interpolation"] == "bilinear"
    image, label = boxed_image(*LANDSCAPE)
    data, out, scale = inference_transform(preprocessing)(image, label)
    height, width, _ = scaled_size(*LANDSCAPE, SHORT, LONGEST)
    resized = cv2.resize(image, (width, height), interpolation=cv2.INTER_LINEAR)
    np.testing.assert_array_equal(data, normalise(resized, preprocessing["mean"],
                                                  preprocessing["std"]))
    np.testing.assert_allclose(out, [[1, 0.1, 0.2, 0.5, 0.9, 0]], atol=1e-6)
    assert train_transform(preprocessing).interpolation == "warp"
    assert "interpolation" not in zoo.get_model("faster_rcnn_mobilenetv2").preprocessing()


class ImageList(DetectionDataset):
    """Images of the given ``(height, width)`` shapes, one box each."""

    def __init__(self, shapes):
        self.items = [boxed_image(*shape, seed=index) for index, shape in enumerate(shapes)]
        records = [Record(None, shape[1], shape[0], label[:, 1:5], label[:, 0].astype(int),
                          label[:, 5].astype(int), key=index)
                   for index, (shape, (_, label)) in enumerate(zip(shapes, self.items))]
        super().__init__(records, ("a", "b"))

    def __getitem__(self, index):
        return self.items[index]


def test_loader_pads_mixed_orientations_onto_one_canvas():
    dataset = ImageList([LANDSCAPE, PORTRAIT, (100, 100)])
    transform = ShortSideValTransform(SHORT, LONGEST, DIVISOR)
    loader = DetectionLoader(dataset, 2, transform, shuffle=False, last_batch="pad")
    first, last = list(loader.epoch(0))
    alone = [transform(*dataset[index]) for index in range(3)]
    assert first.data.shape == (2, 3, 112, 112)  # 60x100 and 100x60 on one canvas
    for slot, (data, _, scale) in enumerate(alone[:2]):
        height, width = data.shape[1:]
        np.testing.assert_allclose(first.im_info[slot], [height, width, scale], rtol=1e-6)
        np.testing.assert_array_equal(first.data[slot, :, :height, :width], data)
        assert not first.data[slot, :, height:].any() and not first.data[slot, :, :, width:].any()
    assert last.pad == 1 and last.data.shape == (2, 3, 64, 112)
    np.testing.assert_allclose(last.im_info, [[60, 60, 0.6], first.im_info[0]], rtol=1e-6)
    stretched = next(iter(DetectionLoader(dataset, 2, ValTransform(64), shuffle=False)))
    assert stretched.im_info is None and stretched.data.shape == (2, 3, 64, 64)


def detections(model, data, im_info, symbol=None):
    """The inference graph's rows for one image, padding rows dropped."""
    predictor = Predictor(model.symbol() if symbol is None else symbol, model.arg_params,
                          model.aux_params)
    rows = predictor(**model.input_arrays(data, im_info))[0].asnumpy()[0]
    return rows[rows[:, 0] >= 0]


def canonical(rows):
    """Rows ``[label, score, x1, y1, x2, y2]`` in a canonical order."""
    rows = np.asarray(rows, np.float64)
    return rows[np.lexsort(rows.T[::-1])]


def test_detections_stay_in_the_valid_region_im_info_marks(faster_rcnn):
    image = random_image(*LANDSCAPE)
    (data, im_info), = runner_inputs([image], faster_rcnn.preprocessing())
    height, width = int(im_info[0, 0]), int(im_info[0, 1])
    canvas = np.zeros((1, 3, data.shape[2] + 64, data.shape[3] + 96), np.float32)
    canvas[:, :, :data.shape[2], :data.shape[3]] = data
    inside = detections(faster_rcnn, canvas, im_info)
    assert len(inside) > 0
    assert inside[:, 2:6].min() >= 0 and inside[:, 2:6].max() <= 1 + 1e-6
    # Marking the whole canvas valid instead lets boxes reach into the padding.
    whole = detections(faster_rcnn, canvas, None)
    canvas_height, canvas_width = canvas.shape[2:]
    assert (whole[:, 4].max() * canvas_width > width + 1
            or whole[:, 5].max() * canvas_height > height + 1)


def padding_blind_params(model):
    """Parameters under which a zero region of the input leaves the features elsewhere
    unchanged, and which rank the proposals and detections by the image alone.

    The initial backbone has no biases (batch-norm shifts and means are 0), so it maps
    zeros to zeros; its random weights give features of about 1e-6, which the scaled RPN
    and box classifiers turn into distinct scores. Anchors over zero features score
    lowest (their logits are the biases)."""
    args, aux = (dict(params) for params in model.init_params(seed=0))
    assert not any(args[name].asnumpy().any() for name in args
                   if name.endswith(("_beta", "rpn_conv_3x3_bias")))
    half = args["rpn_cls_score_bias"].shape[0] // 2  # background logits, then object ones
    args["rpn_cls_score_bias"] = mx.nd.array([10.0] * half + [-10.0] * half)
    args["rpn_cls_score_weight"] = args["rpn_cls_score_weight"] * 3e6
    rng = np.random.RandomState(1)
    args["rcnn_cls_score_weight"] = mx.nd.array(
        rng.normal(0, 1e5, args["rcnn_cls_score_weight"].shape))
    return args, aux


def test_detections_ignore_the_canvas_beyond_the_valid_region():
    # Few proposals: every one comes from an anchor over the image's own features.
    model = zoo.get_model("faster_rcnn_mobilenetv2", data_shape=128, max_size=224,
                          num_classes=3, rpn_pre_nms_top_n_test=200,
                          rpn_post_nms_top_n_test=20)
    predictor = Predictor(model.symbol(), *padding_blind_params(model))
    (data, im_info), = runner_inputs([random_image(*LANDSCAPE)], model.preprocessing())

    def rows_on_canvas(height, width):
        canvas = np.zeros((1, 3, height, width), np.float32)
        canvas[:, :, :data.shape[2], :data.shape[3]] = data
        rows = predictor(**model.input_arrays(canvas, im_info))[0].asnumpy()[0]
        return rows[rows[:, 0] >= 0]
    # Zeros reach a feature from as far as its receptive field (a few hundred pixels) and
    # change it wherever a canvas edge is nearer: both canvases leave that much room.
    near, far = rows_on_canvas(384, 480), rows_on_canvas(512, 544)
    assert len(near) > 3 and len(np.unique(near[:, 1])) > 3
    np.testing.assert_allclose(near, far, rtol=1e-5, atol=1e-5)
    assert near[:, 2:6].min() >= 0 and near[:, 2:6].max() <= 1


def test_detector_boxes_land_on_the_non_square_images_pixels(faster_rcnn):
    images = [random_image(*LANDSCAPE), random_image(*PORTRAIT, seed=1)]
    detector = Detector.from_model(faster_rcnn)
    found = detector(images, batch_size=2, **ALL)
    inputs = runner_inputs(images, faster_rcnn.preprocessing())
    (landscape, _), (portrait, _) = inputs
    assert landscape.shape[3] > landscape.shape[2] and portrait.shape[2] > portrait.shape[3], \
        "each image runs on its own canvas"
    for (data, im_info), image, result in zip(inputs, images, found):
        rows = detections(faster_rcnn, data, im_info, detector.predictor.symbol)
        height, width = image.shape[:2]
        rows[:, 2:6] *= [width, height, width, height]
        assert len(result) == len(rows) > 0
        assert result.boxes[:, [0, 2]].max() <= width and result.boxes[:, [1, 3]].max() <= height
        np.testing.assert_allclose(
            canonical(np.column_stack([result.labels, result.scores, result.boxes])),
            canonical(rows), rtol=1e-5, atol=1e-3)


class CanvasShapes(Hook):
    """Records the data shape the module ran each step on."""

    def __init__(self):
        self.shapes = []

    def after_step(self, trainer, epoch, batch_index, losses):
        assert all(np.isfinite(value) for value in losses.values()), losses
        self.shapes.append(trainer.module.data_shapes[0].shape)


@pytest.mark.parametrize("memory_saving", [False, True])
def test_faster_rcnn_trains_on_canvases_of_changing_shapes(memory_saving):
    model = zoo.get_model("faster_rcnn_mobilenetv2", data_shape=96, max_size=160,
                          num_classes=2, rpn_batch_size=32, rcnn_batch_rois=16,
                          rpn_pre_nms_top_n_train=200, rpn_post_nms_top_n_train=50)
    dataset = ImageList([LANDSCAPE, LANDSCAPE, PORTRAIT, PORTRAIT, LANDSCAPE, PORTRAIT])
    transform = train_transform(model.preprocessing())
    loader = DetectionLoader(dataset, 2, transform, shuffle=False, max_objects=1)
    shapes = CanvasShapes()
    trainer = Trainer(model, loader, TrainerOptions(epochs=1, batch_size=2,
                                                    memory_saving=memory_saving),
                      OptimizerOptions(lr=0.001), hooks=[shapes])
    initial = {name: array.asnumpy() for name, array in model.init_params(seed=0)[0].items()}
    trainer.fit()
    # landscape, portrait, then both: the canvas grows past the bound reference shape
    assert shapes.shapes == [(2, 3, 96, 160), (2, 3, 160, 96), (2, 3, 160, 160)]
    final = trainer.params()[0]
    for name in ("rpn_conv_3x3_weight", "rcnn_cls_score_weight"):
        assert not np.array_equal(final[name].asnumpy(), initial[name]), name


def test_an_artifact_saved_stretched_still_runs_stretched(faster_rcnn, tmp_path):
    prefix = str(tmp_path / "faster")
    artifact.export(faster_rcnn, prefix)
    meta_path = artifact.epoch_files(prefix, 0).meta
    meta = artifact.read_json(meta_path)
    meta["preprocessing"] = dict(meta["preprocessing"], resize="stretch", data_shape=[128, 128])
    with open(meta_path, "w") as stream:
        json.dump(meta, stream)
    detector = zoo.load_detector(prefix)
    image = random_image(*LANDSCAPE)
    data = ValTransform(128)(image, NO_LABEL)[0][None]
    rows = detections(faster_rcnn, data, None, detector.predictor.symbol)
    rows[:, 2:6] *= [LANDSCAPE[1], LANDSCAPE[0]] * 2
    found = detector(image, **ALL)
    np.testing.assert_allclose(
        canonical(np.column_stack([found.labels, found.scores, found.boxes])),
        canonical(rows), rtol=1e-5, atol=1e-3)


def test_quantizing_a_stretched_artifact_keeps_it_stretched(tmp_path):
    """Calibration feeds the images as the artifact was trained on them, and the int8
    artifact records the same preprocessing."""
    from zoo.data import embedded
    from zoo.jobs.quantize import QuantizeOptions, quantize

    model = zoo.get_model("faster_rcnn_mobilenetv2", data_shape=128, max_size=224,
                          num_classes=len(embedded.CLASSES), class_names=list(embedded.CLASSES))
    prefix = str(tmp_path / "faster")
    artifact.export(model, prefix)
    meta_path = artifact.epoch_files(prefix, 0).meta
    meta = artifact.read_json(meta_path)
    stretched = dict(meta["preprocessing"], resize="stretch", data_shape=[128, 128])
    meta["preprocessing"] = stretched
    with open(meta_path, "w") as stream:
        json.dump(meta, stream)
    root = embedded.generate(str(tmp_path / "shapes"), seed=1, num_train=2, num_val=1,
                             image_size=96)
    result = quantize(QuantizeOptions(checkpoint=prefix, data_root=root, calib_batches=1,
                                      batch_size=2))
    assert artifact.load(result.prefix).preprocessing == stretched
