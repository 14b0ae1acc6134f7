"""Faster R-CNN with a feature pyramid network (Lin et al., 2017): the pyramid, the RPN over
its levels, multi-level ROIAlign and the two-layer box head.

The pyramid taps backbone layers whose strides double from level to level (the config
names them; :class:`zoo.architectures.faster_rcnn_fpn.FasterRCNNFPN` proves them from the
graph). Each tap gets a lateral 1x1 convolution to ``channels``; from the coarsest down,
each level adds the nearest-neighbour 2x upsampling of the level above, then a 3x3
convolution makes its output. Levels are named by ``log2(stride)``: ``p2`` has stride 4.
``extra_levels`` coarser maps serve the RPN only: each a stride-2 subsampling of the one
below (Detectron2's ``LastLevelMaxPool``), or (``extra_level="lateral_conv"``) a 3x3
stride-2 convolution of the one below, the first of the coarsest lateral, as GluonCV makes
its P6.

One RPN head (:class:`symbols.rpn.RPNHead`, ``channels`` wide) runs on every
level, with one anchor size per level; :func:`symbols.rpn.proposals` merges
the levels. Each ROI is pooled from the level ``floor(canonical_level + log2(sqrt(w h) /
canonical_size))``, clamped to the pyramid's levels, as in the paper (in the ``"gluoncv"``
convention, GluonCV's ``floor(canonical_level + log2(sqrt((w + 1) (h + 1)) / canonical_size
+ 1e-6))``); then two fully connected layers of ``units`` and the class and per-class box
predictors of the C4 model.

Operators are named ``fpn_*`` (pyramid), ``rpn_*`` (RPN head and proposals), ``roi_*``
(level assignment and ROIAlign), ``head_fc*`` and ``rcnn_*`` (box head, decoding, NMS), so a
profile can group the time by part.
"""
import math
from dataclasses import dataclass

import mxnet as mx

from symbols.faster_rcnn import detection_graph, training_graph

from symbols.layers import scalar

from symbols.rpn import AnchorLevel, RPNHead
from symbols.layers import StrictNameManager, add, conv, conv_bn, dense, pool, relu

__all__ = ["EXTRA_LEVELS", "Pyramid", "PyramidBoxHead", "anchor_levels", "box_features",
           "inference_symbol", "level_tag", "pooled_rois", "pyramid_features", "roi_levels",
           "training_symbol"]

EXTRA_LEVELS = ("max_pool", "lateral_conv")
"""How the RPN-only levels are made (:class:`Pyramid`)."""
UPSAMPLE_SLACK = 2
"""Rows and columns the 2x upsampling may fall short of the finer map by: a backbone with
unpadded convolutions (Inception-v3) gives maps of ``2n + 1`` or ``2n + 2`` under ``n``."""


@dataclass(frozen=True)
class Pyramid:
    """Backbone ``layers`` (shallowest first) at ``strides``, mapped to ``channels``, and
    ``extra_levels`` coarser RPN-only levels; with ``batch_norm`` every lateral and output
    convolution is followed by batch normalisation (Detectron2's ``FPN.NORM``), which keeps
    the levels' scale in check when the backbone is not pretrained and folds into the
    convolutions when deployed. ``extra_level`` (one of :data:`EXTRA_LEVELS`) says how the
    extra levels are made; the RPN head is ``rpn_channels`` wide (None: ``channels``)."""
    layers: tuple
    strides: tuple
    channels: int
    extra_levels: int
    batch_norm: bool = False
    extra_level: str = "max_pool"
    rpn_channels: int = None

    @property
    def all_strides(self):
        """The strides of every level, extra ones included."""
        top = self.strides[-1]
        return tuple(self.strides) + tuple(top * 2 ** (k + 1) for k in range(self.extra_levels))


@dataclass(frozen=True)
class PyramidBoxHead:
    """ROIAlign to ``roi_size`` on the level chosen by box size, two fully connected layers of
    ``units``, ``num_classes`` + background scores and per-class deltas normalised by
    ``box_stds``. A box of ``canonical_size`` pixels (square root of its area) maps to level
    ``canonical_level``; ``convention`` (one of
    :data:`symbols.rpn.CONVENTIONS`) says how a box's size is measured."""
    roi_size: tuple
    num_classes: int
    box_stds: tuple
    units: int
    canonical_size: float
    canonical_level: int
    convention: str = "zoo"


def level_tag(stride):
    """``p<k>`` for a level of stride ``2 ** k``."""
    return "p%d" % int(round(math.log2(stride)))


def anchor_levels(pyramid, sizes, ratios):
    """One :class:`~symbols.rpn.AnchorLevel` per pyramid level (extra levels
    included), with anchors of ``sizes[i]`` pixels on level ``i``."""
    return tuple(AnchorLevel(level_tag(stride), stride, (size / stride,), tuple(ratios))
                 for stride, size in zip(pyramid.all_strides, sizes))


def _upsample_like(coarse, fine, tag):
    """``coarse`` upsampled 2x (nearest) to the height and width of ``fine``."""
    up = mx.sym.UpSampling(coarse, scale=2, sample_type="nearest", num_args=1,
                           name="fpn_upsample_" + tag)
    up = mx.sym.pad(up, mode="edge", name="fpn_upsample_pad_" + tag,
                    pad_width=(0, 0, 0, 0, 0, UPSAMPLE_SLACK, 0, UPSAMPLE_SLACK))
    return mx.sym.slice_like(up, fine, axes=(2, 3), name="fpn_upsample_crop_" + tag)


def _conv(data, name, pyramid, kernel):
    if pyramid.batch_norm:
        return conv_bn(data, name, pyramid.channels, kernel=kernel, act=None)
    return conv(data, name, pyramid.channels, kernel=kernel, bias=True)


def pyramid_features(backbone, pyramid):
    """``{tag: feature}`` of every level, extra levels included."""
    internals = backbone.body().get_internals()
    tags = [level_tag(stride) for stride in pyramid.strides]
    laterals = [_conv(internals[layer + "_output"], "fpn_lateral_" + tag, pyramid, 1)
                for layer, tag in zip(pyramid.layers, tags)]
    merged = [laterals[-1]]
    for lateral, tag in zip(reversed(laterals[:-1]), reversed(tags[:-1])):
        merged.insert(0, add(lateral, _upsample_like(merged[0], lateral, tag),
                             "fpn_merge_" + tag))
    features = {tag: _conv(level, "fpn_output_" + tag, pyramid, 3)
                for level, tag in zip(merged, tags)}
    top = laterals[-1] if pyramid.extra_level == "lateral_conv" else features[tags[-1]]
    for stride in pyramid.all_strides[len(tags):]:
        tag = level_tag(stride)
        if pyramid.extra_level == "lateral_conv":
            top = conv(top, "fpn_subsample_" + tag, pyramid.channels, kernel=3, stride=2,
                       bias=True)
        else:
            top = pool(top, "fpn_subsample_" + tag, kind="max", kernel=1, stride=2)
        features[tag] = top
    return features


def roi_levels(rois, head, strides):
    """``(R, 1)`` the pyramid level ``k`` (stride ``2 ** k``) each ROI ``[batch, x1, y1, x2,
    y2]`` is pooled from."""
    def coordinate(k):
        return mx.sym.slice_axis(rois, axis=1, begin=k, end=k + 1, name="roi_coordinate_%d" % k)

    width = mx.sym.elemwise_sub(coordinate(3), coordinate(1), name="roi_width")
    height = mx.sym.elemwise_sub(coordinate(4), coordinate(2), name="roi_height")
    if head.convention == "gluoncv":
        ratio = _gluoncv_size_ratio(width, height, head.canonical_size)
    else:
        area = mx.sym.relu(mx.sym.elemwise_mul(width, height, name="roi_area"),
                           name="roi_area_pos")
        size = mx.sym.sqrt(scalar("_plus_scalar", area, 1e-6, "roi_area_eps"), name="roi_size")
        ratio = scalar("_div_scalar", size, head.canonical_size, "roi_size_ratio")
    level = scalar("_plus_scalar", mx.sym.log2(ratio, name="roi_log_size"),
                   head.canonical_level, "roi_level_raw")
    low, high = (math.log2(stride) for stride in (strides[0], strides[-1]))
    return mx.sym.clip(mx.sym.floor(level, name="roi_level_floor"), low, high, name="roi_level")


def _gluoncv_size_ratio(width, height, canonical_size):
    """GluonCV's ``sqrt((w + 1) (h + 1)) / canonical_size + 1e-6``: a box's pixel-window size
    over the canonical one, in GluonCV's order of operations."""
    window_w = scalar("_plus_scalar", width, 1.0, "roi_window_width")
    window_h = scalar("_plus_scalar", height, 1.0, "roi_window_height")
    size = mx.sym.sqrt(mx.sym.elemwise_mul(window_w, window_h, name="roi_area"),
                       name="roi_size")
    return scalar("_plus_scalar", scalar("_div_scalar", size, canonical_size, "roi_size_ratio"),
                  1e-6, "roi_size_ratio_eps")


def _guarded(rois, tag):
    """``rois`` ``(R, 5)`` after a first ROI ``[0, 0, 0, 0, 0]`` (image 0), added by padding
    rather than a concat along axis 0, which MXNet's quantization pass logs."""
    grid = mx.sym.Reshape(rois, shape=(1, 1, -1, 5), name="roi_grid_" + tag)
    grid = mx.sym.pad(grid, mode="constant", constant_value=0.0, name="roi_guard_" + tag,
                      pad_width=(0, 0, 0, 0, 1, 0, 0, 0))
    return mx.sym.Reshape(grid, shape=(-1, 5), name="roi_guarded_" + tag)


def pooled_rois(features, rois, head, strides):
    """ROIAlign of every ROI on its own level (:func:`roi_levels`): each level pools only its
    ROIs (the others get batch index -1, which ROIAlign skips) and the levels add."""
    level = roi_levels(rois, head, strides)
    batch = mx.sym.slice_axis(rois, axis=1, begin=0, end=1, name="roi_batch_index")
    boxes = mx.sym.slice_axis(rois, axis=1, begin=1, end=5, name="roi_boxes")
    pooled = []
    for stride in strides:
        tag = level_tag(stride)
        mine = scalar("_equal_scalar", level, math.log2(stride), "roi_on_" + tag)
        # batch index on this level, -1 elsewhere: mine * (batch + 1) - 1
        index = scalar("_minus_scalar", mx.sym.elemwise_mul(
            mine, scalar("_plus_scalar", batch, 1.0, "roi_batch_plus_" + tag),
            name="roi_batch_mine_" + tag), 1.0, "roi_batch_" + tag)
        # MXNet's CPU ROIAlign skips a ROI of batch index -1 but writes a zero to element n of
        # the whole output for the n-th such ROI, inside the first ROI's block: a guard ROI
        # takes those writes, and the skipped ROIs' unwritten rows are zeroed below.
        level_rois = _guarded(mx.sym.concat(index, boxes, dim=1, name="roi_rows_" + tag), tag)
        level_pooled = mx.sym.slice_axis(mx.sym.contrib.ROIAlign(
            features[tag], level_rois, name="roi_align_" + tag, pooled_size=tuple(head.roi_size),
            spatial_scale=1.0 / stride, sample_ratio=2), axis=0, begin=1, end=None,
            name="roi_unguarded_" + tag)
        mine = mx.sym.broadcast_like(mx.sym.Reshape(mine, shape=(-1, 1, 1, 1),
                                                    name="roi_on_%s_map" % tag),
                                     level_pooled, name="roi_on_%s_pooled" % tag)
        pooled.append(mx.sym.where(mine, level_pooled, mx.sym.zeros_like(
            level_pooled, name="roi_zeros_" + tag), name="roi_pooled_" + tag))
    return pooled[0] if len(pooled) == 1 else mx.sym.add_n(*pooled, name="roi_pooled")


def box_features(features, rois, head, strides):
    """``(R, units)``: pooled ROIs through two fully connected layers with ReLU."""
    hidden = mx.sym.Flatten(pooled_rois(features, rois, head, strides), name="head_flatten")
    for name in ("head_fc6", "head_fc7"):
        hidden = relu(dense(hidden, name, head.units), name + "_relu")
    return hidden


def _rpn_levels(backbone, pyramid, anchors):
    features = pyramid_features(backbone, pyramid)
    head = RPNHead(anchors[0].num_anchors, channels=pyramid.rpn_channels or pyramid.channels)
    return features, [head(features[level.tag], level) for level in anchors]


def inference_symbol(backbone, pyramid, anchors, head, settings, decoding):
    """``data``, ``im_info`` to detections ``(B, max_detections, 6)``: ``pyramid`` a
    :class:`Pyramid`, ``anchors`` its :func:`anchor_levels`, ``head`` a
    :class:`PyramidBoxHead`, ``settings`` the test
    :class:`~symbols.rpn.ProposalSettings`, ``decoding`` a
    :class:`~symbols.faster_rcnn.Decoding`."""
    with StrictNameManager():
        features, levels = _rpn_levels(backbone, pyramid, anchors)
        return detection_graph(
            levels, lambda rois: box_features(features, rois, head, pyramid.strides),
            mx.sym.Variable("im_info"), head, settings, decoding)


def training_symbol(backbone, pyramid, anchors, head, settings, sampling):
    """The training graph, outputs as
    :data:`symbols.faster_rcnn.TRAINING_OUTPUTS`; arguments as
    :func:`inference_symbol` with the training proposal settings and a
    :class:`~symbols.faster_rcnn.Sampling`."""
    with StrictNameManager():
        features, levels = _rpn_levels(backbone, pyramid, anchors)
        return training_graph(
            levels, lambda rois: box_features(features, rois, head, pyramid.strides),
            mx.sym.Variable("im_info"), mx.sym.Variable("label"), head, settings, sampling)
