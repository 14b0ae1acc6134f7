"""The first batch: drawn from the very tensor that enters the network (de-normalised,
boxes and class names on it) into ``train_batch0.png`` in the run folder, and refused when
it carries no object, or when its objects match no anchor (the boxes never reach the loss).

Training draws and checks its first step's batch (:class:`FirstBatch`, no extra forward
pass: the anchors are counted from that step's outputs); ``zoo check-data`` the first
batches of the first epoch the same run would see (:func:`draw_batch`, :func:`check_objects`,
:func:`forward_positive_anchors`).
"""
import math
import os

import cv2
import mxnet as mx
import numpy as np

from zoo.engine.hooks import Hook
from zoo.engine.trainer import bind_training_module
from zoo.errors import DataError

__all__ = ["CHECK", "FirstBatch", "batch_boxes", "batch_picture", "check_objects",
           "check_positives", "denormalise", "draw_batch", "forward_positive_anchors",
           "picture_path"]

CHECK = "first batch"
"""The check's name in the health line."""
MAX_TILES = 16
"""Images of a batch the picture shows at most."""
TILE_SIDE = 512
"""Longest side of an image in the picture; larger inputs are shrunk to it."""
GAP = 2
"""White pixels between the images of the picture."""
CHANCE = 0.01
"""A first batch of negative images only is refused when a split with as many negative
images would give one less often than this."""


def picture_path(output_dir, index=0):
    """Where the picture of batch ``index`` goes: ``<output_dir>/train_batch<index>.png``."""
    return os.path.join(output_dir, "train_batch%d.png" % index)


def denormalise(data, preprocessing):
    """A batch's images ``(B, 3, H, W)`` as the network gets them back to RGB uint8
    ``(B, H, W, 3)``: times the std pixel plus the mean pixel, as :mod:`zoo.data.transforms`
    normalised them."""
    std = np.asarray(preprocessing["std"], np.float32)[:, None, None]
    mean = np.asarray(preprocessing["mean"], np.float32)[:, None, None]
    pixels = np.clip(np.rint(data * std + mean), 0, 255).astype(np.uint8)
    return np.ascontiguousarray(pixels.transpose(0, 2, 3, 1))


def batch_boxes(batch, slot):
    """``(boxes, class ids)`` of sample ``slot`` of a loader's batch, boxes in pixels of
    the network's input (labels are normalised to each sample's valid region, its
    ``im_info`` on a canvas)."""
    label = batch.label[slot]
    rows = label[label[:, 0] >= 0]
    if batch.im_info is not None:
        height, width = batch.im_info[slot][:2]
    else:
        height, width = batch.data.shape[2:]
    return rows[:, 1:5] * np.array([width, height, width, height], np.float32), \
        rows[:, 0].astype(np.int64)


def batch_picture(batch, preprocessing, class_names):
    """One RGB picture of the first :data:`MAX_TILES` images of ``batch`` in a grid, each
    with its boxes and class names."""
    count = min(len(batch.indices) - batch.pad, MAX_TILES)
    images = denormalise(batch.data[:count], preprocessing)
    tiles = [draw_tile(images[slot], *batch_boxes(batch, slot), class_names)
             for slot in range(count)]
    columns = math.ceil(math.sqrt(count))
    rows = math.ceil(count / columns)
    height, width = tiles[0].shape[:2]
    picture = np.full((rows * (height + GAP) - GAP, columns * (width + GAP) - GAP, 3), 255,
                      np.uint8)
    for slot, tile in enumerate(tiles):
        top, left = (slot // columns) * (height + GAP), (slot % columns) * (width + GAP)
        picture[top:top + height, left:left + width] = tile
    return picture


def draw_tile(image, boxes, labels, class_names):
    """One image of the picture, shrunk to :data:`TILE_SIDE`, with its boxes drawn."""
    scale = min(1.0, TILE_SIDE / max(image.shape[:2]))
    if scale < 1:
        image = cv2.resize(image, (round(image.shape[1] * scale), round(image.shape[0] * scale)),
                           interpolation=cv2.INTER_AREA)
    from zoo.inference.visualize import draw_boxes  # it loads matplotlib: only when drawing
    names = class_names or ()  # a model built without names (the benchmarks') shows ids
    texts = [names[label] if label < len(names) else str(label) for label in labels]
    return draw_boxes(np.array(image, order="C"), boxes * scale, labels, texts)


def draw_batch(batch, preprocessing, class_names, path):
    """Write :func:`batch_picture` to ``path`` (its folder made); returns ``path``."""
    from zoo.inference.visualize import save_image  # it loads matplotlib: only when drawing
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    save_image(path, batch_picture(batch, preprocessing, class_names))
    return path


def check_objects(batch, dataset, name, picture):
    """``(objects, annotated)``: the boxes of ``batch`` that reach the network with an
    area, and those its images' annotations hold. :class:`DataError` naming the split
    ``name`` when the batch carries no object although its images have boxes (lost on the
    way), or although so few of the split's images have none that chance cannot explain it
    (under :data:`CHANCE`)."""
    samples = range(len(batch.indices) - batch.pad)
    objects = 0
    for slot in samples:
        boxes, _ = batch_boxes(batch, slot)
        objects += int(((boxes[:, 2:] - boxes[:, :2]) > 0).all(axis=1).sum())
    records = [dataset.records[int(batch.indices[slot])] for slot in samples]
    annotated = sum(len(record.boxes) for record in records)
    if objects:
        return objects, annotated
    negatives = sum(not len(record.boxes) for record in dataset.records) / len(dataset.records)
    if not annotated and negatives ** len(records) >= CHANCE:
        return objects, annotated  # a batch of negative images, as the split has many
    if annotated:
        why = ("their annotations hold %d boxes but none reaches the network with an area "
               "(lost in the augmentation and resize)" % annotated)
    else:
        why = ("none of them has a box, though %.0f%% of the split's images have one"
               % (100 * (1 - negatives)))
    raise DataError("first batch of %s (images %s): no object: %s; look at %s" % (
        name, ", ".join(str(record.key) for record in records), why, picture))


def check_positives(positives, objects, model, name, picture):
    """:class:`DataError` naming the split ``name`` when the first batch's ``objects``
    matched no anchor of ``model`` (``positives`` 0): no box reaches the loss."""
    if positives == 0 and objects:
        raise DataError(
            "first batch of %s: its %d boxes match no anchor of %s: no box reaches the loss "
            "and nothing would be learnt; boxes far smaller or thinner than the anchors (or "
            "wrong coordinates) do this; look at %s" % (name, objects, model.name, picture))


def forward_positive_anchors(model, batch, max_objects, ctx="cpu"):
    """The positive anchors of one forward pass of ``model``'s training graph on ``batch``,
    with every parameter 0 (targets do not depend on them): for ``zoo check-data``, which
    trains nothing. None where the architecture does not say."""
    shapes = model.train_input_shapes(len(batch.indices), max_objects)
    shapes.update({name: array.shape for name, array in
                   model.input_arrays(batch.data, batch.im_info).items()})
    module = bind_training_module(model.train_symbol(), list(model.input_shapes()), shapes, ctx)
    module.init_params(initializer=mx.init.Zero())
    inputs = model.input_arrays(batch.data, batch.im_info)
    module.forward(mx.io.DataBatch(data=[mx.nd.array(inputs[n]) for n in model.input_shapes()],
                                   label=[mx.nd.array(batch.label)]), is_train=True)
    return model.positive_anchors(module.get_outputs())


class FirstBatch(Hook):
    """Draws the first step's batch into ``train_batch0.png`` in ``output_dir`` and refuses
    it, naming the split ``name`` of ``dataset``, when it carries no object (before its
    forward pass) or matches no anchor (from that step's own outputs)."""
    only_rank0 = True

    def __init__(self, model, dataset, name, output_dir):
        self.model, self.dataset, self.name = model, dataset, name
        self.path = picture_path(output_dir)
        self.objects, self.checked = None, False  # the first step's objects, then done

    def before_step(self, trainer, epoch, batch_index, batch):
        if self.objects is not None:
            return
        draw_batch(batch, self.model.preprocessing(), self.model.config["class_names"],
                   self.path)
        trainer.health.picture(self.path)
        self.objects, _ = check_objects(batch, self.dataset, self.name, self.path)

    def after_step(self, trainer, epoch, batch_index, losses):
        if self.checked:
            return
        self.checked = True
        positives = self.model.positive_anchors(trainer.module.get_outputs())
        check_positives(positives, self.objects, self.model, self.name, self.path)
        trainer.health.result(CHECK, "ok", "%d boxes%s" % (
            self.objects, "" if positives is None else ", %d positive anchors" % positives))
