"""Faster R-CNN C4's side of ``zoo benchmark-parity`` (:mod:`zoo_bench.parity`): GluonCV's
``FasterRCNN`` class on its ``mobilenetv2_1.0`` split at stride 16, the zoo's
``faster_rcnn_mobilenetv2_gluoncv`` (:data:`CONFIG`), one the import of the other.

GluonCV's network is built from the zoo config's fields (:func:`rcnn_network`), so that the
one table of its settings is the config; the import's anchor check then proves the two
agree. GluonCV publishes no Faster R-CNN on a light base; its presets are ResNet-50/101,
which train for hours on two cores.
"""
import os
import warnings

import mxnet as mx
import numpy as np

from zoo_bench.parity_data import fitted_anchors
from zoo_bench.parity_gluoncv import embedded_classes, gluon_faster_rcnn, with_backbone

__all__ = ["CONFIG", "deterministic_fields", "import_epoch", "import_gluon", "initialised_rcnn",
           "network_request", "rcnn_network", "start", "step_check", "step_inputs",
           "step_network"]

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


def background_rows(net):
    """How many zeros the import adds to GluonCV's ``net``'s values: the zoo's RPN scores a
    background logit beside GluonCV's one object logit per anchor, and its box predictor has
    4 background rows (both zero, :mod:`zoo.gluoncv.rcnn`)."""
    score = net.rpn.score
    return (score.weight.data().size + score.bias.data().size
            + 4 * (net.box_predictor.weight.shape[1] + 1))


def importer():
    """The :class:`zoo.gluoncv.Importer` of GluonCV's network onto :data:`CONFIG`."""
    from zoo.gluoncv import Importer, mapping
    return Importer(GLUONCV_NAME, CONFIG, "voc", mapping("rcnn", "map_c4_mobilenetv2"))


def import_gluon(net, prefix, source, **fields):
    """GluonCV's ``net`` (of :data:`CONFIG`'s :func:`rcnn_network`) as the zoo artifact
    ``prefix``, epoch 0, its config's ``fields`` changed; its arrays checked one for one and
    its anchors against the config's by the import."""
    from zoo.gluoncv.common import import_net
    os.makedirs(os.path.dirname(prefix) or ".", exist_ok=True)
    import_net(importer(), net, prefix, source, **fields)
    return prefix


def size_fields(options):
    """The config fields of ``options.data_shape``: the short side, the long side at most 1.5
    times it (the embedded images' long sides are up to 1.25 times their short), and at most
    as many proposals kept after the RPN's NMS as a square input of that side has anchors:
    GluonCV's RPN slices that many rows off its anchors' and fails on fewer (its presets keep
    2000 in training at a short side of 600; a short side of 128 has 960 anchors). With
    ``options.anchors`` "fitted", the anchors fitted to the training boxes at that input
    (:func:`zoo_bench.parity_data.fitted_anchors`), on both sides."""
    short = options.data_shape
    spec = zoo_spec(embedded_classes())
    cells = (-(-short // spec["rpn_stride"])) ** 2
    anchors = cells * len(spec["anchor_scales"]) * len(spec["anchor_ratios"])
    fields = {"data_shape": short, "max_size": int(round(1.5 * short)),
              **{name: min(spec[name], anchors) for name in ("rpn_post_nms_top_n_train",
                                                             "rpn_post_nms_top_n_test")}}
    if options.anchors == "fitted":
        fields.update(fitted_anchors(options, CONFIG, embedded_classes(), **fields))
    return fields


def network_request(options):
    """GluonCV's network of ``options`` (:func:`rcnn_network` at their size and batch)."""
    return rcnn_network(zoo_spec(embedded_classes(), **size_fields(options)), options.batch_size)


def start(options, folder, params):
    """``(GluonCV's initialised network, saved to params, its import, the zeros it adds,
    where its backbone came from or None)``; --zoo-config's fields change the zoo's start
    alone."""
    classes = embedded_classes()
    net = initialised_rcnn(network_request(options), classes)
    backbone = with_backbone(options.backbone_from, importer(), net, **size_fields(options))
    net.save_parameters(params)
    prefix = import_gluon(net, os.path.join(folder, "init", "rcnn"), params,
                          **size_fields(options), **dict(options.zoo_config))
    return net, prefix, background_rows(net), backbone


def import_epoch(options, params, prefix):
    """GluonCV's network of a training epoch (its parameter file) as the artifact ``prefix``.
    The file also holds the R-CNN target generator's constants, which training made a child
    block (``_target_generator``): not parameters of the detector."""
    net = gluon_faster_rcnn(network_request(options), embedded_classes())
    net.load_parameters(params, ctx=mx.cpu(), ignore_extra=True)
    return import_gluon(net, prefix, params, **size_fields(options))


STEP_CHECK_STEPS = 2
"""SGD steps of the step check: the second step's losses show the first update (gradients,
update, batch norm). Not more: at the third step float rounding alone (another order of the
same ROIs, the zoo against itself) moves the terms by 5e-3, at the fourth by 1.4e-2
(measured), where the errors of interest move the second step's by 1e-2 and more."""
STEP_CHECK_LR = 0.005
"""The step check's learning rate: small enough that the steps on one image keep the loss
falling on both sides (a step check compares mechanics, not a recipe)."""
FIRST_STEP_TOLERANCE = 1e-5
"""Largest relative difference of any loss term at the first step, where both sides hold the
same parameters: the same targets, proposals, samples and losses agree to 1.2e-6 (measured,
seeds 0-2 on the ``hard`` and ``shapes`` presets' first images)."""
STEP_CHECK_TOLERANCE = 1e-2
"""Largest relative difference of any loss term at the second step. Measured: 2.7e-4 to
3.6e-4 on the ``hard`` preset's first image, 8e-5 to 4.3e-3 on the ``shapes`` preset's
(seeds 0-2; the RPN's and R-CNN's box terms), where the first gradients agree to 1.4e-3
(each convolution's) and 2.7e-3 (each batch norm's; the box head's own float32 gradient is
1.4e-3 off its float64 one) and the first updates to 5e-3, all but the projections'
batch-norm offsets, whose gradient is zero but for rounding (1e-8). The zoo against itself,
the same ROIs in another order: 1.1e-4 (hard), 6.9e-4 (shapes): the rest is float rounding
that each step amplifies. The RPN's box gradient scaled by 0.25 moves the terms by 1.2e-2
(hard) and 1.0 (shapes: R-CNN's box term); a changed labelling threshold moves the first
step's terms by far more (``rpn_negative_iou=0.1``: the RPN's box term 4.7x)."""
TERM_FLOOR = 0.01
"""Terms below it (R-CNN's box term on an image whose only positives are its ground truths,
whose targets are zero) are compared as differences, not ratios."""


STEP_CHECK_SIZE = (64, 96)
"""The step check's short side and long-side bound: small enough that R-CNN can run on
every anchor's proposal (300-360 of them)."""
STEP_CHECK_ROI = [7, 7]
"""The step check's pooled ROI side (the recipe's is 4; GluonCV's presets' 14): a quarter of
the box head's memory of 14 on every anchor's proposal (under 4 GB for both sides in one
process)."""


def deterministic_fields(spec, height, width, objects):
    """Config fields under which neither side's sampling draws anything, on an input of
    ``height`` x ``width`` with ``objects`` ground truths, at :data:`STEP_CHECK_SIZE`: the
    RPN samples every anchor (positives up to all of them), every anchor's proposal passes
    (no NMS, no least size, as many proposals as anchors), and R-CNN samples all of them
    and the ground truths appended to them. The samplers then keep every positive and every
    negative (GluonCV's ``RPNTargetSampler``, the zoo's ``RPNTarget`` and ``ProposalTarget``;
    GluonCV's ``RCNNTargetSampler`` under the draws :func:`every_roi_draw` picks): the same
    sets in another order, which no loss term sees, at every step.
    Why not the recipe's sampling: 256 anchors and 128 ROIs drawn at random differ between
    the sides at every step, and so do their losses, by far more than an error would move
    them; and why not a few proposals: which ones an RPN keeps after a step turns on score
    differences of 1e-6 (an untrained RPN scores every anchor alike), so that float
    rounding alone changes them from the second step on. The R-CNN positives' share is one
    ROI short of all: GluonCV's sampler fills the rest with negatives, a slice it cannot
    make empty."""
    stride = spec["rpn_stride"]
    anchors = (-(-height // stride) * -(-width // stride) * len(spec["anchor_scales"])
               * len(spec["anchor_ratios"]))
    rois = anchors + objects
    short, long = STEP_CHECK_SIZE
    return dict(data_shape=short, max_size=long, rpn_batch_size=anchors, rpn_fg_fraction=1.0,
                rpn_pre_nms_top_n_train=anchors, rpn_post_nms_top_n_train=anchors,
                rpn_nms_threshold=1.0, rpn_min_size=0, rcnn_batch_rois=rois,
                rcnn_fg_fraction=(rois - 0.75) / rois, roi_size=STEP_CHECK_ROI)


def first_image(root):
    """The first training image as GluonCV's ``VOCDetection`` serves it (RGB NDArray,
    ``[x1, y1, x2, y2, class, difficult]`` rows in pixels)."""
    from zoo.data.factory import open_dataset
    from zoo_bench.data import GluonCVImageFiles
    return GluonCVImageFiles(open_dataset("voc", root, "train").records[:1])[0]


def gluoncv_batch(net, network, image, label):
    """``image`` as GluonCV's script feeds it: ``FasterRCNNDefaultTrainTransform`` given the
    network (its resize, normalisation and RPN targets; no flip), ``FasterRCNNTrainBatchify``."""
    from gluoncv.data.batchify import FasterRCNNTrainBatchify
    from gluoncv.data.transforms.presets.rcnn import FasterRCNNDefaultTrainTransform
    from zoo_bench.gluoncv_recipes import on_cpu
    settings = network["rcnn"]
    transform = FasterRCNNDefaultTrainTransform(
        settings["short"], settings["max_size"], net, flip_p=0.0, ashape=net.ashape,
        **network["rpn_targets"])
    return on_cpu(FasterRCNNTrainBatchify(net, 1)([transform(image, label)]))


DRAW_SEEDS = 200
"""How many seeds of MXNet's generator :func:`every_roi_draw` tries: about one in ten draws
takes every candidate once (measured: 4 of seeds 0-39 on the step check's image)."""


def _rows(array):
    """The rows of a 2-d NDArray, sorted: a multiset to compare."""
    return sorted(map(tuple, array.asnumpy().tolist()))


def every_roi_draw(net, batch, seeds=range(DRAW_SEEDS)):
    """A seed of MXNet's generator under which GluonCV's ``RCNNTargetSampler`` of ``net``
    (its parameters now, on ``batch``) samples every proposal and ground truth exactly once,
    as the zoo's ``ProposalTarget`` does whenever the ROIs sampled are all of them.
    Why a seed must be chosen: the sampler takes its positives' slice (every candidate but
    one, at :func:`deterministic_fields`) by the label order of a shuffled index, then its
    negatives from the shuffled index past that slice's length, which may hold a candidate
    the first slice took: it then samples one ROI twice and leaves one out (36 of seeds 0-39).
    The box head's batch norm runs on the ROIs' batch and subtracts its mean gradient, so
    one of 308 ROIs swapped moves the trunk's and the head's gradients by 14-22% (measured
    against GluonCV's own side under another seed), where the losses move by 1e-5.
    The proposals come from the network's own RPN in training mode; the batch norms'
    running statistics it moves are put back."""
    from mxnet import autograd
    data, gt_box = batch[0], batch[1][:, :, :4]
    running = {name: param.data().copy()
               for name, param in net.collect_params(".*running.*").items()}
    with autograd.train_mode():
        rpn_score, rpn_box = net.rpn(mx.nd.zeros_like(data), net.features(data))[:2]
    for name, param in net.collect_params(".*running.*").items():
        param.set_data(running[name])
    candidates = _rows(mx.nd.concat(rpn_box[0], gt_box[0], dim=0))
    for seed in seeds:
        mx.random.seed(seed)
        with autograd.train_mode():
            rois = net.sampler(rpn_box, rpn_score, gt_box)[0]
        if _rows(rois[0]) == candidates:
            return seed
    raise RuntimeError("GluonCV's R-CNN sampler took some ROI twice under each of %d seeds"
                       % len(seeds))


def step_network(network, init_params, image, label):
    """GluonCV's network of ``network`` holding the parameters of ``init_params`` but the
    anchors of ``network`` (the step check's, :func:`step_inputs`), and its batch of
    ``image``: ``(net, batch)``."""
    net = gluon_faster_rcnn(network, embedded_classes())
    anchors = net.collect_params(".*anchor")
    anchors.initialize(ctx=mx.cpu())  # constants: their own values
    own = {name: param.data().copy() for name, param in anchors.items()}
    net.load_parameters(init_params, ctx=mx.cpu())
    for name, param in anchors.items():
        param.set_data(own[name])
    return net, gluoncv_batch(net, network, image, label)


def step_inputs(root):
    """The step check's first training image, its labels and config fields:
    :func:`deterministic_fields` on the config's anchors, whatever the runs' are."""
    from gluoncv.data.transforms.image import resize_short_within
    image, label = first_image(root)
    height, width = resize_short_within(image, *STEP_CHECK_SIZE).shape[:2]
    spec = zoo_spec(embedded_classes())
    # GluonCV's sampler leaves out one ROI and takes another twice, which is no difference
    # between two equal boxes. The config's 308 proposals of the image hold 223 distinct
    # boxes (seeds 1 and 6 of 0-199 qualify); the fitted anchors' 308 all differ, and none
    # of 3000 seeds qualified. The import has proved both sides' anchors equal.
    return image, label, dict(deterministic_fields(spec, height, width, len(label)),
                              anchor_scales=spec["anchor_scales"],
                              anchor_ratios=spec["anchor_ratios"])


def _gluoncv_steps(network, init_params, image, label, sgd, steps):
    """GluonCV's four losses per step on one image: its transform and RPN targets, the
    network's own R-CNN sampler (under a draw that takes every ROI once,
    :func:`every_roi_draw`) and targets, ``FasterRCNNLosses``, ``gluon.Trainer``.
    Returns ``(losses per step, the batch, the seed of each step's draw)``."""
    from mxnet import gluon
    from zoo_bench.gluoncv_recipes import FasterRCNNLosses
    from zoo_bench.parity_gluoncv import rcnn_train_step
    net, batch = step_network(network, init_params, image, label)
    net.hybridize(static_alloc=True)
    trainer = gluon.Trainer(net.collect_train_params(), "sgd", {
        "learning_rate": sgd["lr"], "momentum": sgd["momentum"], "wd": sgd["wd"]})
    losses = FasterRCNNLosses(net)
    rows, draws = [], []
    for _ in range(steps):
        draws.append(every_roi_draw(net, batch))
        mx.random.seed(draws[-1])  # the sampler is the only draw of the step
        rows.append(rcnn_train_step(losses, trainer, batch, 1))
    return rows, batch, draws


def _zoo_steps(prefix, fields, batch, sgd, steps):
    """The zoo's four losses per step: the training graph of the artifact ``prefix`` with
    ``fields`` (targets and sampling in the graph) in a Module with MXNet's SGD, on GluonCV's
    input (the same normalised pixels; its labels normalised to the image)."""
    from zoo import artifact
    from zoo.model import build_model
    meta = artifact.read_meta(prefix, 0)
    files = artifact.epoch_files(prefix, 0)
    args, aux = artifact.read_params(files.params, meta["params_sha256"], files.meta)
    data, boxes = batch[0], batch[1].asnumpy()[0]
    height, width = data.shape[2:]
    label = np.zeros((1, len(boxes), 6), np.float32)
    label[0, :, 0] = boxes[:, 4]
    label[0, :, 1:5] = boxes[:, :4] / [width, height, width, height]
    im_info = mx.nd.array([[height, width, 1.0]])
    model = build_model(meta["config"], **fields)
    module = mx.mod.Module(model.train_symbol(), data_names=["data", "im_info"],
                           label_names=["label"], context=mx.cpu())
    module.bind(data_shapes=[("data", data.shape), ("im_info", im_info.shape)],
                label_shapes=[("label", label.shape)])
    module.set_params(args, aux)
    with warnings.catch_warnings():  # rescale_grad 1 is meant: the loss is normalised itself
        warnings.simplefilter("ignore", UserWarning)
        module.init_optimizer(optimizer=mx.optimizer.create(
            "sgd", learning_rate=sgd["lr"], momentum=sgd["momentum"], wd=sgd["wd"]))
    step_batch = mx.io.DataBatch([data, im_info], [mx.nd.array(label)])
    losses = []
    for _ in range(steps):
        module.forward_backward(step_batch)
        module.update()
        terms = model.training_losses(module.get_outputs())
        losses.append([terms[name] for name in model.arch.loss_names])
    return losses


def step_check(options, root, init_params, prefix, steps=STEP_CHECK_STEPS,
               tolerance=STEP_CHECK_TOLERANCE):
    """Prove the two training mechanics equal before the runs: from the same start, SGD
    steps (at :data:`STEP_CHECK_LR`, the options' momentum and weight decay) on the first
    training image give the same RPN and R-CNN class and box losses on both sides (anchor
    targets, proposals, ROI targets, losses, gradients, update, batch norm), with sampling
    made deterministic on both (:func:`deterministic_fields`, on the config's anchors:
    :func:`step_inputs`). Returns ``{"steps": [[GluonCV's
    4 terms, the zoo's 4 terms], ...], "worst": relative difference, "first_step": the first
    step's, "equal": whether the first step is within :data:`FIRST_STEP_TOLERANCE` and every
    step within ``tolerance``, "draws": the seed of GluonCV's R-CNN sampling at each step}``."""
    image, label, fields = step_inputs(root)
    sgd = dict(lr=STEP_CHECK_LR, momentum=options.momentum, wd=options.wd)
    network = rcnn_network(zoo_spec(embedded_classes(), **fields))
    theirs, batch, draws = _gluoncv_steps(network, init_params, image, label, sgd, steps)
    ours = _zoo_steps(prefix, fields, batch, sgd, steps)
    rows = [list(t) + list(o) for t, o in zip(theirs, ours)]
    worst = [max(abs(o - t) / max(abs(t), TERM_FLOOR) for t, o in zip(row[:4], row[4:]))
             for row in rows]
    equal = worst[0] <= FIRST_STEP_TOLERANCE and max(worst) <= tolerance
    return {"steps": rows, "terms": ["RPN class", "RPN box", "R-CNN class", "R-CNN box"],
            "worst": max(worst), "first_step": worst[0], "equal": equal, "draws": draws}


