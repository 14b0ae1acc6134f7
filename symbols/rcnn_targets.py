"""Training-target operators for Faster R-CNN, as MXNet custom operators in Python.

MXNet has no built-in operator that assigns RPN anchor labels or samples
proposals for the second stage; these do it on the CPU in numpy. Both take the
detection label ``(B, M, 6)`` rows ``[cls, x1, y1, x2, y2, difficult]`` with
coordinates normalised to the image (``im_info`` rows ``[height, width, scale]``)
and padding rows of -1, the same label the SSD models train on.

Encoding and IoU follow the continuous convention of the proposal graph
(:mod:`symbols.box_coder`): ground-truth boxes are the label's corners times the image
size, without the "+1" pixel, and IoUs are computed without it. The RPN's anchors are
given to the operator, each level's first cell, by the graph that decodes with them
(:func:`symbols.rpn.level_base_anchors`), so training matches against the
anchors inference decodes, whatever the ``rcnn_convention``.
"""
import json

import mxnet as mx
import numpy as np

from symbols.boxes import iou as box_iou
from symbols.box_coder import encode, shifted_anchors

__all__ = ["ProposalTarget", "RPNTarget", "RPNTargetProp", "ground_truth"]


def ground_truth(label, im_info):
    """Pixel boxes ``(G, 4)`` (continuous corners) and class ids ``(G,)`` of one image,
    without padding, difficult objects or boxes of no area."""
    keep = (label[:, 0] >= 0) & (label[:, 5] < 0.5 if label.shape[1] > 5 else True)
    rows = label[keep]
    scale = np.array([im_info[1], im_info[0], im_info[1], im_info[0]], dtype=np.float32)
    boxes = rows[:, 1:5] * scale
    solid = (boxes[:, 2] > boxes[:, 0]) & (boxes[:, 3] > boxes[:, 1])  # encodable
    return boxes[solid], rows[solid, 0].astype(np.int64)


def subsample(indices, count, rng):
    """At most ``count`` of ``indices``, chosen without replacement."""
    if len(indices) <= count:
        return indices
    return rng.choice(indices, count, replace=False)


class RPNTarget(mx.operator.CustomOp):
    """Labels (1 object, 0 background, -1 ignored) and box targets for every anchor of every
    level, sampled together per image. ``levels`` lists ``(stride, base)`` per RPN score map,
    ``base`` the ``(A, 4)`` anchors of its first cell; anchors are numbered level by level,
    each in :func:`symbols.box_coder.shifted_anchors` order."""

    def __init__(self, levels, batch_size, fg_fraction, positive_iou, negative_iou,
                 labelling="zoo"):
        super().__init__()
        self.levels = levels
        self.batch_size, self.fg_fraction = batch_size, fg_fraction
        self.positive_iou, self.negative_iou = positive_iou, negative_iou
        self.labelling = labelling

    def anchors(self, scores):
        """``(N, 4)`` anchors of every level for score maps ``(B, 2A, H, W)``."""
        return np.concatenate([shifted_anchors(base, stride, *score.shape[2:])
                               for (stride, base), score in zip(self.levels, scores)])

    def forward(self, is_train, req, in_data, out_data, aux):
        *scores, label, im_info = (x.asnumpy() for x in in_data)
        anchors = self.anchors(scores)
        batch = label.shape[0]
        labels = np.full((batch, len(anchors)), -1, dtype=np.float32)
        targets = np.zeros((batch, len(anchors), 4), dtype=np.float32)
        for b in range(batch):
            self.assign_image(anchors, label[b], im_info[b], labels[b], targets[b])
        weights = (labels == 1).astype(np.float32)[:, :, None].repeat(4, axis=2)
        for i, array in enumerate((labels, targets, weights)):
            self.assign(out_data[i], req[i], mx.nd.array(array))

    def inside(self, anchors, im_info):
        """The anchors that may be labelled: inside the image. GluonCV's (``"gluoncv"``
        labelling) end one pixel short of its border, its windows' last pixel inside."""
        height, width = im_info[0], im_info[1]
        if self.labelling == "gluoncv":
            right, bottom = anchors[:, 2] < width, anchors[:, 3] < height
        else:
            right, bottom = anchors[:, 2] <= width, anchors[:, 3] <= height
        return np.where((anchors[:, 0] >= 0) & (anchors[:, 1] >= 0) & right & bottom)[0]

    def label_matches(self, iou, labels):
        """Label the inside anchors (``labels``, a view of theirs) from their IoUs ``(N, G)``
        with the ground truths: positive where an anchor is a ground truth's best or overlaps
        one by ``positive_iou``, negative where it overlaps none by ``negative_iou``. The zoo
        keeps every ground truth's best anchor positive; GluonCV (``"gluoncv"``, its
        ``RPNTargetSampler``) marks negatives last, so a best anchor below
        ``negative_iou`` is negative there, and a best anchor is any within float32's epsilon
        of the best."""
        best_iou = iou.max(axis=1)
        if self.labelling == "gluoncv":
            best_for_gt = ((iou + np.spacing(np.float32(1.0)))
                           > iou.max(axis=0, keepdims=True)).any(axis=1)
            labels[best_for_gt | (best_iou >= self.positive_iou)] = 1
            labels[best_iou < self.negative_iou] = 0
            return
        labels[best_iou < self.negative_iou] = 0
        best_for_gt = np.where((iou == iou.max(axis=0, keepdims=True)) & (iou > 0))[0]
        labels[best_for_gt] = 1
        labels[best_iou >= self.positive_iou] = 1

    def assign_image(self, anchors, label, im_info, labels, targets):
        """Fill one image's ``labels`` and ``targets`` rows for anchors inside the image."""
        rng = np.random
        inside = self.inside(anchors, im_info)
        boxes, _ = ground_truth(label, im_info)
        if len(boxes) == 0:
            labels[subsample(inside, self.batch_size, rng)] = 0
            return
        iou = box_iou(anchors[inside], boxes)
        best = iou.argmax(axis=1)
        inside_labels = labels[inside]
        self.label_matches(iou, inside_labels)
        labels[inside] = inside_labels
        fg = np.where(labels == 1)[0]
        keep_fg = subsample(fg, int(self.batch_size * self.fg_fraction), rng)
        labels[np.setdiff1d(fg, keep_fg)] = -1
        bg = np.where(labels == 0)[0]
        labels[np.setdiff1d(bg, subsample(bg, self.batch_size - len(keep_fg), rng))] = -1
        matched = np.full(len(anchors), -1)
        matched[inside] = best
        targets[keep_fg] = encode(anchors[keep_fg], boxes[matched[keep_fg]])

    def backward(self, req, out_grad, in_data, out_data, in_grad, aux):
        for i, grad in enumerate(in_grad):
            self.assign(grad, req[i], 0)


@mx.operator.register("zoo_rpn_target")
class RPNTargetProp(mx.operator.CustomOpProp):
    """Inputs: one RPN score map ``(B, 2A, H, W)`` per level of ``levels`` (JSON list of
    ``[stride, base]``, ``base`` the level's first-cell anchors ``[[x1, y1, x2, y2], ...]``),
    then ``label`` and ``im_info``. Outputs over the ``N``
    anchors of all levels: ``label`` ``(B, N)``, ``bbox_target`` and ``bbox_weight``
    ``(B, N, 4)``."""

    def __init__(self, levels, batch_size="256", fg_fraction="0.5", positive_iou="0.7",
                 negative_iou="0.3", labelling="zoo"):
        super().__init__(need_top_grad=False)
        self.kwargs = dict(levels=json.loads(levels), batch_size=int(batch_size),
                           fg_fraction=float(fg_fraction), positive_iou=float(positive_iou),
                           negative_iou=float(negative_iou), labelling=labelling)

    def list_arguments(self):
        return ["rpn_cls_score_%d" % i for i in range(len(self.kwargs["levels"]))] + [
            "label", "im_info"]

    def list_outputs(self):
        return ["label", "bbox_target", "bbox_weight"]

    def infer_shape(self, in_shape):
        scores = in_shape[:len(self.kwargs["levels"])]
        batch = scores[0][0]
        count = sum(channels // 2 * height * width for _, channels, height, width in scores)
        return in_shape, [(batch, count), (batch, count, 4), (batch, count, 4)], []

    def create_operator(self, ctx, shapes, dtypes):
        return RPNTarget(**self.kwargs)


EMPTY_ROW = -1.0
"""The coordinate of a proposal row NMS left empty (:func:`symbols.rpn.gluoncv_proposals`)."""


class ProposalTarget(mx.operator.CustomOp):
    """Samples ``batch_rois`` proposals per image (ground truth added) with class labels and
    per-class box targets for the second stage."""

    def __init__(self, num_classes, batch_rois, fg_fraction, fg_iou, box_stds):
        super().__init__()
        self.num_classes, self.batch_rois = num_classes, batch_rois
        self.fg_fraction, self.fg_iou, self.box_stds = fg_fraction, fg_iou, box_stds

    def forward(self, is_train, req, in_data, out_data, aux):
        rois, label, im_info = (x.asnumpy() for x in in_data)
        outputs = [self.sample(b, rois[rois[:, 0] == b, 1:], label[b], im_info[b])
                   for b in range(label.shape[0])]
        for i in range(4):
            self.assign(out_data[i], req[i], mx.nd.array(np.concatenate([o[i] for o in outputs])))

    def sample(self, batch_index, proposals, label, im_info):
        rng = np.random
        # Rows NMS left empty (GluonCV's convention keeps them as the box [-1, -1, -1, -1],
        # score -1) are no proposals: GluonCV's RCNNTargetSampler ignores them. Sampled, they
        # made most negatives of a small image that degenerate box (at a short side of 160,
        # some 1000 of 1500 rows), and the zoo's C4 trained otherwise than GluonCV's.
        proposals = proposals[~(proposals == EMPTY_ROW).all(axis=1)]
        boxes, classes = ground_truth(label, im_info)
        candidates = np.concatenate([proposals, boxes]).astype(np.float32)
        if len(boxes):
            iou = box_iou(candidates, boxes)
            best, best_iou = iou.argmax(axis=1), iou.max(axis=1)
        else:
            best, best_iou = np.zeros(len(candidates), int), np.zeros(len(candidates))
        fg = subsample(np.where(best_iou >= self.fg_iou)[0],
                       int(round(self.batch_rois * self.fg_fraction)), rng)
        bg_pool = np.where(best_iou < self.fg_iou)[0]
        bg_count = self.batch_rois - len(fg)
        bg = rng.choice(bg_pool, bg_count, replace=len(bg_pool) < bg_count) if len(bg_pool) \
            else rng.choice(fg, bg_count)
        keep = np.concatenate([fg, bg]).astype(np.int64)
        cls = np.zeros(len(keep), dtype=np.float32)
        cls[:len(fg)] = classes[best[fg]] + 1 if len(boxes) else 0
        targets = np.zeros((len(keep), 4 * (self.num_classes + 1)), dtype=np.float32)
        weights = np.zeros_like(targets)
        if len(fg):
            deltas = encode(candidates[fg], boxes[best[fg]], self.box_stds)
            for row, (c, delta) in enumerate(zip(cls[:len(fg)].astype(int), deltas)):
                targets[row, 4 * c:4 * c + 4] = delta
                weights[row, 4 * c:4 * c + 4] = 1
        sampled = np.concatenate([np.full((len(keep), 1), batch_index, np.float32),
                                  candidates[keep]], axis=1)
        return sampled, cls, targets, weights

    def backward(self, req, out_grad, in_data, out_data, in_grad, aux):
        for i, grad in enumerate(in_grad):
            self.assign(grad, req[i], 0)


@mx.operator.register("zoo_proposal_target")
class ProposalTargetProp(mx.operator.CustomOpProp):
    def __init__(self, num_classes, batch_rois="128", fg_fraction="0.25", fg_iou="0.5",
                 box_stds="[0.1, 0.1, 0.2, 0.2]"):
        super().__init__(need_top_grad=False)
        self.kwargs = dict(num_classes=int(num_classes), batch_rois=int(batch_rois),
                           fg_fraction=float(fg_fraction), fg_iou=float(fg_iou),
                           box_stds=json.loads(box_stds))

    def list_arguments(self):
        return ["rois", "label", "im_info"]

    def list_outputs(self):
        return ["rois_sampled", "cls_label", "bbox_target", "bbox_weight"]

    def infer_shape(self, in_shape):
        rows = in_shape[1][0] * self.kwargs["batch_rois"]
        boxes = (rows, 4 * (self.kwargs["num_classes"] + 1))
        return in_shape, [(rows, 5), (rows,), boxes, boxes], []

    def create_operator(self, ctx, shapes, dtypes):
        return ProposalTarget(**self.kwargs)
