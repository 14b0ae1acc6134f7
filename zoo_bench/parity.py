"""``zoo benchmark-parity``: the zoo's training against GluonCV's, on the same network from the
same initial parameters, scored by one metric on the same held-out images.

Per architecture (:data:`SIDES`): SSD here, Faster R-CNN C4 in :mod:`zoo_bench.parity_rcnn`.
For each seed:

1. GluonCV's network (SSD: :data:`SSD_NETWORK`, built by GluonCV's ``get_ssd``) is initialised
   (:func:`initialised_ssd`), its backbone taken from ``--backbone-from``'s artifact (by
   default the detector ``make demo`` trains; :func:`zoo.gluoncv.common.take_backbone`),
   saved, and imported into the zoo
   (:func:`zoo.gluoncv.common.import_net`, whose map is proved by the import tests to
   compute what GluonCV computes). Before any step the two are proved equal: the artifact
   holds GluonCV's values to the last bit (:func:`check_equal_start`), and the zoo's run
   takes every array from it (none reset).
2. The zoo trains from that artifact (``zoo train --init-from``, its own loader, augmentation,
   targets, loss and optimizer), a checkpoint after every epoch, in a child process
   (:mod:`zoo_bench.parity_zoo`): with ``--run-sides together`` beside GluonCV's, each on
   half the cores (:func:`train_sides`).
3. GluonCV trains from the same file in a child process with its own components
   (:mod:`zoo_bench.parity_gluoncv`), a parameter file after every epoch, in the zoo's
   batches of the same seed (:func:`paired_batches`), each image's augmentation seeded (its
   draws GluonCV's own): the seed's run repeats, and both sides see the same images in the
   same order.
4. Every epoch of both is scored by ``zoo eval`` on the same held-out split (VOC07 mAP and
   COCO AP, pycocotools-checked); GluonCV's epochs are imported first, as step 1 did.

Both sides see the same images, input size, batch, epochs, augmentation and SGD settings
(one lr schedule, :func:`zoo.engine.trainer.lr_scheduler`); the data is the embedded
generator's (:mod:`zoo.data.embedded`, the ``hard`` preset by default), generated once in
the work folder.
The verdict compares the last epoch's held-out VOC07 mAP, mean over seeds, against a
tolerance in points, and gives the per-seed differences (:func:`paired_differences`).
"""
import itertools
import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import time
import warnings
from dataclasses import asdict, dataclass, field
from typing import List

import mxnet as mx
import numpy as np

from zoo_bench import child_environment
from zoo_bench import parity_rcnn
from zoo_bench.parity_data import generate_data
from zoo_bench.options import PARITY_DEFAULTS
from zoo_bench.parity_gluoncv import (embedded_classes, gluon_ssd, seed_everything, ssd_anchors,
                                      ssd_targets, train_step, with_backbone, zoo_loader)

__all__ = ["ParityResult", "SSD_NETWORK", "benchmark_parity", "paired_batches",
           "paired_differences", "ssd_network", "verdict"]

SSD_NETWORK = dict(
    # make demo's network as GluonCV builds an SSD (get_ssd on its mobilenetv2_1.0): the
    # stride-8 expansion of block 7 tapped, four extra blocks of 256, 256, 256 and 128
    # channels in GluonCV's style, the anchor sizes of GluonCV's ssd_512 presets as fractions
    # of the input side, a step per map equal to its stride. GluonCV's published light SSDs
    # (MobileNet v1 at 1.0 and 0.25, importable too) stay near mAP 0 for their first epochs
    # from scratch: BENCHMARKS.md, "Parity with GluonCV's training".
    base="mobilenetv2_1.0", features=["features_linearbottleneck6_relu60_relu6"],
    tap_stride=8, filters=[256, 256, 256, 128],
    size_fractions=[0.1, 0.2, 0.37, 0.54, 0.71, 0.88],
    ratios=[[1, 2, 0.5]] + [[1, 2, 0.5, 3, 1.0 / 3]] * 2 + [[1, 2, 0.5]] * 2)
SSD_CONFIG = "ssd_mobilenetv2_stride8_gluoncv"
"""The zoo's config of that network (its import's overrides set the input side's anchors)."""
THREADED_ENGINE = "ThreadedEnginePerDevice"


def map_sizes(side):
    """The feature maps' sides of :data:`SSD_NETWORK` at input ``side``: the tap's, then
    one per extra block, each halving (rounding up: its 3x3 convolution pads by 1)."""
    sides = [-(-side // SSD_NETWORK["tap_stride"])]
    for _ in SSD_NETWORK["filters"]:
        sides.append(-(-sides[-1] // 2))
    return sides


def ssd_network(side):
    """``get_ssd``'s arguments for :data:`SSD_NETWORK` at input ``side`` (anchor sizes in
    pixels, a step per map equal to its stride)."""
    spec = SSD_NETWORK
    return dict(base=spec["base"], side=side, features=spec["features"],
                filters=spec["filters"], ratios=spec["ratios"],
                sizes=[f * side for f in spec["size_fractions"]],
                steps=[side / m for m in map_sizes(side)])


@dataclass
class EpochScore:
    epoch: int
    voc07: float
    coco_ap: float
    loss: float = None
    cls_loss: float = None
    box_loss: float = None
    seconds: float = None


@dataclass
class SideRun:
    side: str                            # "zoo" or "gluoncv"
    seed: int
    epochs: List[EpochScore] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def final(self):
        return self.epochs[-1].voc07


@dataclass
class ParityResult:
    architecture: str
    options: dict
    runs: List[SideRun]
    start_checks: List[dict]

    def finals(self, side):
        return [run.final for run in self.runs if run.side == side]

    def to_json(self):
        return {"architecture": self.architecture, "options": self.options,
                "start_checks": self.start_checks,
                "runs": [dict(asdict(run), final=run.final) for run in self.runs],
                "verdict": verdict(self)}


def _mean_sd(values):
    return statistics.mean(values), (statistics.stdev(values) if len(values) > 1 else 0.0)


def paired_differences(result):
    """Per seed run on both sides, in the order of the zoo's runs: the zoo's final held-out
    VOC07 mAP minus GluonCV's, in points. A seed gives both sides one start and one order of
    images, so the spread of these differences, not the two sides' spreads, is what a
    difference of the means rests on."""
    theirs = {run.seed: run.final for run in result.runs if run.side == "gluoncv"}
    return [100 * (run.final - theirs[run.seed]) for run in result.runs
            if run.side == "zoo" and run.seed in theirs]


def verdict(result, tolerance=None):
    """``{"line": ..., "passed": bool, ...}``: the zoo's mean final held-out VOC07 mAP against
    GluonCV's, in points, passing when it is no more than ``tolerance`` points below; the line
    ends with the per-seed differences (:func:`paired_differences`), their mean ± sd."""
    tolerance = result.options["tolerance"] if tolerance is None else tolerance
    zoo_mean, zoo_sd = _mean_sd(result.finals("zoo"))
    theirs_mean, theirs_sd = _mean_sd(result.finals("gluoncv"))
    points = 100 * (zoo_mean - theirs_mean)
    within = points >= -tolerance
    differ = [c["step_check"]["worst"] for c in result.start_checks
              if "step_check" in c and not c["step_check"]["equal"]]
    targets = [c["target_check"] for c in result.start_checks
               if "target_check" in c and not c["target_check"]["equal"]]
    passed = within and not differ and not targets
    seeds = len(result.finals("zoo"))
    target = PARITY_DEFAULTS[result.architecture]["target"]
    below = [side for side, mean in (("the zoo", zoo_mean), ("GluonCV", theirs_mean))
             if mean < target]
    line = ("parity %s: zoo %.3f ± %.3f, GluonCV %.3f ± %.3f over %d seed%s: %+.1f points (%s: "
            "the zoo %s%s%s; %s)" % (
                result.architecture, zoo_mean, zoo_sd, theirs_mean, theirs_sd, seeds,
                "" if seeds == 1 else "s", points, "PASS" if passed else "FAIL",
                "within %g points of GluonCV or above" % tolerance if within else
                "more than %g points below GluonCV" % tolerance,
                "; its first steps on one batch differ from GluonCV's by up to %.2g%%"
                % (100 * max(differ)) if differ else "",
                "; its targets differ from GluonCV's beyond ties (%s)" % target_words(targets[0])
                if targets else "",
                "both over the %.2g target" % target if not below else
                "%s below the %.2g target" % (" and ".join(below), target)))
    if result.options.get("gluoncv_input") == "zoo":
        line += " [GluonCV's step on the zoo's batches]"
    paired = paired_differences(result)
    paired_mean, paired_sd = _mean_sd(paired) if paired else (None, None)
    if paired:
        # The standard error says what the seeds can resolve: a seed's trajectory is chaotic
        # (a millionth of one start array moved a seed 6.5 points, BENCHMARKS.md).
        line += "; paired by seed: %+.1f ± %.1f points (%s)%s" % (
            paired_mean, paired_sd, ", ".join("%+.1f" % value for value in paired),
            ", standard error %.1f" % (paired_sd / math.sqrt(len(paired)))
            if len(paired) > 1 else "")
    return {"line": line, "passed": passed, "points": points, "zoo_mean": zoo_mean,
            "paired": paired, "paired_mean": paired_mean, "paired_sd": paired_sd,
            "zoo_sd": zoo_sd, "gluoncv_mean": theirs_mean, "gluoncv_sd": theirs_sd,
            "steps_equal": not differ, "targets_equal": not targets, "target": target,
            "over_target": not below}


def ssd_importer():
    """The :class:`zoo.gluoncv.Importer` of GluonCV's SSD of :func:`ssd_network` onto
    :data:`SSD_CONFIG`."""
    from zoo.gluoncv import Importer, mapping
    return Importer("get_ssd(mobilenetv2_1.0)", SSD_CONFIG, "voc",
                    mapping("ssd", "map_ssd_mobilenetv2"))


def import_gluon(net, side, prefix, source, **fields):
    """GluonCV's SSD ``net`` (of :func:`ssd_network` at ``side``) as the zoo artifact
    ``prefix``, epoch 0, its config's ``fields`` changed; its arrays checked one for one by
    the import."""
    from zoo.gluoncv.common import import_net
    from zoo.gluoncv.ssd import overrides_for
    import_net(ssd_importer(), net, prefix, source,
               **dict(overrides_for(net, side), **fields))
    return prefix


def check_equal_start(net, prefix, zeros=0):
    """Prove the artifact ``prefix`` starts where GluonCV's ``net`` starts: the same number
    of parameters and, sorted, the same values to the last bit (the import only reorders
    arrays, :func:`zoo.gluoncv.common.our_params` has checked that it reads every GluonCV
    array once and fills every array of ours, and the import tests prove the map computes
    what GluonCV computes), besides ``zeros`` zeros the import adds (rows GluonCV's network
    has no counterpart of, :func:`zoo_bench.parity_rcnn.background_rows`). Detections are no proof at this point: a freshly initialised
    network's batch norms hold no statistics yet, so both score every box near 1.0.
    Returns ``{"values": n, "sum": s}``; raises RuntimeError where they differ."""
    from zoo import artifact
    from zoo.gluoncv.common import gluon_arrays
    theirs = np.sort(np.concatenate([array.ravel() for name, array in gluon_arrays(net).items()
                                     if not name.endswith("anchors")]
                                    + [np.zeros(zeros, np.float32)]))
    files = artifact.epoch_files(prefix, 0)
    meta = artifact.read_meta(prefix, 0)
    args, aux = artifact.read_params(files.params, meta["params_sha256"], files.meta)
    ours = np.sort(np.concatenate([array.asnumpy().ravel()
                                   for array in list(args.values()) + list(aux.values())]))
    if ours.shape != theirs.shape or not np.array_equal(ours, theirs):
        raise RuntimeError("the zoo's import of GluonCV's initialised network does not hold "
                           "its values: %d values against GluonCV's %d%s" % (
                               ours.size, theirs.size, "" if ours.shape != theirs.shape else
                               ", and sorted they differ by up to %.3g"
                               % float(np.abs(ours - theirs).max())))
    return {"values": int(ours.size), "sum": float(ours.astype(np.float64).sum())}


def start_from(options, seed, root, folder):
    """GluonCV's network of ``options.architecture`` initialised by GluonCV under ``seed``,
    saved and imported: returns ``(params file, artifact prefix, equality check)``."""
    seed_everything(seed)
    os.makedirs(folder, exist_ok=True)
    params = os.path.join(folder, "gluoncv-init.params")
    net, prefix, zeros, backbone = SIDES[options.architecture].start(options, folder, params)
    return params, prefix, dict(check_equal_start(net, prefix, zeros), backbone=backbone)


def ssd_start(options, folder, params):
    """``(GluonCV's initialised SSD, saved to params, its import, the zeros it adds, where
    its backbone came from or None)``."""
    from zoo.gluoncv.ssd import overrides_for
    side = options.data_shape
    net = initialised_ssd(side)
    backbone = with_backbone(options.backbone_from, ssd_importer(), net,
                             **overrides_for(net, side))
    net.save_parameters(params)
    # --zoo-config's fields change the zoo's recipe alone (GluonCV's epochs are scored
    # through imports without them).
    prefix = import_gluon(net, side, os.path.join(folder, "init", "ssd"), params,
                          **dict(options.zoo_config))
    return net, prefix, 0, backbone


def initialised_ssd(side):
    """GluonCV's network of :func:`ssd_network` at ``side``, initialised by GluonCV
    (``initialize()``, its shapes inferred on a first pass), then every convolution's weights
    drawn as the zoo draws them (He-normal over the fan-out,
    :meth:`zoo.model.DetectionModel.init_params`, and a normal of 0.01 for the predictors) and
    their biases zeroed. GluonCV's own
    default (uniform in +-0.07) starts this network with every top score at 1.0 and boxes of
    10^5 pixels: a start so far off that neither side's first epochs mean much."""
    net = gluon_ssd(ssd_network(side), embedded_classes())
    net.initialize()
    net(mx.nd.zeros((1, 3, side, side)))
    weights = mx.init.Xavier(rnd_type="gaussian", factor_type="out", magnitude=2)
    for name, param in net.collect_params(".*conv.*_weight").items():
        array = param.data()
        weights(mx.init.InitDesc(name), array)
        param.set_data(array)
    for param in net.collect_params(".*conv.*_bias").values():
        param.set_data(mx.nd.zeros(param.shape))
    # The class and box predictors as the zoo's heads start (symbols.ssd._head): a small
    # normal, so that the first logits are near zero rather than in the tens.
    for param in net.collect_params(".*predictor.*_weight").values():
        param.set_data(mx.nd.random.normal(0, 0.01, param.shape))
    return net


STEP_CHECK_STEPS = 3
STEP_CHECK_LR = 0.005
"""The step check's learning rate: at the recipe's 0.02 this network's loss rises again from
the third step on one batch, and GluonCV's own side then differs from run to run by 0.6% at
that step (oneDNN's multithreaded reductions, amplified); at 0.005 the loss falls smoothly
and both sides agree to 4 decimals for 3 steps."""
STEP_CHECK_TOLERANCE = 1e-3
"""Largest relative difference of a loss term between the two sides over the step check's
steps. Hard-negative mining is a discrete choice: once rounding-level differences change
which anchors are mined (from the fourth step or so on one batch), the sides drift apart
by about 1% a few steps later, as any two float implementations would."""


def step_batch(root, side, count):
    """The first ``count`` training images stretched to ``side`` (no augmentation) as the
    data both sides normalise alike, and their labels ``[class, x1, y1, x2, y2, difficult]``
    in the resized pixels."""
    import cv2
    from zoo.data.factory import open_dataset
    images, labels = [], []
    for record in open_dataset("voc", root, "train").records[:count]:
        image = cv2.cvtColor(cv2.imread(record.path), cv2.COLOR_BGR2RGB)
        height, width = image.shape[:2]
        images.append(cv2.resize(image, (side, side), interpolation=cv2.INTER_LINEAR))
        label = record.label().copy()
        label[:, [1, 3]] *= side / width
        label[:, [2, 4]] *= side / height
        labels.append(label)
    return np.stack(images).astype(np.float32), labels


def _normalised(images, preprocessing):
    mean, std = np.array(preprocessing["mean"]), np.array(preprocessing["std"])
    return mx.nd.array(((images - mean) / std).transpose(0, 3, 1, 2))


def _gluoncv_steps(init_params, side, data, labels, sgd, steps):
    """GluonCV's losses ``(cls, box)`` per step: its target generator, ``SSDMultiBoxLoss``,
    ``gluon.Trainer``, on ``data`` again and again."""
    from gluoncv.loss import SSDMultiBoxLoss
    from mxnet import gluon
    net = gluon_ssd(ssd_network(side), embedded_classes())
    net.load_parameters(init_params, ctx=mx.cpu())
    cls_targets, box_targets = ssd_targets(ssd_anchors(net, side), labels)
    net.hybridize(static_alloc=True, static_shape=True)
    trainer = gluon.Trainer(net.collect_params(), "sgd", {
        "learning_rate": sgd["lr"], "momentum": sgd["momentum"], "wd": sgd["wd"]})
    loss_fn = SSDMultiBoxLoss()
    return [tuple(train_step(net, loss_fn, trainer, data, cls_targets, box_targets))
            for _ in range(steps)]


def _zoo_steps(prefix, side, data, labels, sgd, steps):
    """The zoo's losses ``(cls, box)`` per step, each term per positive anchor as GluonCV
    sums it: the training graph of the artifact ``prefix`` (targets and hard-negative mining
    in the graph) in a Module with MXNet's SGD, on ``data`` again and again."""
    from zoo import artifact
    from zoo.model import build_model
    meta = artifact.read_meta(prefix, 0)
    files = artifact.epoch_files(prefix, 0)
    args, aux = artifact.read_params(files.params, meta["params_sha256"], files.meta)
    label = np.full((len(labels), max(len(l) for l in labels), 6), -1, np.float32)
    for row, boxes in zip(label, labels):
        row[:len(boxes), :5] = boxes[:, :5] / [1, side, side, side, side]
        row[:len(boxes), 5] = 0
    module = mx.mod.Module(build_model(meta["config"]).train_symbol(), data_names=["data"],
                           label_names=["label"], context=mx.cpu())
    module.bind(data_shapes=[("data", data.shape)], label_shapes=[("label", label.shape)])
    module.set_params(args, aux)
    with warnings.catch_warnings():  # rescale_grad 1 is meant: the loss is normalised itself
        warnings.simplefilter("ignore", UserWarning)
        module.init_optimizer(optimizer=mx.optimizer.create(
            "sgd", learning_rate=sgd["lr"], momentum=sgd["momentum"], wd=sgd["wd"]))
    batch, losses = mx.io.DataBatch([data], [mx.nd.array(label)]), []
    for _ in range(steps):
        module.forward_backward(batch)
        module.update()
        cls_prob, loc_loss, cls_label = (out.asnumpy() for out in module.get_outputs()[:3])
        target = cls_label.astype(np.int64)
        positives = max(int((target > 0).sum()), 1)
        picked = np.take_along_axis(cls_prob, np.maximum(target, 0)[:, None, :], axis=1)[:, 0]
        counted = -(np.log(np.maximum(picked, 1e-30)) * (target >= 0)).sum()
        losses.append((float(counted / positives), float(loc_loss.sum() / positives)))
    return losses


def step_check(options, root, init_params, prefix):
    """The step check of ``options.architecture`` (:func:`ssd_step_check`,
    :func:`zoo_bench.parity_rcnn.step_check`)."""
    return SIDES[options.architecture].step_check(options, root, init_params, prefix)


def ssd_step_check(options, root, init_params, prefix, steps=STEP_CHECK_STEPS,
                   tolerance=STEP_CHECK_TOLERANCE):
    """Prove the two training mechanics equal before the runs: from the same start, SGD
    steps (at :data:`STEP_CHECK_LR`, the options' momentum and weight decay) on one fixed
    batch (the first ``batch_size`` training images, no augmentation) give the same class
    and box losses on both sides (targets, mining, loss, gradients, update,
    batch norm). Returns ``{"steps": [[gluoncv cls, box, zoo cls, box], ...], "worst":
    relative difference, "equal": whether every term is within ``tolerance``}``."""
    from zoo import artifact
    side = options.data_shape
    images, labels = step_batch(root, side, options.batch_size)
    data = _normalised(images, artifact.read_meta(prefix, 0)["preprocessing"])
    sgd = dict(sgd_settings(options), lr=STEP_CHECK_LR)
    theirs = _gluoncv_steps(init_params, side, data, labels, sgd, steps)
    ours = _zoo_steps(prefix, side, data, labels, sgd, steps)
    rows = [list(t) + list(o) for t, o in zip(theirs, ours)]
    worst = max(abs(o - t) / max(abs(t), 1e-12) for row in rows for t, o in zip(row[:2], row[2:]))
    return {"steps": rows, "terms": ["class", "box"], "worst": worst,
            "equal": worst <= tolerance}


ZOO_TARGETS = "multibox_target_cls_target"
"""The output of the zoo's SSD training graph holding each anchor's class target."""
TARGET_CHECK_BATCHES = 20
"""Batches of the zoo's first epoch the target check compares: 320 augmented images at the
benchmark's batch of 16, 45 s beside another job on 2 cores (the whole epoch's 93 batches took 6
minutes beside another job and gave the same verdict: BENCHMARKS.md)."""


def ssd_target_check(options, root, init_params, prefix, train_options,
                     batches=TARGET_CHECK_BATCHES):
    """Prove the two sides' targets equal on what the runs train on: over the first
    ``batches`` batches of the zoo's loader (``train_options``': its augmented images of
    epoch 1), the positive anchors of the zoo's training graph (MXNet's ``MultiBoxTarget``,
    in the artifact ``prefix``) against those of GluonCV's ``SSDTargetGenerator``
    (:func:`ssd_targets`) on the same boxes, image by image. An anchor tied with another at a
    box's best IoU is the one known difference: GluonCV's bipartite matcher takes every tied
    anchor, MXNet's the first. Returns
    ``{"images", "boxes", "zoo", "gluoncv": positives, "differ", "ties", "unmatched": boxes
    without a positive on the zoo's and on GluonCV's side, "equal": every difference a tie
    and every box matched}``."""
    from symbols.boxes import iou
    from zoo import artifact
    from zoo.model import build_model
    side = options.data_shape
    net = gluon_ssd(ssd_network(side), embedded_classes())
    net.load_parameters(init_params, ctx=mx.cpu())
    anchors = ssd_anchors(net, side)
    centres = anchors[0].asnumpy()
    corners = np.hstack([centres[:, :2] - centres[:, 2:] / 2, centres[:, :2] + centres[:, 2:] / 2])
    loader, _ = zoo_loader(train_options, embedded_classes())
    meta = artifact.read_meta(prefix, 0)
    files = artifact.epoch_files(prefix, 0)
    args, aux = artifact.read_params(files.params, meta["params_sha256"], files.meta)
    graph = build_model(meta["config"]).train_symbol().get_internals()[ZOO_TARGETS]
    module, counts = None, dict.fromkeys(("images", "boxes", "zoo", "gluoncv", "differ",
                                          "ties"), 0)
    unmatched = [0, 0]
    for batch in itertools.islice(loader.epoch(0), batches):
        if module is None:
            module = mx.mod.Module(graph, data_names=["data"], label_names=["label"],
                                   context=mx.cpu())
            module.bind(data_shapes=[("data", batch.data.shape)],
                        label_shapes=[("label", batch.label.shape)], for_training=False)
            module.set_params(args, aux, allow_missing=True, allow_extra=True)
        module.forward(mx.io.DataBatch([mx.nd.array(batch.data)], [mx.nd.array(batch.label)]),
                       is_train=False)
        ours = module.get_outputs()[0].asnumpy() > 0
        theirs = ssd_targets(anchors, batch.label, side)[0].asnumpy() > 0
        for label, zoo_positive, gluoncv_positive in zip(batch.label, ours, theirs):
            boxes = label[label[:, 0] >= 0, 1:5] * side
            differ = np.nonzero(zoo_positive != gluoncv_positive)[0]
            ties = 0
            if len(boxes):  # an image without boxes has no positive on either side
                overlaps = iou(corners, boxes)
                best = overlaps.argmax(axis=1)
                ties = sum(overlaps[a, best[a]] >= overlaps[:, best[a]].max() - 1e-6
                           for a in differ)
                for index, positive in enumerate((zoo_positive, gluoncv_positive)):
                    unmatched[index] += len(boxes) - len(set(best[positive]))
            counts["images"] += 1
            counts["boxes"] += len(boxes)
            counts["zoo"] += int(zoo_positive.sum())
            counts["gluoncv"] += int(gluoncv_positive.sum())
            counts["differ"] += len(differ)
            counts["ties"] += int(ties)
    return dict(counts, unmatched=unmatched,
                equal=counts["differ"] == counts["ties"] and not any(unmatched))


def target_words(check):
    """A target check in words, for the progress line and the verdict."""
    return ("over the zoo's first %d images (%d boxes): %d positive anchors on the "
            "zoo's side, %d on GluonCV's; %d differ, %d of them ties at a box's best IoU%s" % (
                check["images"], check["boxes"], check["zoo"], check["gluoncv"],
                check["differ"], check["ties"],
                "; boxes without a positive: %d on the zoo's side, %d on GluonCV's"
                % tuple(check["unmatched"]) if any(check["unmatched"]) else ""))


def step_terms(check):
    """A step check's terms step by step, GluonCV's then the zoo's: ``GluonCV class a, b, c,
    box ...; the zoo class ...``."""
    names = check["terms"]
    return "; ".join("%s %s" % (side, ", ".join("%s %s" % (name, ", ".join(
        "%.4f" % row[offset + k] for row in check["steps"])) for k, name in enumerate(names)))
        for side, offset in (("GluonCV", 0), ("the zoo", len(names))))


def sgd_settings(options):
    return {"lr": options.lr, "momentum": options.momentum, "wd": options.wd,
            "lr_steps": list(options.lr_steps), "lr_factor": options.lr_factor,
            "warmup_epochs": options.warmup_epochs}


def score(prefix, epoch, root, options):
    """Held-out VOC07 mAP and COCO AP of epoch ``epoch`` of the artifact ``prefix``, by
    ``zoo eval``."""
    from zoo.jobs.evaluate import EvalOptions, evaluate
    results = evaluate(EvalOptions(checkpoint=prefix, epoch=epoch, data_root=root, split="val",
                                   output="%s-%04d-eval-val.json" % (prefix, epoch),
                                   progress=False))
    return results.voc["voc07"]["mAP"], results.coco["AP"]


def zoo_train_options(options, seed, root, init_prefix, folder):
    """The ``zoo train`` options of the zoo's side at ``seed``, from the imported start."""
    from zoo.jobs.train_options import TrainOptions
    return TrainOptions(
        network=None, init_from=init_prefix, dataset="voc", data_root=root,
        data_shape=options.data_shape, batch_size=options.batch_size, epochs=options.epochs,
        val_split="", keep_last=options.epochs, output_dir=os.path.join(folder, "zoo"),
        overwrite=True, seed=seed, progress=options.progress, data_threads=options.data_workers,
        **({"max_expand": 1.0, "crop": False} if options.augmentation == "light" else {}),
        **SIDES[options.architecture].zoo_augmentation, **sgd_settings(options))


def paired_batches(train_options):
    """The dataset indices of every batch of every epoch that ``zoo train`` with
    ``train_options`` visits (its own loader, :func:`zoo.jobs.train.training_loader`, whose
    order comes from the run's seed and epoch): ``[[[index, ...], ...], ...]``, one list a
    epoch. GluonCV's side takes the same batches (:class:`zoo_bench.parity_gluoncv.
    PairedBatches`), so a seed gives both sides the same images in the same order."""
    loader, _ = zoo_loader(train_options, embedded_classes())
    return [[[int(index) for index in indices] for indices, _ in loader.batch_indices(epoch)]
            for epoch in range(train_options.epochs)]


def train_zoo(options, seed, root, init_prefix, folder):
    """The zoo's side: ``zoo train --init-from`` the imported start, every epoch scored."""
    from zoo.engine.finetune import init_from
    from zoo.jobs.train import build_train_model, train
    train_options = zoo_train_options(options, seed, root, init_prefix, folder)
    # Every array of the run's model comes from the imported start: none starts afresh.
    model = build_train_model(train_options, embedded_classes())
    summary = init_from(model, init_prefix, seed=seed)[2]
    if summary.reset:
        raise RuntimeError("the zoo's run would not start from GluonCV's parameters: %s"
                           % summary.line())
    start = time.time()
    trained = train(train_options)
    run = SideRun("zoo", seed, seconds=time.time() - start)
    for row in trained.rows:
        epoch = int(row["epoch"])
        voc07, coco = score(trained.prefix, epoch, root, options)
        # SSD's cls_loss and box_loss; Faster R-CNN's RPN and R-CNN terms of each, summed
        cls_loss = sum(float(value) for key, value in row.items() if key.endswith("cls_loss"))
        box_loss = sum(float(value) for key, value in row.items() if key.endswith("box_loss"))
        run.epochs.append(EpochScore(epoch, voc07, coco, cls_loss + box_loss, cls_loss,
                                     box_loss))
    return run


def gluoncv_request(options, seed, root, init_params, folder, batches, zoo_train=None):
    """The request :mod:`zoo_bench.parity_gluoncv` reads, written to ``folder``; ``batches``
    those of :func:`paired_batches`, ``zoo_train`` the zoo's side's ``TrainOptions`` (whose
    loader ``--gluoncv-input zoo`` builds in the child)."""
    os.makedirs(os.path.join(folder, "gluoncv"), exist_ok=True)
    request = {"architecture": options.architecture,
               "network": SIDES[options.architecture].network(options),
               "classes": embedded_classes(),
               "init_params": init_params, "root": root, "split": "train",
               "batch_size": options.batch_size, "data_workers": options.data_workers,
               "augmentation": options.augmentation, "input": options.gluoncv_input,
               "zoo_train": options_json(zoo_train) if options.gluoncv_input == "zoo" else None,
               "seed": seed, "epochs": options.epochs, "sgd": sgd_settings(options),
               "batches": batches,
               "prefix": os.path.join(folder, "gluoncv", options.architecture)}
    path = os.path.join(folder, "gluoncv-request.json")
    with open(path, "w") as f:
        json.dump(request, f, indent=1)
    return path


def zoo_request(options, seed, root, init_prefix, folder):
    """The request :mod:`zoo_bench.parity_zoo` reads, written to ``folder``."""
    path = os.path.join(folder, "zoo-request.json")
    with open(path, "w") as f:
        json.dump({"options": options_json(options), "seed": seed, "root": root,
                   "init_prefix": init_prefix, "folder": folder}, f, indent=1)
    return path


def side_environment(options, **variables):
    """The environment of a side's child process: with ``--run-sides together`` the two
    sides share the cores, an OpenMP team of half of them each (at one image a step, a C4
    side's small operators gain little from a second thread: on 2 cores the zoo's side made
    4.1-4.6 images/s on one thread beside GluonCV's, against 6.0-7.2 alone on two, measured
    before the sampling fix); in turn each has this process's."""
    if options.run_sides == "together":
        variables["OMP_NUM_THREADS"] = str(max(1, len(os.sched_getaffinity(0)) // 2))
    return child_environment(**variables)


def start_zoo(options, seed, root, init_params, init_prefix, folder):
    """The zoo's side of ``seed`` started in its child process: ``(child, start time)``."""
    request = zoo_request(options, seed, root, init_prefix, folder)
    child = subprocess.Popen([sys.executable, "-m", "zoo_bench.parity_zoo", request],
                             env=side_environment(options), stdout=subprocess.PIPE, text=True)
    return child, time.time()


def finish_zoo(options, seed, root, started, folder, progress):
    """The zoo's :class:`SideRun` once its child (``started``, :func:`start_zoo`) ends."""
    child, _ = started
    answer = child.communicate()[0]
    if child.returncode != 0:
        raise RuntimeError("the zoo's training ended with exit status %d; its error is above"
                           % child.returncode)
    run = json.loads(answer.splitlines()[-1])
    return SideRun("zoo", seed, [EpochScore(**epoch) for epoch in run["epochs"]],
                   run["seconds"])


def start_gluoncv(options, seed, root, init_params, init_prefix, folder):
    """GluonCV's side of ``seed`` started in its child process, in the zoo's batches of the
    seed (:func:`paired_batches`): ``(child, start time)``."""
    train_options = zoo_train_options(options, seed, root, init_prefix, folder)
    request = gluoncv_request(options, seed, root, init_params, folder,
                              paired_batches(train_options), train_options)
    env = side_environment(options, MXNET_ENGINE_TYPE=THREADED_ENGINE)
    env.pop("MXNET_ENGINE_TYPE_OVERRIDE", None)
    return subprocess.Popen([sys.executable, "-m", "zoo_bench.parity_gluoncv", request],
                            env=env, stdout=subprocess.PIPE, text=True), time.time()


def finish_gluoncv(options, seed, root, started, folder, progress):
    """GluonCV's :class:`SideRun` once its child (``started``, :func:`start_gluoncv`) ends:
    each epoch's parameters imported and scored here."""
    child, start = started
    answers = []
    for line in child.stdout:
        answers.append(json.loads(line))
        progress("gluoncv seed %d: epoch %d of %d, loss %.3f, %.0f s"
                 % (seed, answers[-1]["epoch"], options.epochs, answers[-1]["loss"],
                    answers[-1]["seconds"]))
    if child.wait() != 0:
        raise RuntimeError("GluonCV's training ended with exit status %d; its error is above"
                           % child.returncode)
    run = SideRun("gluoncv", seed, seconds=time.time() - start)
    for answer in answers:
        prefix = SIDES[options.architecture].import_epoch(
            options, answer["params"], os.path.join(folder, "gluoncv", "epoch%d" % answer[
                "epoch"], options.architecture))
        voc07, coco = score(prefix, 0, root, options)
        run.epochs.append(EpochScore(answer["epoch"], voc07, coco, answer["loss"],
                                     answer["cls_loss"], answer["box_loss"], answer["seconds"]))
    return run


SIDE_PROCESSES = {"zoo": (start_zoo, finish_zoo), "gluoncv": (start_gluoncv, finish_gluoncv)}
"""Each side's ``(start, finish)``: its child process started, and its run once it ends."""


def train_sides(options, seed, root, init_params, init_prefix, folder, progress):
    """Both sides' :class:`SideRun` at ``seed``, in ``options.order``: one after the other,
    or (``run_sides`` "together") both children started before either is waited for."""
    def start(side):
        return SIDE_PROCESSES[side][0](options, seed, root, init_params, init_prefix, folder)

    def finish(side, started):
        run = SIDE_PROCESSES[side][1](options, seed, root, started, folder, progress)
        progress("%s seed %d: held-out VOC07 mAP by epoch %s (%.0f s)" % (
            side, seed, ", ".join("%.3f" % e.voc07 for e in run.epochs), run.seconds))
        return run
    if options.run_sides == "together":
        started = [(side, start(side)) for side in options.order]
        try:
            return [finish(side, begun) for side, begun in started]
        finally:  # one side failed: the other's child would train on for nothing
            for _, (child, _) in started:
                if child.poll() is None:
                    child.kill()
    return [finish(side, start(side)) for side in options.order]


def benchmark_parity(options, progress=print):
    """Run both sides at every seed of ``options``; a :class:`ParityResult`."""
    root = generate_data(options)
    runs, checks = [], []
    for seed in options.seeds:
        folder = os.path.join(options.work_dir, "%s_seed%d" % (options.architecture, seed))
        if os.path.isdir(folder):
            shutil.rmtree(folder)
        init_params, init_prefix, check = start_from(options, seed, root, folder)
        progress("seed %d: GluonCV's initialised network%s imported into the zoo, the same "
                 "%d values before the first step" % (
                     seed, " (its backbone from %s)" % check["backbone"]
                     if check["backbone"] else "", check["values"]))
        steps = step_check(options, root, init_params, init_prefix)
        checks.append(dict(check, seed=seed, step_check=steps))
        progress("seed %d: %d SGD steps on one batch from that start: %s (%s)" % (
            seed, len(steps["steps"]), "the same losses on both sides" if steps["equal"]
            else "the losses DIFFER by up to %.2g%%" % (100 * steps["worst"]),
            step_terms(steps)))
        if SIDES[options.architecture].target_check is not None:
            targets = SIDES[options.architecture].target_check(
                options, root, init_params, init_prefix,
                zoo_train_options(options, seed, root, init_prefix, folder))
            checks[-1]["target_check"] = targets
            progress("seed %d: targets %s: %s" % (seed, target_words(targets),
                     "the same" if targets["equal"] else "they DIFFER beyond ties"))
        runs.extend(train_sides(options, seed, root, init_params, init_prefix, folder,
                                progress))
    return ParityResult(options.architecture, options_json(options), runs, checks)


def import_ssd_epoch(options, params, prefix):
    """GluonCV's SSD of a training epoch (its parameter file) as the artifact ``prefix``."""
    net = gluon_ssd(ssd_network(options.data_shape), embedded_classes())
    net.load_parameters(params, ctx=mx.cpu())
    return import_gluon(net, options.data_shape, prefix, params)


@dataclass(frozen=True)
class Architecture:
    """What differs per architecture: ``start(options, folder, params)`` (GluonCV's
    initialised network, its backbone from ``--backbone-from``, saved to ``params`` and
    imported: ``(net, prefix, zeros the import adds, the backbone's source or None)``),
    ``step_check(options, root, params, prefix)``, ``network(options)`` (the child's network
    request), ``import_epoch(options, params, prefix)`` and
    ``target_check(options, root, params, prefix, zoo train options)`` (None: none);
    ``zoo_augmentation``: ``zoo train`` options that make the zoo's augmentation GluonCV's
    script's."""
    start: object
    step_check: object
    network: object
    import_epoch: object
    target_check: object = None
    zoo_augmentation: dict = field(default_factory=dict)


SIDES = {"ssd": Architecture(ssd_start, ssd_step_check,
                             lambda options: ssd_network(options.data_shape), import_ssd_epoch,
                             ssd_target_check),
         # GluonCV's FasterRCNNDefaultTrainTransform flips and resizes, without the colour
         # jitter the zoo's short-side augmentation adds by default.
         "faster_rcnn": Architecture(parity_rcnn.start, parity_rcnn.step_check,
                                     parity_rcnn.network_request, parity_rcnn.import_epoch,
                                     zoo_augmentation={"colour_jitter": False})}
"""Each architecture's :class:`Architecture` (the table's keys are
:data:`zoo_bench.options.PARITY_ARCHITECTURES`)."""


def options_json(options):
    return {k: (list(v) if isinstance(v, tuple) else v) for k, v in asdict(options).items()}


def plot(result, path):
    """Held-out VOC07 mAP by epoch, each side's mean over seeds with a band from its lowest
    to its highest seed."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(6, 4))
    for side, colour, label in (("zoo", "tab:blue", "zoo"), ("gluoncv", "tab:orange",
                                                              "GluonCV")):
        runs = [run for run in result.runs if run.side == side]
        epochs = [e.epoch for e in runs[0].epochs]
        values = np.array([[e.voc07 for e in run.epochs] for run in runs])
        mean, label = values.mean(axis=0), "%s (%d seeds)" % (label, len(runs))
        if len(epochs) == 1:
            # One epoch (the default from a trained trunk): a point a side, side by side, with
            # a bar over the seeds' range, where a band would be a line.
            ax.errorbar([epochs[0] + (-0.05 if side == "zoo" else 0.05)], mean, fmt="o",
                        color=colour, capsize=6, label=label,
                        yerr=[mean - values.min(axis=0), values.max(axis=0) - mean])
            ax.set_xlim(epochs[0] - 0.5, epochs[0] + 0.5)
            continue
        ax.plot(epochs, mean, color=colour, label=label)
        ax.fill_between(epochs, values.min(axis=0), values.max(axis=0), color=colour,
                        alpha=0.25)
    ax.set_xticks(sorted({e.epoch for run in result.runs for e in run.epochs}))
    ax.set_xlabel("epoch")
    ax.set_ylabel("held-out VOC07 mAP")
    ax.set_title("%s: zoo and GluonCV from the same initial parameters"
                 % result.architecture.upper())
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def report(result):
    """The verdict line after a table of every run's epochs."""
    lines = ["%-8s %4s  %s" % ("side", "seed", "held-out VOC07 mAP (COCO AP) by epoch")]
    for run in result.runs:
        lines.append("%-8s %4d  %s" % (run.side, run.seed, "  ".join(
            "%.3f (%.3f)" % (e.voc07, e.coco_ap) for e in run.epochs)))
    lines.append(verdict(result)["line"])
    return "\n".join(lines)


def write_outputs(result, work_dir):
    """``parity_ssd.json`` (every epoch of every run, the verdict) and ``parity_ssd.png``."""
    base = os.path.join(work_dir, "parity_%s" % result.architecture)
    with open(base + ".json", "w") as f:
        json.dump(result.to_json(), f, indent=1)
    plot(result, base + ".png")
    return base + ".json", base + ".png"
