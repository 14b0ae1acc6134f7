"""Faster R-CNN C4's side of ``zoo benchmark-parity`` (:mod:`zoo_bench.parity`): GluonCV's
``FasterRCNN`` class on its ``mobilenetv2_1.0`` split at stride 16, the zoo's
``faster_rcnn_mobilenetv2_gluoncv`` (:data:`CONFIG`), one the import of the other.

GluonCV's network is built from the zoo config's fields (:func:`rcnn_network`), so that the
one table of its settings is the config; the import's anchor check then proves the two
agree. GluonCV publishes no Faster R-CNN on a light base; its presets are ResNet-50/101,
which train for hours on two cores.
"""
import os

import mxnet as mx
import numpy as np

from zoo_bench.parity_gluoncv import gluon_faster_rcnn

__all__ = ["CONFIG", "import_gluon", "initialised_rcnn", "rcnn_network"]

CONFIG = "faster_rcnn_mobilenetv2_gluoncv"
"""The zoo's config of the compared network."""
GLUONCV_NAME = "FasterRCNN(mobilenetv2_1.0)"
"""How the artifacts name GluonCV's network (GluonCV has no model of that name)."""
MAX_NUM_GT = 100
"""GluonCV's ``max_num_gt`` of its VOC presets: the sampler's room for ground truths."""


def zoo_spec(classes, **fields):
    """The resolved :data:`CONFIG` for ``classes`` with ``fields`` changed."""
    from zoo.model import get_model
    return get_model(CONFIG, num_classes=len(classes), class_names=list(classes),
                     **fields).spec


def rcnn_network(spec, batch_size=1):
    """``gluon_faster_rcnn``'s network of the zoo config ``spec`` at ``batch_size`` images a
    device: ``get_faster_rcnn``'s keywords (``"rcnn"``), where the base is cut (``"cut"``)
    and the RPN targets' settings of ``FasterRCNNDefaultTrainTransform`` (``"rpn_targets"``),
    each read off the config field that says it."""
    from zoo.gluoncv.rcnn import MOBILENETV2_CUT
    stride = spec["rpn_stride"]
    return {"base": "mobilenetv2_1.0", "cut": MOBILENETV2_CUT, "rcnn": dict(
        short=spec["data_shape"], max_size=spec["max_size"], train_patterns=None,
        nms_thresh=spec["nms_threshold"], nms_topk=400, post_nms=spec["max_detections"],
        roi_mode="align", roi_size=list(spec["roi_size"]), strides=stride, clip=None,
        rpn_channel=spec["rpn_channels"], base_size=stride, scales=list(spec["anchor_scales"]),
        ratios=list(spec["anchor_ratios"]), alloc_size=[128, 128],
        rpn_nms_thresh=spec["rpn_nms_threshold"],
        rpn_train_pre_nms=spec["rpn_pre_nms_top_n_train"],
        rpn_train_post_nms=spec["rpn_post_nms_top_n_train"],
        rpn_test_pre_nms=spec["rpn_pre_nms_top_n_test"],
        rpn_test_post_nms=spec["rpn_post_nms_top_n_test"], rpn_min_size=spec["rpn_min_size"],
        per_device_batch_size=batch_size, num_sample=spec["rcnn_batch_rois"],
        pos_iou_thresh=spec["rcnn_fg_iou"], pos_ratio=spec["rcnn_fg_fraction"],
        max_num_gt=MAX_NUM_GT),
        "rpn_targets": dict(num_sample=spec["rpn_batch_size"],
                            pos_iou_thresh=spec["rpn_positive_iou"],
                            neg_iou_thresh=spec["rpn_negative_iou"],
                            pos_ratio=spec["rpn_fg_fraction"])}


def initialised_rcnn(network, classes):
    """GluonCV's network of ``network`` for ``classes``, initialised by GluonCV
    (``initialize()``: its own normals for the RPN and the predictors, zero biases), its
    shapes inferred on a first pass, then the base's convolution weights drawn as the zoo
    draws them (He-normal over the fan-out, :meth:`zoo.model.DetectionModel.init_params`):
    GluonCV's default for a base it did not pretrain is uniform in +-0.07, which leaves
    MobileNetV2's activations vanishing through 50 layers."""
    net = gluon_faster_rcnn(network, classes)
    net.initialize()
    short, long = network["rcnn"]["short"], network["rcnn"]["max_size"]
    net(mx.nd.zeros((1, 3, short, long)))
    weights = mx.init.Xavier(rnd_type="gaussian", factor_type="out", magnitude=2)
    for block in (net.features, net.top_features):
        for name, param in block.collect_params(".*conv.*_weight").items():
            array = param.data()
            weights(mx.init.InitDesc(name), array)
            param.set_data(array)
    return net


def import_gluon(net, prefix, source, **fields):
    """GluonCV's ``net`` (of :data:`CONFIG`'s :func:`rcnn_network`) as the zoo artifact
    ``prefix``, epoch 0, its config's ``fields`` changed; its arrays checked one for one and
    its anchors against the config's by the import."""
    from zoo.gluoncv import Importer, mapping
    from zoo.gluoncv.common import import_net
    importer = Importer(GLUONCV_NAME, CONFIG, "voc", mapping("rcnn", "map_c4_mobilenetv2"))
    os.makedirs(os.path.dirname(prefix) or ".", exist_ok=True)
    import_net(importer, net, prefix, source, **fields)
    return prefix
