"""The region proposal network: anchors, the shared RPN head, proposals and the RPN's losses.

Proposals (:func:`proposals`) are built from composable MXNet operators only, so the
graph exports: anchors computed in the graph from the feature map's shape, per-image top-k
of the object scores, decoding, clipping, minimum size and ``box_nms``. They use the
continuous box convention of GluonCV and Detectron2 (:mod:`symbols.box_coder`): a box
``[x1, y1, x2, y2]`` is ``x2 - x1`` wide (no "+1"), centred at ``x1 + 0.5 * width``, deltas
``dw``/``dh`` clipped at ``log(1000 / 16)`` when decoded, boxes clipped to ``[0, width] x
[0, height]`` of ``im_info``, IoU without "+1". The training targets
(:mod:`symbols.rcnn_targets`) encode and match with the same anchors and convention.

The ``"gluoncv"`` convention (:data:`CONVENTIONS`) makes proposals as GluonCV's RPN does, so
that GluonCV's trained detectors compute here what they compute there
(:func:`gluoncv_proposals`). The C4 detector is :mod:`symbols.faster_rcnn`, the pyramid
one :mod:`symbols.fpn`; both use these pieces per level.
"""
import json
from dataclasses import dataclass

import mxnet as mx
import numpy as np

from symbols import box_coder
from symbols import rcnn_targets  # also registers the custom target operators
from symbols.layers import (concat, constant, gather_rows, nms, one_over_count, relu, scalar,
                            scale_gradient, smooth_l1_loss)

__all__ = ["AnchorLevel", "CONVENTIONS", "LevelOutput", "ProposalSettings", "RPN", "RPNHead",
           "RPN_CHANNELS", "gluoncv_base_anchors", "proposals", "rpn_loss_terms", "rpn_losses",
           "without_gradient"]

RPN_CHANNELS = 512


CONVENTIONS = ("zoo", "gluoncv")
"""How proposals are made: ``"zoo"`` as this module's docstring says, ``"gluoncv"`` as
GluonCV's RPN makes them (:func:`gluoncv_proposals`)."""


@dataclass(frozen=True)
class AnchorLevel:
    """The anchors of one RPN feature map: ``scales`` (in units of ``stride``) x ``ratios``
    on every cell, as :func:`symbols.box_coder.grid_anchors` lays them out; ``tag``
    names the level's operators."""
    tag: str
    stride: int
    scales: tuple
    ratios: tuple

    @property
    def num_anchors(self):
        return len(self.scales) * len(self.ratios)


@dataclass(frozen=True)
class ProposalSettings:
    """How :func:`proposals` selects: the ``pre_nms_top_n`` best anchors of each level, NMS
    at ``nms_threshold`` over every level's boxes wider and taller than ``min_size`` pixels,
    the ``post_nms_top_n`` best per image; decoding clips ``dw``, ``dh`` at ``delta_clip``
    (None: no clip). ``convention`` is one of :data:`CONVENTIONS`."""
    pre_nms_top_n: int
    post_nms_top_n: int
    nms_threshold: float
    min_size: int
    delta_clip: float = box_coder.DELTA_CLIP
    convention: str = "zoo"


@dataclass(frozen=True)
class RPN:
    """The C4 region proposal network on backbone ``layer``: its anchors, the proposal
    settings of the graph being built (training or test top-n) and the width of its hidden
    convolution."""
    layer: str
    anchors: AnchorLevel
    settings: ProposalSettings
    channels: int = RPN_CHANNELS

    @property
    def stride(self):
        return self.anchors.stride


@dataclass(frozen=True)
class LevelOutput:
    """What the RPN head gives for one level: ``score`` ``(B, 2A, H, W)`` (background then
    object logits per anchor) and ``deltas`` ``(B, 4A, H, W)`` on ``feature``."""
    anchors: AnchorLevel
    feature: mx.sym.Symbol
    score: mx.sym.Symbol
    deltas: mx.sym.Symbol


class RPNHead:
    """A 3x3 conv of ``channels`` and the objectness and box-delta 1x1 convs, one set of
    weights applied to every level it is called on; prediction layers start from a small
    normal, as in the paper."""

    def __init__(self, num_anchors, channels=RPN_CHANNELS):
        small = mx.init.Normal(0.01)
        self.num_anchors, self.channels = num_anchors, channels
        self.layers = {name: (mx.sym.Variable(name + "_weight", init=init),
                              mx.sym.Variable(name + "_bias"))
                       for name, init in (("rpn_conv_3x3", small), ("rpn_cls_score", small),
                                          ("rpn_bbox_pred", small))}

    def _conv(self, data, name, tag, channels, kernel):
        weight, bias = self.layers[name]
        return mx.sym.Convolution(data=data, weight=weight, bias=bias,
                                  name="%s_%s" % (name, tag), num_filter=channels,
                                  kernel=(kernel, kernel), pad=(kernel // 2, kernel // 2))

    def __call__(self, feature, anchors):
        """The :class:`LevelOutput` of ``feature`` with ``anchors`` (an :class:`AnchorLevel`)."""
        tag, count = anchors.tag, anchors.num_anchors
        hidden = relu(self._conv(feature, "rpn_conv_3x3", tag, self.channels, 3),
                      "rpn_conv_3x3_relu_" + tag)
        return LevelOutput(anchors, feature,
                           self._conv(hidden, "rpn_cls_score", tag, 2 * count, 1),
                           self._conv(hidden, "rpn_bbox_pred", tag, 4 * count, 1))


def flat_scores(score, tag):
    """``(B, 2, A*H*W)``: background and object logits as a class axis, anchors in the
    (anchor, row, column) order of :func:`symbols.box_coder.grid_anchors`."""
    return mx.sym.Reshape(score, shape=(0, 2, -1), name="rpn_cls_score_flat_" + tag)


def flat_deltas(deltas, count, tag):
    """``(B, A*H*W, 4)``: the deltas of each anchor, in :func:`flat_scores`' order."""
    deltas = mx.sym.Reshape(deltas, shape=(0, count, 4, -1), name="rpn_deltas_by_anchor_" + tag)
    deltas = mx.sym.transpose(deltas, axes=(0, 1, 3, 2), name="rpn_deltas_last_" + tag)
    return mx.sym.Reshape(deltas, shape=(0, -1, 4), name="rpn_deltas_flat_" + tag)


def object_probabilities(score, tag):
    """``(B, A*H*W)`` object probabilities of the two-class softmax."""
    prob = mx.sym.softmax(flat_scores(score, tag), axis=1, name="rpn_cls_prob_" + tag)
    prob = mx.sym.slice_axis(prob, axis=1, begin=1, end=2, name="rpn_object_prob_" + tag)
    return mx.sym.Reshape(prob, shape=(0, -1), name="rpn_object_scores_" + tag)


def gluoncv_base_anchors(stride, scales, ratios):
    """``(len(ratios) * len(scales), 4)`` anchors of the first cell as GluonCV (and the
    original Faster R-CNN) makes them, ratio-major like
    :func:`symbols.box_coder.base_anchors`: the pixel window ``[0, stride - 1]``
    reshaped to each ratio with its sides rounded, then scaled, ``x2 - x1 + 1`` wide and
    centred on ``(stride - 1) / 2``."""
    centre = 0.5 * (stride - 1)
    anchors = []
    for ratio in ratios:
        width = np.round(np.sqrt(stride * stride / ratio))
        height = np.round(width * ratio)
        for scale in scales:
            half_w, half_h = 0.5 * (width * scale - 1), 0.5 * (height * scale - 1)
            anchors.append([centre - half_w, centre - half_h, centre + half_w, centre + half_h])
    return np.array(anchors, dtype=np.float32)


def level_base_anchors(anchors, convention):
    """The first cell's anchors ``(A, 4)`` of ``anchors`` (an :class:`AnchorLevel`) that the
    proposals of ``convention`` decode against: GluonCV's pixel windows
    (:func:`gluoncv_base_anchors`) or the zoo's continuous ones
    (:func:`symbols.box_coder.base_anchors`). The RPN's training targets match against
    the same (:func:`rpn_losses`)."""
    make = gluoncv_base_anchors if convention == "gluoncv" else box_coder.base_anchors
    return make(anchors.stride, anchors.scales, anchors.ratios)


def _anchor_map(feature, anchors, base):
    """``(1, A, H, W, 4)``: the first cell's anchors ``base`` shifted to every cell of the
    feature map's own ``H x W``, computed in the graph so that they follow the bound shape."""
    tag, stride = anchors.tag, anchors.stride
    count = len(base)
    name = lambda what: "rpn_anchor_%s_%s" % (what, tag)  # noqa: E731
    template = mx.sym.BlockGrad(feature, name=name("template"))
    cols = mx.sym.contrib.arange_like(template, axis=3, name=name("cols"))
    rows = mx.sym.contrib.arange_like(template, axis=2, name=name("rows"))
    cols = mx.sym.Reshape(scalar("_mul_scalar", cols, stride, name("cols_px")),
                          shape=(1, 1, 1, -1), name=name("shift_x"))
    rows = mx.sym.Reshape(scalar("_mul_scalar", rows, stride, name("rows_px")),
                          shape=(1, 1, -1, 1), name=name("shift_y"))
    shift_x = mx.sym.broadcast_add(cols, mx.sym.zeros_like(rows, name=name("zero_y")),
                                   name=name("grid_x"))  # (1, 1, H, W)
    shift_y = mx.sym.broadcast_add(rows, mx.sym.zeros_like(cols, name=name("zero_x")),
                                   name=name("grid_y"))
    corners = []
    for k, shift in enumerate([shift_x, shift_y, shift_x, shift_y]):
        offset = mx.sym.Reshape(constant(base[:, k], name("base%d" % k)),
                                shape=(1, count, 1, 1), name=name("base%d_map" % k))
        corners.append(mx.sym.expand_dims(mx.sym.broadcast_add(
            offset, shift, name=name("corner%d" % k)), axis=4, name=name("corner%d_col" % k)))
    return mx.sym.concat(*corners, dim=4, name=name("corners"))


def anchor_grid(feature, anchors):
    """``(A * H * W, 4)`` anchors of :func:`symbols.box_coder.grid_anchors` for the
    feature map's own ``H x W``; ``anchors`` an :class:`AnchorLevel`."""
    base = level_base_anchors(anchors, "zoo")
    return mx.sym.Reshape(_anchor_map(feature, anchors, base), shape=(-1, 4),
                          name="rpn_anchor_flat_" + anchors.tag)


def _decode(anchors, deltas, tag, clip):
    """Continuous decoding of ``deltas`` ``(B, N, 4)`` on ``anchors`` ``(B, N, 4)``, as
    :func:`symbols.box_coder.decode` with ``dw``, ``dh`` clipped at ``clip`` (None:
    not clipped)."""
    def part(x, k, what):
        return mx.sym.slice_axis(x, axis=2, begin=k, end=k + 1, name="rpn_%s%d_%s" % (what, k, tag))

    name = lambda what: "rpn_%s_%s" % (what, tag)  # noqa: E731
    ax1, ay1, ax2, ay2 = (part(anchors, k, "anchor_c") for k in range(4))
    dx, dy, dw, dh = (part(deltas, k, "delta_") for k in range(4))
    aw = mx.sym.elemwise_sub(ax2, ax1, name=name("anchor_w"))
    ah = mx.sym.elemwise_sub(ay2, ay1, name=name("anchor_h"))
    out = []
    for axis, low, size, d, ds in (("x", ax1, aw, dx, dw), ("y", ay1, ah, dy, dh)):
        half = scalar("_mul_scalar", size, 0.5, name("anchor_half_" + axis))
        centre = mx.sym.elemwise_add(low, half, name=name("anchor_c" + axis))
        centre = mx.sym.elemwise_add(centre, mx.sym.elemwise_mul(d, size, name=name(
            "shift_" + axis)), name=name("pred_c" + axis))
        if clip is not None:
            ds = scalar("_minimum_scalar", ds, clip, name("clip_d" + axis))
        grow = mx.sym.exp(ds, name=name("grow_" + axis))
        half = mx.sym.elemwise_mul(half, grow, name=name("pred_half_" + axis))
        out.append((mx.sym.elemwise_sub(centre, half, name=name("pred_%s1" % axis)),
                    mx.sym.elemwise_add(centre, half, name=name("pred_%s2" % axis))))
    (x1, x2), (y1, y2) = out
    return mx.sym.concat(x1, y1, x2, y2, dim=2, name=name("decoded"))


def _image_part(im_info, column, name):
    """Column ``column`` of ``im_info`` (0 height, 1 width, 2 scale) as ``(B, 1)``."""
    return mx.sym.slice_axis(im_info, axis=1, begin=column, end=column + 1, name=name)


def _clip_to_image(boxes, im_info, tag):
    height = _image_part(im_info, 0, "rpn_image_height_" + tag)
    width = _image_part(im_info, 1, "rpn_image_width_" + tag)
    bound = mx.sym.Reshape(mx.sym.concat(width, height, width, height, dim=1,
                                         name="rpn_image_bound_" + tag), shape=(0, 1, 4),
                           name="rpn_image_bound_rows_" + tag)
    return mx.sym.broadcast_minimum(mx.sym.relu(boxes, name="rpn_clip_low_" + tag), bound,
                                    name="rpn_clipped_" + tag)


def _drop_small(scores, boxes, im_info, min_size, tag):
    """``scores`` ``(B, N, 1)`` with -1 for boxes narrower or shorter than ``min_size``
    pixels of the original image (``min_size`` times the scale of ``im_info``)."""
    scale = _image_part(im_info, 2, "rpn_image_scale_" + tag)
    least = mx.sym.Reshape(scalar("_mul_scalar", scale, min_size, "rpn_min_size_px_" + tag),
                           shape=(0, 1, 1), name="rpn_min_size_" + tag)
    x1, y1, x2, y2 = (mx.sym.slice_axis(boxes, axis=2, begin=k, end=k + 1,
                                        name="rpn_clipped_%d_%s" % (k, tag)) for k in range(4))
    short = mx.sym.broadcast_minimum(mx.sym.elemwise_sub(x2, x1, name="rpn_box_w_" + tag),
                                     mx.sym.elemwise_sub(y2, y1, name="rpn_box_h_" + tag),
                                     name="rpn_short_side_" + tag)
    big = mx.sym.broadcast_greater_equal(short, least, name="rpn_big_enough_" + tag)
    return mx.sym.where(big, scores, scalar("_minus_scalar", big, 1.0, "rpn_small_" + tag),
                        name="rpn_sized_scores_" + tag)


def _pad_rows(x, count, value, tag, what):
    """``x`` ``(B, N, ...)`` followed by ``count`` rows of ``value``."""
    shape = (1, count) + ((4,) if what == "deltas" else ())
    pad = mx.sym.full(shape=shape, val=float(value), name="rpn_pad_%s_%s" % (what, tag))
    pad = mx.sym.broadcast_like(pad, x, lhs_axes=(0,), rhs_axes=(0,),
                                name="rpn_pad_%s_batch_%s" % (what, tag))
    return mx.sym.concat(x, pad, dim=1, name="rpn_%s_padded_%s" % (what, tag))


def level_candidates(level, im_info, settings):
    """``(B, pre_nms_top_n, 5)`` rows ``[score, x1, y1, x2, y2]`` of one :class:`LevelOutput`,
    sorted by score: its ``pre_nms_top_n`` best anchors by object probability, decoded,
    clipped to the valid image, after NMS; score -1 where too small or suppressed."""
    tag, pre = level.anchors.tag, settings.pre_nms_top_n
    scores = object_probabilities(level.score, tag)
    deltas = flat_deltas(level.deltas, level.anchors.num_anchors, tag)
    # pre_nms_top_n empty candidates (score -1, the last anchor) after the real ones, so
    # that top-k never asks a small feature map for more anchors than it has.
    scores = _pad_rows(scores, pre, -1.0, tag, "scores")
    deltas = _pad_rows(deltas, pre, 0.0, tag, "deltas")
    top_scores, top_index = mx.sym.topk(scores, axis=1, k=pre, ret_typ="both",
                                        is_ascend=False, name="rpn_pre_nms_topk_" + tag)
    top_deltas = gather_rows(deltas, top_index, "rpn_top_deltas_" + tag)  # (B, pre, 4)
    top_anchors = mx.sym.take(anchor_grid(level.feature, level.anchors), top_index, axis=0,
                              mode="clip", name="rpn_top_anchors_" + tag)
    boxes = _clip_to_image(_decode(top_anchors, top_deltas, tag, settings.delta_clip),
                           im_info, tag)
    top_scores = mx.sym.Reshape(top_scores, shape=(0, 0, 1), name="rpn_top_scores_" + tag)
    rows = mx.sym.concat(_drop_small(top_scores, boxes, im_info, settings.min_size, tag),
                         boxes, dim=2, name="rpn_candidates_" + tag)
    return nms(rows, "rpn_nms_" + tag, settings.nms_threshold, -0.5, with_class=False)


def proposals(levels, im_info, settings):
    """``(B * post_nms_top_n, 5)`` proposals ``[batch index, x1, y1, x2, y2]`` in pixels,
    sorted by score within each image, from the :class:`LevelOutput` of every RPN level;
    ``settings`` a :class:`ProposalSettings`.

    Per image and level: the ``pre_nms_top_n`` best anchors by object probability; continuous
    decoding (:mod:`symbols.box_coder`); clipping to ``[0, width] x [0, height]`` of
    ``im_info``; boxes narrower or shorter than ``min_size * scale`` get score -1 and are
    dropped; NMS (``box_nms``, continuous IoU, ``nms_threshold``) within the level, as
    Detectron2 does. Then the ``post_nms_top_n`` best of all levels are kept. An image with
    fewer survivors repeats its best proposal to fill its rows; one without any (an untrained
    RPN can throw every box off the image) gets its whole valid area.

    NMS per level costs the sum of the levels' squared candidate counts rather than the
    square of their sum (MXNet's CPU ``box_nms`` compares about every pair when few boxes
    overlap, as among an RPN's candidates).

    In the ``"gluoncv"`` convention the proposals are :func:`gluoncv_proposals`'.
    """
    if settings.convention == "gluoncv":
        return gluoncv_proposals(levels, im_info, settings)
    rows = concat([level_candidates(level, im_info, settings) for level in levels], 1,
                   "rpn_candidates")
    scores = mx.sym.Reshape(mx.sym.slice_axis(rows, axis=2, begin=0, end=1,
                                              name="rpn_candidate_score"),
                            shape=(0, -1), name="rpn_candidate_scores")
    best = mx.sym.topk(scores, axis=1, k=settings.post_nms_top_n, ret_typ="indices",
                       is_ascend=False, name="rpn_post_nms_topk")
    return _filled_rois(gather_rows(rows, best, "rpn_kept"), im_info)


def gluoncv_level_rows(level, im_info, settings):
    """``(B, A*H*W, 5)`` rows ``[score, x1, y1, x2, y2]`` of every anchor of one
    :class:`LevelOutput` as GluonCV's RPN makes them, in its (row, column, anchor) order:
    anchors of :func:`gluoncv_base_anchors`; the object probability ``sigmoid(object -
    background)`` (GluonCV's sigmoid of its one logit, bit for bit when the background logit
    is 0); every anchor decoded (``box_decode``); clipped to the valid image; score -1 where
    ``x2 - x1 + 1`` or ``y2 - y1 + 1`` is under ``min_size`` pixels of the input."""
    tag, count = level.anchors.tag, level.anchors.num_anchors
    name = lambda what: "rpn_%s_%s" % (what, tag)  # noqa: E731
    background = mx.sym.slice_axis(level.score, axis=1, begin=0, end=count,
                                   name=name("background_logit"))
    logit = mx.sym.elemwise_sub(mx.sym.slice_axis(level.score, axis=1, begin=count,
                                                  end=2 * count, name=name("object_logit")),
                                background, name=name("object_margin"))
    scores = mx.sym.Reshape(mx.sym.transpose(mx.sym.sigmoid(logit, name=name("object_prob")),
                                             axes=(0, 2, 3, 1), name=name("prob_last")),
                            shape=(0, -1, 1), name=name("object_scores"))
    deltas = mx.sym.Reshape(mx.sym.transpose(level.deltas, axes=(0, 2, 3, 1),
                                             name=name("deltas_last")),
                            shape=(0, -1, 4), name=name("deltas_by_cell"))
    base = level_base_anchors(level.anchors, "gluoncv")
    anchors = mx.sym.Reshape(mx.sym.transpose(_anchor_map(level.feature, level.anchors, base),
                                              axes=(0, 2, 3, 1, 4), name=name("anchor_cells")),
                             shape=(1, -1, 4), name=name("anchors_by_cell"))
    clip = -1.0 if settings.delta_clip is None else settings.delta_clip
    boxes = mx.sym.contrib.box_decode(deltas, anchors, std0=1.0, std1=1.0, std2=1.0, std3=1.0,
                                      clip=clip, format="corner", name=name("decoded"))
    boxes = _clip_to_image(boxes, im_info, tag)
    return mx.sym.concat(_drop_small_windows(scores, boxes, settings.min_size, tag), boxes,
                         dim=2, name=name("rows"))


def _drop_small_windows(scores, boxes, min_size, tag):
    """``scores`` ``(B, N, 1)`` with -1 where a box's pixel-window side (``x2 - x1 + 1``) is
    under ``min_size`` pixels of the input, as GluonCV drops them."""
    x1, y1, x2, y2 = (mx.sym.slice_axis(boxes, axis=2, begin=k, end=k + 1,
                                        name="rpn_window_%d_%s" % (k, tag)) for k in range(4))
    sides = [scalar("_plus_scalar", mx.sym.elemwise_sub(high, low, name="rpn_span_%s_%s"
                                                        % (axis, tag)), 1.0,
                    "rpn_window_%s_%s" % (axis, tag))
             for axis, low, high in (("w", x1, x2), ("h", y1, y2))]
    short = mx.sym.broadcast_minimum(*sides, name="rpn_window_short_" + tag)
    big = scalar("_greater_equal_scalar", short, min_size, "rpn_window_big_" + tag)
    return mx.sym.where(big, scores, scalar("_minus_scalar", big, 1.0, "rpn_window_small_" + tag),
                        name="rpn_window_scores_" + tag)


def gluoncv_proposals(levels, im_info, settings):
    """``(B * post_nms_top_n, 5)`` proposals ``[batch index, x1, y1, x2, y2]`` as GluonCV's
    RPN makes them: the rows of every level (:func:`gluoncv_level_rows`) together, the
    ``pre_nms_top_n`` best valid ones of all levels, one NMS over them (``box_nms``), the
    first ``post_nms_top_n`` rows of its output, rows NMS left empty kept as the box ``[-1,
    -1, -1, -1]``."""
    post = settings.post_nms_top_n
    rows = concat([gluoncv_level_rows(level, im_info, settings) for level in levels], 1,
                   "rpn_rows")
    # post empty rows after the real ones, so that a small image still fills its post rows
    pad = mx.sym.broadcast_like(mx.sym.full(shape=(1, post, 5), val=rcnn_targets.EMPTY_ROW,
                                            name="rpn_pad_rows"),
                                rows, lhs_axes=(0,), rhs_axes=(0,), name="rpn_pad_rows_batch")
    rows = mx.sym.concat(rows, pad, dim=1, name="rpn_rows_padded")
    kept = nms(rows, "rpn_nms", settings.nms_threshold, 0.0, settings.pre_nms_top_n,
               with_class=False)
    kept = mx.sym.slice_axis(kept, axis=1, begin=0, end=post, name="rpn_kept")
    boxes = mx.sym.slice_axis(kept, axis=2, begin=1, end=5, name="rpn_kept_boxes")
    index = mx.sym.broadcast_like(mx.sym.Reshape(
        mx.sym.contrib.arange_like(boxes, axis=0, name="rpn_roi_batch_range"),
        shape=(-1, 1, 1), name="rpn_roi_batch_col"),
        mx.sym.slice_axis(boxes, axis=2, begin=0, end=1, name="rpn_kept_x1"),
        name="rpn_roi_batch_index")
    rois = mx.sym.concat(index, boxes, dim=2, name="rpn_roi_rows")
    return mx.sym.Reshape(rois, shape=(-1, 5), name="rpn_rois")


def _filled_rois(kept, im_info):
    """``(B * N, 5)`` rois of NMS output ``kept`` ``(B, N, 5)``: rows NMS left empty repeat
    the best proposal; an image without any gets its whole valid area ``[0, 0, w, h]``."""
    valid = scalar("_greater_equal_scalar",
                    mx.sym.slice_axis(kept, axis=2, begin=0, end=1, name="rpn_kept_score"), 0.0,
                    "rpn_kept_valid")
    kept = mx.sym.slice_axis(kept, axis=2, begin=1, end=5, name="rpn_kept_boxes")
    height = _image_part(im_info, 0, "rpn_image_height")
    width = _image_part(im_info, 1, "rpn_image_width")
    whole = mx.sym.concat(mx.sym.zeros_like(height, name="rpn_image_x0"),
                          mx.sym.zeros_like(height, name="rpn_image_y0"), width, height, dim=1,
                          name="rpn_image_box")
    whole = mx.sym.Reshape(whole, shape=(0, 1, 4), name="rpn_image_box_row")
    best = mx.sym.slice_axis(kept, axis=1, begin=0, end=1, name="rpn_best_box")
    best_valid = mx.sym.slice_axis(valid, axis=1, begin=0, end=1, name="rpn_best_valid")
    best = mx.sym.where(mx.sym.broadcast_like(best_valid, best, name="rpn_best_valid_box"),
                        best, whole, name="rpn_best_or_image")
    best = mx.sym.broadcast_like(best, kept, name="rpn_best_boxes")
    kept = mx.sym.where(mx.sym.broadcast_like(valid, kept, name="rpn_kept_valid_boxes"), kept,
                        best, name="rpn_filled")
    index = mx.sym.broadcast_like(mx.sym.Reshape(
        mx.sym.contrib.arange_like(kept, axis=0, name="rpn_roi_batch_range"),
        shape=(-1, 1, 1), name="rpn_roi_batch_col"), valid, name="rpn_roi_batch_index")
    rois = mx.sym.concat(index, kept, dim=2, name="rpn_roi_rows")
    return mx.sym.Reshape(rois, shape=(-1, 5), name="rpn_rois")


def without_gradient(level):
    tag = level.anchors.tag
    return LevelOutput(level.anchors, level.feature,
                       mx.sym.BlockGrad(level.score, name="rpn_cls_score_nograd_" + tag),
                       mx.sym.BlockGrad(level.deltas, name="rpn_bbox_pred_nograd_" + tag))


def rpn_losses(levels, label, im_info, sampling, convention):
    """``(class probabilities, box loss, anchor labels)`` of the RPN over the anchors of every
    level, labelled and sampled together per image by the ``zoo_rpn_target`` operator, which
    is given the anchors the proposals of ``convention`` decode against and, for
    ``"gluoncv"``, labels them as GluonCV does. Under ``"gluoncv"`` the background logits
    take no gradient (:func:`object_logit_only`)."""
    anchors = [[level.anchors.stride, level_base_anchors(level.anchors, convention).tolist()]
               for level in levels]
    targets = mx.sym.Custom(*[level.score for level in levels], label, im_info,
                            name="rpn_target", op_type="zoo_rpn_target",
                            levels=json.dumps(anchors), batch_size=sampling.rpn_batch_size,
                            fg_fraction=sampling.rpn_fg_fraction,
                            positive_iou=sampling.rpn_positive_iou,
                            negative_iou=sampling.rpn_negative_iou, labelling=convention)
    labels = targets["rpn_target_label"]
    trained = [object_logit_only(level) if convention == "gluoncv" else level.score
               for level in levels]
    scores = concat([flat_scores(score, level.anchors.tag)
                     for score, level in zip(trained, levels)], 2, "rpn_cls_score_all")
    deltas = concat([flat_deltas(level.deltas, level.anchors.num_anchors, level.anchors.tag)
                      for level in levels], 1, "rpn_bbox_pred_all")
    prob, box_loss = rpn_loss_terms(scores, labels, deltas, targets["rpn_target_bbox_target"],
                                    targets["rpn_target_bbox_weight"])
    return prob, box_loss, labels


def object_logit_only(level):
    """``level``'s scores with no gradient into the background logits: GluonCV's RPN scores
    an anchor with one logit ``z`` (sigmoid), ours ``sigmoid(object - background)`` in the
    ``"gluoncv"`` convention (:mod:`zoo.gluoncv.rcnn` imports ``z`` as the object row and
    zeros as the background row). Trained as they are, both rows would take the gradient
    (with opposite signs) and their difference would move at twice GluonCV's rate; with the
    background row fixed, the object row takes GluonCV's step exactly (and the background
    row, zero, stays zero under weight decay)."""
    count, tag = level.anchors.num_anchors, level.anchors.tag
    background = mx.sym.slice_axis(level.score, axis=1, begin=0, end=count,
                                   name="rpn_cls_score_background_" + tag)
    objects = mx.sym.slice_axis(level.score, axis=1, begin=count, end=2 * count,
                                name="rpn_cls_score_object_" + tag)
    return mx.sym.concat(mx.sym.BlockGrad(background, name="rpn_cls_score_background_fixed_"
                                          + tag), objects, dim=1,
                         name="rpn_cls_score_trained_" + tag)


def rpn_loss_terms(scores, labels, deltas, bbox_target, bbox_weight):
    """``(class probabilities, box loss)`` of the RPN: a two-way softmax over the sampled
    anchors (label -1 is not sampled) and smooth L1 (sigma 3) of the positives' deltas, each
    summed and divided by the batch's sampled anchors, as GluonCV's Faster R-CNN recipe
    divides its sigmoid cross-entropy and box loss. The box term's divisor is the count
    sampled, not the nominal ``rpn_batch_size`` per image: an image with too few anchors for a
    full sample (a small input) would otherwise train its boxes more slowly."""
    prob = mx.sym.SoftmaxOutput(scores, labels, name="rpn_cls_loss", multi_output=True,
                                use_ignore=True, ignore_label=-1, normalization="valid")
    per_sampled = one_over_count(scalar("_greater_equal_scalar", labels, 0, "rpn_sampled"),
                                 "rpn_per_sampled")
    box_loss = smooth_l1_loss(scale_gradient(deltas, per_sampled, 3, "rpn_bbox_pred_scaled"),
                              bbox_target, bbox_weight, "rpn_bbox", 3.0, 1.0)
    return prob, box_loss
