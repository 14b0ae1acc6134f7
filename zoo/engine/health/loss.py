"""The first loss of a run against the trivial predictor's on the same batch.

The trivial predictor gives every class the same score and every anchor or proposal zero
box offsets: each classification term is then ln(K+1) (ln 2 for the RPN's), and each box
term measures the regression targets themselves. A run whose first loss is several times
that starts from a broken initialisation (a class head 100x too large gave 25.4/112.8
against 2.25/2.99), whichever way it starts: from scratch, ``--resume`` (a checkpoint saved
after a blow-up) or ``--init-from`` (a fine-tuning source with a broken head; a healthy
fine-tune starts near or below the trivial loss). A box term of the trivial predictor far
above what healthy data measures says that the targets themselves are absurd: boxes not in
pixels, or anchors that fit no box.

The trivial loss is measured exactly, by one extra forward pass of the first batch in
inference mode (batch-norm running statistics untouched) with the layers that output the
class scores and box offsets (:attr:`zoo.architectures.base.Architecture.prediction_params`)
zeroed, restored after; the epoch's seeds are set again, so the first step samples its
targets as it would have without the check.
"""
import logging
import math
import re

from symbols.backbones import BACKBONES

from zoo.engine import module_adapter
from zoo.engine.hooks import Hook

__all__ = ["BOX_TARGET_LIMITS", "CHECK", "INITIAL_LOSS_LIMITS", "InitialLossCheck",
           "initial_loss_limit", "trivial_losses"]

LOG = logging.getLogger("zoo.train")
CHECK = "initial loss"

# Healthy first losses over the trivial one, the zoo's own initialisation, first step of
# `zoo train` at small sizes (SSD 192-300, Faster R-CNN 128), batch 2-4, on the embedded
# shapes data (4 classes) and a 20-class relabelling of it:
#   ssd_mobilenetv2_stride8, ssd_mobilenetv2 (seeds 0-4; 20 classes: seeds 0-2)  1.13x-1.37x
#   ssd_mobilenetv2_stride8 resumed after 8 epochs                               0.55x
#   ssd_mobilenetv2_stride8 fine-tuned (--init-from) onto other images, seeds 0-2 0.85x-1.97x
#   ssd_inceptionv3 at 300 (seeds 0-2)                                           1.47x-1.69x
#   ssd_resnet50, ssd_resnet101 at 300, ssd_resnet50_v1_gluoncv_voc at 512 (seeds 0-2)
#                                                                                3.10x-7.38x
#   faster_rcnn_mobilenetv2 (seeds 0-4; 20 classes: seeds 0-1), _resnet50 (seeds 0-2),
#   _resnet101, _inceptionv3, _resnet50_gluoncv_voc (seeds 0-2)                  0.84x-1.24x
#   faster_rcnn_fpn_mobilenetv2 (seeds 0-4; 20 classes: 0-1), _resnet50 (seed 0),
#   _resnet101, _inceptionv3, _resnet50_gluoncv_coco (seeds 0-2)                 1.19x-9.63x
# SSD's hard-negative mining keeps the negatives the random head scores worst, hence its
# start above 1; on a ResNet its heads start with larger class scores (cls_loss 7.9-17.9
# against ln 5 on the runs above), and larger box offsets: the ResNets' registrations
# (symbols/backbones/resnet.py) carry their own limit for SSD. FPN's box
# head starts with class logits in the tens (rcnn_cls_loss up to 18 against ln 5 from
# scratch: fc6 takes 12,544 unnormalised pyramid values). Those limits sit above what the
# zoo's own initialisation gives. A class head 100x too large (an --init-from source
# trained an epoch, its class weights scaled) gave 13x-30x on MobileNetV2 SSDs, 13.7x and
# 17.0x on ssd_resnet50 and ssd_resnet101, 87x on faster_rcnn_fpn_resnet50.
INITIAL_LOSS_LIMITS = {"ssd": 3.0, "faster_rcnn": 2.0, "faster_rcnn_fpn": 12.0}
"""The limit of a first loss over the trivial one, by architecture; a backbone that starts
differently registers its own (``initial_loss_limits`` of
:func:`symbols.backbones.register_backbone`)."""
DEFAULT_LIMIT = 3.0
"""The limit of an architecture not measured."""
# SSD's box term of the trivial predictor (the targets' smooth L1 per positive anchor) on
# the same runs: 2.1-3.6; boxes normalised to [0, 1] but read as pixels gave 39.9. Faster
# R-CNN's box terms are averaged over the sampled anchors and ROIs, mostly background
# (0.003-0.4 measured), where absurd targets hardly show: not judged.
BOX_TARGET_LIMITS = {"ssd": 12.0}


def initial_loss_limit(arch, backbone):
    """``(limit, what it is for)``: the first loss over the trivial one a healthy start of
    ``arch`` on the backbone named ``backbone`` stays under: the backbone's registered
    limit for ``arch``, else :data:`INITIAL_LOSS_LIMITS`."""
    entry = BACKBONES.get(backbone)
    if entry is not None and arch in entry.initial_loss_limits:
        return entry.initial_loss_limits[arch], "%s on %s" % (arch, backbone)
    return INITIAL_LOSS_LIMITS.get(arch, DEFAULT_LIMIT), arch


def trivial_losses(trainer, batch, epoch):
    """``{loss name: value}`` of the trivial predictor on ``batch``, the first of
    ``epoch``: one inference-mode forward pass with the prediction layers zeroed, every
    array restored after and the epoch's seeds set again."""
    module = trainer.module
    pattern = re.compile(trainer.model.arch.prediction_params)
    saved = []
    for name, arrays in module_adapter.param_arrays(module):
        if pattern.search(name):
            for array in arrays:
                saved.append((array, array.copy()))
                array[:] = 0
    try:
        module.forward(trainer.data_batch(batch), is_train=False)
        return trainer.model.training_losses(module.get_outputs())
    finally:
        for array, copy in saved:
            copy.copyto(array)
        trainer.seed_epoch(epoch)


def log_name(name, value):
    """``"ln 5"`` where ``name`` is a classification term (``*cls*``) and ``value`` the log
    of a small integer (the trivial predictor's), else ``""``: a box term is the targets'
    own size, which may lie near a log by chance (2.8332 against ln 17)."""
    count = round(math.exp(value)) if "cls" in name and 0 < value < 10 else 0
    return "ln %d" % count if count > 1 and abs(value - math.log(count)) < 1e-3 else ""


def terms(losses, against=None):
    """``"cls_loss 25.4, box_loss 112.8"``, with ``against``: ``"cls_loss 25.4 against
    1.61 = ln 5, ..."``."""
    parts = []
    for name, value in losses.items():
        part = "%s %.3g" % (name, value)
        if against is not None:
            reference = against[name]
            named = log_name(name, reference)
            part += " against %.3g%s" % (reference, " = " + named if named else "")
        parts.append(part)
    return ", ".join(parts)


def way_out(trainer):
    """What to look at when this start's parameters are broken, by where they came from."""
    if trainer.resumed is not None:
        return ("this run resumes %s-%04d, which may have been saved after a blow-up: resume "
                "from an earlier epoch" % (trainer.resumed.prefix, trainer.resumed.epoch))
    if trainer.initial_params is not None:
        return ("this run is fine-tuned: the --init-from artifact's class or box layers are "
                "broken, start from another epoch (--init-epoch) or another artifact")
    return ("this run starts from scratch: look at the scale of the class and box layers' "
            "initialisation")


class InitialLossCheck(Hook):
    """Measures the trivial predictor's loss on the first batch of the run (of this start:
    also after a resume) and judges the first step's loss against it, with the architecture's
    limit from :data:`INITIAL_LOSS_LIMITS`; checks the trivial box terms against
    :data:`BOX_TARGET_LIMITS`. Puts the trivial total in ``trainer.health.trivial_loss`` for
    the checks that judge later losses against it."""
    only_rank0 = True

    def __init__(self):
        self.trivial, self.first = None, None

    def before_step(self, trainer, epoch, batch_index, batch):
        if self.trivial is not None or self.first is not None:
            return
        if not trainer.model.arch.prediction_params:
            self.first = {}
            trainer.health.result(CHECK, "not run", "%s names no prediction layers"
                                  % trainer.model.arch.name)
            return
        self.trivial = trivial_losses(trainer, batch, epoch)
        total = sum(self.trivial.values())
        trainer.health.trivial_loss = total if math.isfinite(total) and total > 0 else None

    def after_step(self, trainer, epoch, batch_index, losses):
        if self.first is not None or self.trivial is None:
            return
        self.first = dict(losses)
        self.judge(trainer, epoch)

    def judge(self, trainer, epoch):
        arch = trainer.model.arch.name
        first, trivial = sum(self.first.values()), sum(self.trivial.values())
        if not (trivial > 0 and math.isfinite(first)):
            # Non-finite: the divergence check stops the run; zero: no object to learn from.
            trainer.health.result(CHECK, "not run", "the first batch's trivial loss is %.3g"
                                  % trivial)
            return
        ratio = first / trivial
        LOG.info("initial loss %.4g, %.2fx the trivial predictor's %.4g on the same batch (%s)",
                 first, ratio, trivial, terms(self.first, self.trivial))
        limit, healthy = initial_loss_limit(arch, trainer.model.config.get("backbone"))
        warned = False
        if ratio > limit:
            trainer.health.warn(CHECK, (
                "the first loss %.4g (%s) is %.1fx the trivial predictor's %.4g on the same "
                "batch (equal class scores, zero box offsets: %s); healthy %s starts measure "
                "under %gx; %s"
                % (first, terms(self.first), ratio, trivial, terms(self.trivial), healthy,
                   limit, way_out(trainer))), epoch=epoch + 1)
            warned = True
        warned |= self.judge_box_targets(trainer, epoch)
        if not warned:
            trainer.health.result(CHECK, "ok", "%.2fx trivial" % ratio)

    def judge_box_targets(self, trainer, epoch):
        """Warn when a box term of the trivial predictor (the targets' own size) is far
        above healthy data's; returns whether it warned."""
        limit = BOX_TARGET_LIMITS.get(trainer.model.arch.name)
        boxes = {name: value for name, value in self.trivial.items()
                 if limit and "box" in name and value > limit}
        if not boxes:
            return False
        trainer.health.warn(CHECK, (
            "the box targets themselves are far off on the first batch: with zero box offsets "
            "%s, where healthy data measures under %g: the anchors fit no box; are the "
            "annotations' boxes in pixels of their images, as x1,y1,x2,y2 (COCO: x,y,w,h)? "
            "look at the first batch's picture, or zoo check-data"
            % (", ".join("%s is %.3g" % kv for kv in boxes.items()), limit)), epoch=epoch + 1)
        return True
