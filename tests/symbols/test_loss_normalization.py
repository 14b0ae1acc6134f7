"""The zoo's losses mean what GluonCV's mean: on the same predictions and targets, the
gradient of each loss term (SSD; the RPN and R-CNN terms of Faster R-CNN C4 and FPN, which
share them) is GluonCV's, so an lr from a GluonCV recipe or a paper means the same here.

GluonCV's side is its own code where it ships as a library (``SSDMultiBoxLoss``) and the
formula of its Faster R-CNN training task otherwise (``gluoncv.model_zoo.rcnn.faster_rcnn.
data_parallel.ForwardBackwardTask``: each Gluon loss times ``size / sampled`` and the
trainer stepped with the batch size), with Gluon's own loss blocks. The ratio is taken on
the gradient with respect to the predictions, over every element that has one.
"""
import mxnet as mx
import numpy as np
import pytest
from gluoncv.loss import SSDMultiBoxLoss
from mxnet import autograd, gluon

from symbols import faster_rcnn, rpn, ssd
from symbols.layers import StrictNameManager

BATCH = 2
TOLERANCE = 0.01


def _ratio(ours, theirs):
    """One scale that maps GluonCV's gradient onto ours, checked element by element."""
    ours, theirs = np.asarray(ours, np.float64).ravel(), np.asarray(theirs, np.float64).ravel()
    moving = np.abs(theirs) > 1e-7
    assert moving.sum() > 10, "too few gradients to compare"
    ratio = float(np.dot(ours, theirs) / np.dot(theirs, theirs))
    np.testing.assert_allclose(ours[moving], ratio * theirs[moving], rtol=1e-3, atol=1e-7)
    return ratio


def _gradients(symbol, values, wrt):
    """Gradients of ``symbol``'s losses with respect to the arguments ``wrt``."""
    grads = {name: mx.nd.zeros(value.shape) for name, value in values.items() if name in wrt}
    executor = symbol.bind(mx.cpu(), {k: mx.nd.array(v) for k, v in values.items()},
                           args_grad=grads, grad_req={k: "write" if k in wrt else "null"
                                                      for k in values})
    executor.forward(is_train=True)
    executor.backward()
    return executor.outputs, {name: grad.asnumpy() for name, grad in grads.items()}


def _ssd_case(rng, classes=4, side=8):
    """Anchors on an 8x8 grid, two images with 2 and 3 boxes, predictions with spread."""
    centres = (np.arange(side) + 0.5) / side
    anchors = []
    for cy in centres:
        for cx in centres:
            for size in (0.2, 0.35):
                anchors.append([cx - size / 2, cy - size / 2, cx + size / 2, cy + size / 2])
    anchors = np.array(anchors, np.float32)[None]
    label = -np.ones((BATCH, 3, 5), np.float32)
    label[0, :2] = [[0, 0.1, 0.1, 0.4, 0.45], [2, 0.5, 0.55, 0.9, 0.85]]
    label[1, :3] = [[1, 0.2, 0.6, 0.45, 0.9], [3, 0.6, 0.1, 0.95, 0.4], [0, 0.3, 0.3, 0.6, 0.6]]
    n = anchors.shape[1]
    cls_preds = rng.normal(0, 2, (BATCH, classes + 1, n)).astype(np.float32)
    loc_preds = rng.normal(0, 1, (BATCH, n * 4)).astype(np.float32)
    return dict(anchors=anchors, label=label, cls_preds=cls_preds, loc_preds=loc_preds)


def _ssd_symbol(box_weight=1.0):
    with StrictNameManager():
        cls_preds, loc_preds = mx.sym.Variable("cls_preds"), mx.sym.Variable("loc_preds")
        target = mx.sym.contrib.MultiBoxTarget(
            mx.sym.Variable("anchors"), mx.sym.Variable("label"), cls_preds,
            name="multibox_target", overlap_threshold=0.5, ignore_label=-1,
            negative_mining_ratio=3, minimum_negative_samples=0, negative_mining_thresh=0.5,
            variances=(0.1, 0.1, 0.2, 0.2))
        return mx.sym.Group([*ssd.losses(cls_preds, loc_preds, target[0], target[1],
                                         target[2], box_weight),
                             mx.sym.BlockGrad(target[0], name="loc_t")])


@pytest.mark.parametrize("box_weight", [1.0, 0.25])
def test_ssd_loss_is_gluoncv_multibox_loss(box_weight):
    """Class and box terms per positive anchor, as ``SSDMultiBoxLoss`` (the SSD paper): the
    old ``normalization="valid"`` gave 0.25x at 3:1 mining. The config's ``box_loss_weight``
    is its ``lambd``."""
    case = _ssd_case(np.random.RandomState(0))
    (cls_prob, _, cls_target, loc_target), grads = _gradients(
        _ssd_symbol(box_weight), case, ("cls_preds", "loc_preds"))
    cls_target = cls_target.asnumpy()
    n = cls_target.shape[1]
    positives = cls_target > 0
    assert positives.sum() >= 5 and (cls_target == 0).sum() == 3 * positives.sum()
    cls_pred = mx.nd.array(case["cls_preds"].transpose(0, 2, 1))
    box_pred = mx.nd.array(case["loc_preds"].reshape(BATCH, n, 4))
    cls_pred.attach_grad()
    box_pred.attach_grad()
    with autograd.record():
        total, _, _ = SSDMultiBoxLoss(negative_mining_ratio=3, rho=1.0, lambd=box_weight)(
            [cls_pred], [box_pred], [mx.nd.array(np.maximum(cls_target, 0))],
            [loc_target.reshape((BATCH, n, 4))])
    autograd.backward(total)  # GluonCV's train_ssd.py, then trainer.step(1)
    theirs_cls = cls_pred.grad.asnumpy().transpose(0, 2, 1)
    # Both mine the same hard negatives (the background's lowest probabilities).
    assert np.array_equal(np.abs(theirs_cls).sum(axis=1) > 0, cls_target >= 0)
    assert abs(_ratio(grads["cls_preds"], theirs_cls) - 1) <= TOLERANCE
    assert abs(_ratio(grads["loc_preds"], box_pred.grad.asnumpy().reshape(BATCH, -1)) - 1) \
        <= TOLERANCE


def _gluoncv_task_gradients(terms, batch_size):
    """GluonCV's ``ForwardBackwardTask``: each term ``loss_block(pred, target, weight) *
    size / sampled``, summed, backward, then ``trainer.step(batch_size)`` (the gradient
    divided by it). ``terms``: ``(block, pred, target, weight, size, sampled)``."""
    for term in terms:
        term[1].attach_grad()
    with autograd.record():
        total = sum((block(pred, target, weight) * size / sampled).sum()
                    for block, pred, target, weight, size, sampled in terms)
    total.backward()
    return [term[1].grad.asnumpy() / batch_size for term in terms]


def test_rpn_losses_are_gluoncv_faster_rcnn_losses():
    """Sigmoid cross-entropy of one logit against the zoo's two-way softmax (the same
    probability for logits ``(0, s)``; the gradient on ``s``) and smooth L1 with sigma 3
    (``HuberLoss(rho=1/9)``), each per sampled anchor of the batch: also when an image has
    too few anchors for a full sample of 256."""
    rng = np.random.RandomState(1)
    anchors = 300
    labels = -np.ones((BATCH, anchors), np.float32)
    for image, (positive, negative) in enumerate([(20, 236), (7, 150)]):  # 256, then 157
        picked = rng.permutation(anchors)
        labels[image, picked[:positive]] = 1
        labels[image, picked[positive:positive + negative]] = 0
    logits = rng.normal(0, 2, (BATCH, anchors)).astype(np.float32)
    scores = np.stack([np.zeros_like(logits), logits], axis=1)
    deltas = rng.normal(0, 0.5, (BATCH, anchors, 4)).astype(np.float32)
    target = rng.normal(0, 0.5, (BATCH, anchors, 4)).astype(np.float32)
    weight = np.repeat((labels == 1)[..., None], 4, axis=2).astype(np.float32)
    with StrictNameManager():
        symbol = mx.sym.Group(list(rpn.rpn_loss_terms(
            mx.sym.Variable("scores"), mx.sym.Variable("labels"), mx.sym.Variable("deltas"),
            mx.sym.Variable("target"), mx.sym.Variable("weight"))))
    _, ours = _gradients(symbol, dict(scores=scores, labels=labels, deltas=deltas,
                                      target=target, weight=weight), ("scores", "deltas"))
    sampled = float((labels >= 0).sum())
    theirs_score, theirs_box = _gluoncv_task_gradients([
        (gluon.loss.SigmoidBinaryCrossEntropyLoss(from_sigmoid=False), mx.nd.array(logits),
         mx.nd.array(np.maximum(labels, 0)), mx.nd.array(labels >= 0), labels.size, sampled),
        (gluon.loss.HuberLoss(rho=1 / 9.0), mx.nd.array(deltas), mx.nd.array(target),
         mx.nd.array(weight), deltas.size, sampled)], BATCH)
    assert abs(_ratio(ours["scores"][:, 1], theirs_score) - 1) <= TOLERANCE
    assert abs(_ratio(ours["deltas"], theirs_box) - 1) <= TOLERANCE


def test_rcnn_losses_are_gluoncv_faster_rcnn_losses():
    """Softmax cross-entropy and smooth L1 with sigma 1 (``HuberLoss(rho=1)``) of the target
    class's deltas, each per sampled ROI of the batch, for a batch of 2 images."""
    rng = np.random.RandomState(2)
    rois, classes = 128, 4
    rows = BATCH * rois
    labels = np.where(rng.rand(rows) < 0.25, rng.randint(1, classes + 1, rows), 0)
    scores = rng.normal(0, 2, (rows, classes + 1)).astype(np.float32)
    deltas = rng.normal(0, 0.5, (rows, classes + 1, 4)).astype(np.float32)
    target = np.zeros_like(deltas)
    weight = np.zeros_like(deltas)
    foreground = np.nonzero(labels > 0)[0]
    target[foreground, labels[foreground]] = rng.normal(0, 0.5, (len(foreground), 4))
    weight[foreground, labels[foreground]] = 1
    with StrictNameManager():
        symbol = mx.sym.Group(list(faster_rcnn.rcnn_loss_terms(
            mx.sym.Variable("scores"), mx.sym.Variable("deltas"), mx.sym.Variable("labels"),
            mx.sym.Variable("target"), mx.sym.Variable("weight"))))
    flat = dict(scores=scores, labels=labels.astype(np.float32),
                deltas=deltas.reshape(rows, -1), target=target.reshape(rows, -1),
                weight=weight.reshape(rows, -1))
    _, ours = _gradients(symbol, flat, ("scores", "deltas"))
    # GluonCV's shapes: (B, rois, C + 1) scores, (B, rois, C, 4) foreground deltas.
    by_image = (BATCH, rois)
    theirs_score, theirs_box = _gluoncv_task_gradients([
        (gluon.loss.SoftmaxCrossEntropyLoss(), mx.nd.array(scores.reshape(*by_image, -1)),
         mx.nd.array(labels.reshape(by_image)), mx.nd.ones(by_image + (1,)), rows, rows),
        (gluon.loss.HuberLoss(rho=1.0), mx.nd.array(deltas[:, 1:].reshape(*by_image, -1, 4)),
         mx.nd.array(target[:, 1:].reshape(*by_image, -1, 4)),
         mx.nd.array(weight[:, 1:].reshape(*by_image, -1, 4)), rows * classes * 4, rows)],
        BATCH)
    assert abs(_ratio(ours["scores"], theirs_score.reshape(rows, -1)) - 1) <= TOLERANCE
    ours_box = ours["deltas"].reshape(rows, classes + 1, 4)[:, 1:]
    assert abs(_ratio(ours_box, theirs_box.reshape(rows, classes, 4)) - 1) <= TOLERANCE
