"""``zoo benchmark-parity --architecture faster_rcnn`` (zoo_bench/parity_rcnn.py): GluonCV's
``FasterRCNN`` on its MobileNetV2 and the zoo's import of it detect alike, start equal, take
the same first steps, and a whole run through the command line (slow)."""
import json
import os

import mxnet as mx
import numpy as np
import pytest

from zoo import artifact
from zoo.cli import main
from zoo.model import build_model
from zoo_bench import parity, parity_rcnn
from zoo_bench.options import ParityBenchmarkOptions

from test_gluoncv_rcnn import MEAN, STD, as_gluoncv_runs, differences, gluon_rows, our_rows  # noqa: F401

gluoncv = pytest.importorskip("gluoncv")
from gluoncv.data.transforms.presets.rcnn import transform_test  # noqa: E402

CLASSES = ["circle", "square", "triangle", "star"]


def calibrated(net, rng):
    """``net`` with every batch norm's statistics those of its input (half the variance, so
    that the scores spread) on two random images and 64 random ROIs, its class predictor
    wider: random weights whose detections are distinct, so that a wrong map shows. (A fresh
    network's running statistics leave every ROI's features alike: every score ties.)"""
    def from_input(block, inputs):
        value = inputs[0]
        mean = value.mean(axis=(0, 2, 3))
        variance = ((value - mean.reshape((1, -1, 1, 1))) ** 2).mean(axis=(0, 2, 3))
        block.running_mean.set_data(mean)
        block.running_var.set_data(variance * 0.5 + 1e-3)

    hooks = []

    def hook(block):
        if isinstance(block, mx.gluon.nn.BatchNorm):
            hooks.append(block.register_forward_pre_hook(from_input))
        for child in block._children.values():
            hook(child)
    hook(net.features)
    hook(net.top_features)
    images = [random_input(rng, 300, 400) for _ in range(2)]
    features = net.features(mx.nd.concat(*images, dim=0))
    corners = rng.uniform(0, 200, (64, 2))
    rois = np.concatenate([rng.randint(0, 2, (64, 1)), corners,
                           corners + rng.uniform(16, 200, (64, 2))], axis=1)
    net.top_features(mx.nd.contrib.ROIAlign(features, mx.nd.array(rois), (14, 14), 1 / 16.,
                                            sample_ratio=2))
    for handle in hooks:
        handle.detach()
    for param in net.collect_params(".*gamma|.*beta").values():
        param.set_data(mx.nd.array(rng.uniform(0.8, 1.2, param.shape) if param.name.endswith(
            "gamma") else rng.normal(0, 0.05, param.shape)))
    net.class_predictor.weight.set_data(mx.nd.array(
        rng.normal(0, 0.1, net.class_predictor.weight.shape)))
    return net


def random_input(rng, height, width):
    """A random image resized and normalised by GluonCV's ``transform_test`` at the
    config's 256 x 384."""
    image = mx.nd.array(rng.randint(0, 256, (height, width, 3)), dtype="uint8")
    return transform_test(image, short=256, max_size=384, mean=MEAN, std=STD)[0]


def test_the_imported_rcnn_detects_what_gluoncvs_detects(tmp_path, as_gluoncv_runs):  # noqa: F811
    # The map (zoo.gluoncv.rcnn.map_c4_mobilenetv2) proved as the published detectors' maps
    # are: the top 100 detections, same classes in the same order, scores within 1e-4 and
    # boxes within 0.01 pixel, on a landscape and a portrait image.
    rng = np.random.RandomState(0)
    spec = parity_rcnn.zoo_spec(CLASSES)
    net = calibrated(parity_rcnn.initialised_rcnn(parity_rcnn.rcnn_network(spec), CLASSES), rng)
    prefix = parity_rcnn.import_gluon(net, str(tmp_path / "rcnn"), "test weights")
    stored = artifact.load(prefix, 0)
    model = build_model(stored.model.config)
    for height, width in ((300, 400), (400, 260)):
        x = random_input(rng, height, width)
        theirs = gluon_rows(net, x)
        ours = our_rows(model, stored.arg_params, stored.aux_params, x)
        same, score, box = differences(ours, theirs)
        assert len(theirs) == len(ours) == 100
        assert theirs[0, 1] - theirs[-1, 1] > 0.1  # the scores spread: no ties decide
        assert same == len(ours), "the classes differ from detection %d" % same
        assert score < 1e-4
        assert box < 0.01
