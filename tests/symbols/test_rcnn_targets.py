"""The RPN's anchor labels (symbols/rcnn_targets.py) under each labelling, against GluonCV's
own ``RPNTargetSampler``, and the ``"gluoncv"`` convention's object-only RPN gradient
(symbols/rpn.py)."""
import mxnet as mx
import numpy as np
import pytest

from symbols import rpn
from symbols.rcnn_targets import RPNTarget

gluoncv = pytest.importorskip("gluoncv")
from gluoncv.model_zoo.rcnn.rpn.rpn_target import RPNTargetSampler  # noqa: E402

ANCHORS = np.array([[0, 0, 15, 15], [16, 0, 31, 15], [0, 16, 15, 31], [16, 16, 31, 31],
                    [8, 8, 39, 39], [0, 0, 31, 31], [40, 40, 64, 64]], np.float32)
"""Anchors of a 64 x 64 image (the last one ends on its border) in GluonCV's pixel windows."""
BOXES = np.array([[2, 2, 14, 13], [20, 33, 27, 40]], np.float32)
"""A box well matched by the first anchor, and a small one whose best anchor overlaps it by
less than the negative IoU (0.3)."""


def labels(labelling):
    target = RPNTarget([], batch_size=len(ANCHORS), fg_fraction=1.0, positive_iou=0.7,
                       negative_iou=0.3, labelling=labelling)
    label = np.full((len(BOXES), 6), 0, np.float32)
    label[:, 1:5] = BOXES / 64
    out = np.full(len(ANCHORS), -1, np.float32)
    target.assign_image(ANCHORS, label, np.array([64, 64, 1], np.float32), out,
                        np.zeros((len(ANCHORS), 4), np.float32))
    return out


def gluoncv_labels():
    """GluonCV's: IoUs of anchors outside the image (its right and bottom border
    included) set to -1, then its sampler (nothing subsampled)."""
    from symbols.boxes import iou
    ious = iou(ANCHORS, BOXES)
    outside = ((ANCHORS[:, 0] < 0) | (ANCHORS[:, 1] < 0) | (ANCHORS[:, 2] >= 64)
               | (ANCHORS[:, 3] >= 64))
    ious[outside] = -1
    samples, _ = RPNTargetSampler(len(ANCHORS), 0.7, 0.3, 1.0)(ious)
    return np.where(samples > 0, 1, np.where(samples < 0, 0, -1))


def test_the_gluoncv_labelling_is_gluoncvs_sampler():
    assert labels("gluoncv").tolist() == gluoncv_labels().tolist()


def test_the_zoo_labelling_keeps_every_best_anchor_positive():
    ours, theirs = labels("zoo"), labels("gluoncv")
    differ = np.nonzero(ours != theirs)[0].tolist()
    # the small box's best anchor (negative in GluonCV), the anchor ending on the border
    # (outside for GluonCV: not labelled)
    assert differ == [4, 6]
    assert (ours[4], theirs[4], ours[6], theirs[6]) == (1, 0, 0, -1)


@pytest.mark.parametrize("convention, background_moves", [("zoo", True), ("gluoncv", False)])
def test_only_the_object_logit_trains_in_the_gluoncv_convention(convention, background_moves):
    # GluonCV's RPN has one logit; ours imports it as the object row beside a zero background
    # row, whose gradient would double the step of their difference.
    count = 3
    anchors = rpn.AnchorLevel("c4", 16, (2.0,), (0.5, 1.0, 2.0))
    score = mx.sym.Variable("score")
    level = rpn.LevelOutput(anchors, None, score, mx.sym.Variable("deltas"))
    sampling = type("Sampling", (), dict(rpn_batch_size=16, rpn_fg_fraction=0.5,
                                         rpn_positive_iou=0.7, rpn_negative_iou=0.3))
    prob, box_loss, _ = rpn.rpn_losses([level], mx.sym.Variable("label"),
                                       mx.sym.Variable("im_info"), sampling, convention)
    graph = mx.sym.Group([prob, box_loss])
    shapes = dict(score=(1, 2 * count, 4, 4), deltas=(1, 4 * count, 4, 4), label=(1, 1, 6),
                  im_info=(1, 3))
    executor = graph.simple_bind(mx.cpu(), grad_req={"score": "write", "deltas": "write",
                                                     "label": "null", "im_info": "null"},
                                 **shapes)
    executor.arg_dict["score"][:] = np.random.RandomState(0).normal(0, 1, shapes["score"])
    executor.arg_dict["label"][:] = np.array([[[0, 0.1, 0.1, 0.6, 0.6, 0]]])
    executor.arg_dict["im_info"][:] = np.array([[64, 64, 1]])
    executor.forward(is_train=True)
    executor.backward()
    gradient = executor.grad_dict["score"].asnumpy()
    assert np.abs(gradient[:, count:]).max() > 0
    assert bool(np.abs(gradient[:, :count]).max() > 0) is background_moves
