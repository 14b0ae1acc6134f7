"""GluonCV's side of ``zoo benchmark-parity``: GluonCV's own SSD training components, as
``scripts/detection/ssd/train_ssd.py`` uses them, started from a parameter file.

Run as ``python -m zoo_bench.parity_gluoncv REQUEST.json`` (a child process of its own, under
MXNet's threaded engine as GluonCV's scripts run: its DataLoader forks worker processes after
the network ran, and under the zoo's synchronous engine such workers hang). The request
(:func:`zoo_bench.parity.gluoncv_request` writes it) names the network, the initial
parameters, the VOC folder, the batch, the epochs and the optimiser's settings; the child
writes ``PREFIX-NNNN.params`` (``save_parameters``) after every epoch and one JSON line per
epoch on its standard output (``{"epoch": k, "loss": ..., "seconds": ...}``).

What is GluonCV's here, unchanged: the network (``get_ssd``), ``SSDDefaultTrainTransform``
given the network's anchors (colour distortion, expansion, IoU-constrained crop, flip,
resize, and the matching that makes the targets, in the data workers; with
``"augmentation": "light"`` its expansion and crop are made identities,
:func:`without_zoom_and_crop`), ``Tuple(Stack(), Stack(), Stack())``,
``gluon.data.DataLoader`` (its forked workers), ``SSDMultiBoxLoss`` and ``gluon.Trainer``
(SGD) stepping by 1. Paired with the zoo's side: the loader takes its batches from the request
(the zoo's loader's batches at the same seed, :class:`PairedBatches`) rather than shuffling
on its own, and each sample's augmentation is seeded by its epoch and index
(:class:`SeededSamples`), so one seed's run repeats and both sides see the same images in the
same order; the augmentation draws stay GluonCV's own. The lr schedule is MXNet's
scheduler built as the zoo builds it (:func:`zoo.engine.trainer.lr_scheduler`), so both sides
follow one schedule; GluonCV's script steps its lr by hand at given epochs, which this equals
for a schedule without warm-up.
"""
import json
import random
import sys
import time
import warnings

import mxnet as mx
import numpy as np
from mxnet import autograd, gluon

__all__ = ["PairedBatches", "SeededSamples", "ZooBatches", "embedded_classes",
           "gluon_faster_rcnn", "gluon_ssd", "main", "paired_loader", "rcnn_train_step",
           "ssd_anchors", "ssd_targets", "train_step", "with_backbone", "zoo_loader"]


def embedded_classes():
    """The classes of the embedded data both sides train on."""
    from zoo.data import embedded
    return list(embedded.CLASSES)


def gluon_ssd(network, classes):
    """GluonCV's SSD of ``network`` (``get_ssd``'s arguments: base, data side, features,
    filters, sizes, ratios, steps) for ``classes``, uninitialised, with its blocks named as in
    a fresh process."""
    from gluoncv.model_zoo.ssd.ssd import get_ssd
    with mx.name.NameManager(), warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        return get_ssd(network["base"], network["side"], features=network["features"],
                       filters=network["filters"], sizes=network["sizes"],
                       ratios=network["ratios"], steps=network["steps"],
                       classes=list(classes), dataset="", pretrained=False,
                       pretrained_base=False)


def gluon_faster_rcnn(network, classes):
    """GluonCV's ``FasterRCNN`` of ``network`` (``get_faster_rcnn``'s keywords under
    ``"rcnn"``, the base under ``"base"`` and where it is cut under ``"cut"``) for ``classes``,
    uninitialised, with its blocks named as in a fresh process. The base is split as
    ``faster_rcnn_resnet50_v1b_voc`` splits ResNet-50 (:func:`split_mobilenetv2`)."""
    from gluoncv.model_zoo.rcnn.faster_rcnn.faster_rcnn import get_faster_rcnn
    with mx.name.NameManager(), warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        features, top_features = split_mobilenetv2(network["cut"])
        return get_faster_rcnn(network["base"], "", pretrained=False, features=features,
                               top_features=top_features, classes=list(classes),
                               **network["rcnn"])


def with_backbone(backbone_from, importer, net, **fields):
    """``backbone_from``'s backbone arrays (a zoo artifact's prefix, or ``"none"``) written
    into GluonCV's initialised ``net`` before it is saved and imported
    (:func:`zoo.gluoncv.common.take_backbone`, ``importer``'s config with ``fields``), so that
    both sides start from them: ``"PREFIX-NNNN: N arrays"``, or None for ``"none"``."""
    from zoo.gluoncv.common import take_backbone
    from zoo_bench.options import FROM_SCRATCH
    if backbone_from == FROM_SCRATCH:
        return None
    return "%s: %d arrays" % take_backbone(importer, net, backbone_from, **fields)


def split_mobilenetv2(cut):
    """GluonCV's ``mobilenetv2_1.0`` (its default batch norm: batch statistics in training)
    as ``(features, top_features)``: ``features`` its ``features`` children before ``cut``
    and the expansion (1x1, batch norm, ReLU6) of the bottleneck at ``cut``, the stride-16
    map of 576 channels the RPN and ROIAlign read; ``top_features`` the rest of that
    bottleneck (its strided depthwise and projection, one child) and every later child up to
    the last ReLU6, run on every ROI. The global pooling stays out: ``FasterRCNN`` pools."""
    from gluoncv.model_zoo.mobilenet import get_mobilenet_v2
    from mxnet.gluon import nn
    layers = get_mobilenet_v2(1.0, pretrained=False).features
    bottleneck = layers[cut].out
    features, top_features = nn.HybridSequential(), nn.HybridSequential()
    expansion, reduction = nn.HybridSequential(), nn.HybridSequential()
    for index in range(cut):
        features.add(layers[index])
    for index in range(len(bottleneck)):
        (expansion if index < 3 else reduction).add(bottleneck[index])
    features.add(expansion)
    top_features.add(reduction)
    for index in range(cut + 1, len(layers) - 1):  # the last is the global pooling
        top_features.add(layers[index])
    return features, top_features


def train_step(net, loss_fn, trainer, data, cls_targets, box_targets):
    """One step of GluonCV's script: the forward pass recorded, ``SSDMultiBoxLoss``,
    backward, ``trainer.step(1)``. Returns the class and box terms, each summed over the
    batch (per positive anchor, as ``SSDMultiBoxLoss`` divides them)."""
    with autograd.record():
        cls_preds, box_preds, _ = net(data)
        loss, cls_loss, box_loss = loss_fn([cls_preds], [box_preds], [cls_targets],
                                           [box_targets])
    autograd.backward(loss)
    trainer.step(1)
    return [float(cls_loss[0].sum().asscalar()), float(box_loss[0].sum().asscalar())]


def rcnn_train_step(losses, trainer, batch, images):
    """One step of GluonCV's ``train_faster_rcnn.py``: the forward pass recorded, its four
    losses (``losses``, a :class:`zoo_bench.gluoncv_recipes.FasterRCNNLosses`) summed,
    backward, ``trainer.step(images)``. Returns the RPN class and box terms and the R-CNN
    class and box terms, each the mean over the batch's images."""
    with autograd.record():
        terms, _ = losses(*batch)
        total = terms[0].sum() + terms[1].sum() + terms[2].sum() + terms[3].sum()
    autograd.backward(total)
    trainer.step(images)
    return [float(term.sum().asscalar()) / images for term in terms]


def seed_everything(seed):
    """The seeds GluonCV's pieces draw from: MXNet's (the network's dropout-free layers and
    nothing else here), NumPy's and Python's (the transform's augmentation)."""
    mx.random.seed(seed)
    np.random.seed(seed)
    random.seed(seed)


def without_zoom_and_crop():
    """Make the random expansion and the IoU-constrained crop that GluonCV's
    ``SSDDefaultTrainTransform`` calls identities (``--augmentation light``): its colour
    distortion, random-interpolation resize, flip and target generation run as they are."""
    from gluoncv.data.transforms import experimental
    from gluoncv.data.transforms import image as timage

    def no_expansion(src, *args, **kwargs):
        height, width = src.shape[:2]
        return src, (0, 0, width, height)

    def no_crop(bbox, size, *args, **kwargs):
        return bbox, (0, 0, size[0], size[1])
    timage.random_expand = no_expansion
    experimental.bbox.random_crop_with_constraints = no_crop


SAMPLE_STREAM = 1
"""The last number of each sample's seed key ``[seed, epoch, index, SAMPLE_STREAM]``: the
zoo's loader seeds each sample's RandomState with ``[seed, epoch, index]``, so GluonCV's
augmentation draws from streams of its own, not the zoo's."""


class SeededSamples(gluon.data.Dataset):
    """``images`` through GluonCV's ``transform``, item ``(epoch, index)`` drawn from the
    NumPy and Python random states seeded by ``[seed, epoch, index, SAMPLE_STREAM]`` just
    before the transform runs: the transform (every draw of GluonCV's SSD and Faster R-CNN
    presets is ``np.random`` or ``random``) then gives a sample the same augmentation
    whichever forked worker makes it and in whatever order the workers take their batches.
    (Unseeded, the workers start from one copied NumPy state and take batches as they
    free up: one seed's run was not repeatable, BENCHMARKS.md.)"""

    def __init__(self, images, transform, seed):
        self.images, self.transform, self.seed = images, transform, seed

    def __len__(self):
        return len(self.images)

    def __getitem__(self, key):
        epoch, index = key
        np.random.seed([self.seed, epoch, index, SAMPLE_STREAM])
        random.seed(int(np.random.randint(2 ** 31)))
        return self.transform(*self.images[index])


class PairedBatches:
    """A ``batch_sampler`` for ``gluon.data.DataLoader``: epoch k (the k-th ``iter``) yields
    ``batches[k]``, the dataset indices of each of its batches, as ``(k, index)`` keys of
    :class:`SeededSamples`. :func:`zoo_bench.parity.paired_batches` gives the zoo's loader's
    batches of the same seed: both sides see the same images in the same order."""

    def __init__(self, batches):
        self.batches, self.epoch = batches, 0

    def __iter__(self):
        epoch, self.epoch = self.epoch, self.epoch + 1
        for indices in self.batches[epoch]:
            yield [(epoch, int(index)) for index in indices]

    def __len__(self):
        return len(self.batches[min(self.epoch, len(self.batches) - 1)])


def paired_loader(request, images, transform, batchify):
    """GluonCV's ``DataLoader`` (its forked workers, ``batchify``) over ``images`` through
    ``transform``, in the request's batches (:class:`PairedBatches`), every sample's
    augmentation seeded (:class:`SeededSamples`)."""
    return gluon.data.DataLoader(
        SeededSamples(images, transform, request["seed"]),
        batch_sampler=PairedBatches(request["batches"]), batchify_fn=batchify,
        num_workers=request["data_workers"])


def _loader(request, net):
    from gluoncv.data.batchify import Stack, Tuple
    from gluoncv.data.transforms.presets.ssd import SSDDefaultTrainTransform
    from zoo.data.factory import open_dataset
    from zoo_bench.data import GluonCVImageFiles
    side = request["network"]["side"]
    images = GluonCVImageFiles(open_dataset("voc", request["root"], request["split"]).records)
    transform = SSDDefaultTrainTransform(side, side, ssd_anchors(net, side).as_in_context(
        mx.cpu()))
    return paired_loader(request, images, transform, Tuple(Stack(), Stack(), Stack())), \
        len(images)


def ssd_anchors(net, side):
    """The anchors ``(1, N, 4)`` (centre, size in pixels) GluonCV's SSD ``net`` makes at
    input ``side``: what its transform and target generator match boxes against."""
    with autograd.train_mode():
        _, _, anchors = net(mx.nd.zeros((1, 3, side, side)))
    return anchors


def zoo_loader(options, classes):
    """``zoo train``'s own loader of a run with ``TrainOptions`` ``options`` (its items,
    augmentation, batches and order, :func:`zoo.jobs.train.training_loader`), and how many
    items it draws from."""
    from zoo.jobs.train import build_train_model, open_split, training_items, training_loader
    items = training_items(options, open_split(options, options.train_split))
    return training_loader(options, build_train_model(options, classes), items), len(items)


def ssd_targets(anchors, labels, scale=1.0):
    """GluonCV's class and box targets ``(B, N)``, ``(B, N, 4)`` of a batch's ``labels``
    (rows ``[class, x1, y1, x2, y2, ...]``, padded with -1, one array an image, the boxes in
    pixels once multiplied by ``scale``): ``SSDTargetGenerator`` as
    ``SSDDefaultTrainTransform`` builds it, given each image's boxes in pixels as the
    transform gives them."""
    from gluoncv.model_zoo.ssd.target import SSDTargetGenerator
    generator = SSDTargetGenerator(iou_thresh=0.5, stds=(0.1, 0.1, 0.2, 0.2),
                                   negative_mining_ratio=-1)
    classes, boxes = [], []
    for label in labels:
        label = label[label[:, 0] >= 0]
        cls_target, box_target, _ = generator(anchors, None,
                                              mx.nd.array(label[None, :, 1:5] * scale),
                                              mx.nd.array(label[None, :, 0:1]))
        classes.append(cls_target[0])
        boxes.append(box_target[0])
    return mx.nd.stack(*classes), mx.nd.stack(*boxes)


class ZooBatches:
    """``--gluoncv-input zoo``: the zoo's loader's batches (its images, augmentation and
    order: ``zoo train``'s own loader built from the request's ``zoo_train`` options) as
    GluonCV's step takes them, ``(data, class targets, box targets)``, the targets made by
    GluonCV's generator from the zoo's boxes (:func:`ssd_targets`). Both sides then train on
    the same arrays: what differs is the training step alone."""

    def __init__(self, request, anchors):
        from zoo.jobs.train_options import TrainOptions
        options = TrainOptions(**{key: tuple(value) if isinstance(value, list) else value
                                  for key, value in request["zoo_train"].items()})
        self.loader, self.images = zoo_loader(options, request["classes"])
        self.anchors, self.side = anchors, request["network"]["side"]

    def __len__(self):
        return len(self.loader)

    def __iter__(self):
        for batch in self.loader:
            yield (mx.nd.array(batch.data),) + ssd_targets(self.anchors, batch.label,
                                                            self.side)


def _zoo_loader(request, net):
    batches = ZooBatches(request, ssd_anchors(net, request["network"]["side"]))
    return batches, batches.images


LOADERS = {"own": _loader, "zoo": _zoo_loader}
"""GluonCV's input per ``--gluoncv-input``: its own transform and DataLoader, or the zoo's
loader's batches."""


def train(request, answer):
    """Train as the request says, writing a parameter file after every epoch."""
    from gluoncv.loss import SSDMultiBoxLoss
    from zoo.engine.trainer import lr_scheduler
    seed_everything(request["seed"])
    if request["augmentation"] == "light":
        without_zoom_and_crop()
    net = gluon_ssd(request["network"], request["classes"])
    net.load_parameters(request["init_params"], ctx=mx.cpu())
    loader, images = LOADERS[request.get("input", "own")](request, net)
    net.hybridize(static_alloc=True, static_shape=True)
    sgd = request["sgd"]
    steps_per_epoch = len(loader)
    schedule = lr_scheduler(sgd["lr"], steps_per_epoch, sgd["lr_steps"], sgd["lr_factor"],
                            sgd["warmup_epochs"])
    trainer = gluon.Trainer(net.collect_params(), "sgd", {
        "learning_rate": sgd["lr"], "wd": sgd["wd"], "momentum": sgd["momentum"],
        "lr_scheduler": schedule})
    loss_fn = SSDMultiBoxLoss()
    for epoch in range(1, request["epochs"] + 1):
        start, sums, batches = time.time(), np.zeros(2), 0
        for batch in loader:
            # The workers' arrays live in shared memory: on the training device, as the
            # script's split_and_load puts them.
            data, cls_targets, box_targets = (gluon.utils.split_and_load(field, [mx.cpu()])[0]
                                              for field in batch)
            terms = train_step(net, loss_fn, trainer, data, cls_targets, box_targets)
            # The step done before the next begins: on the threaded engine two runs of one
            # seed otherwise ended with the weights equal to the last bit and the batch
            # norms' moving variances up to 18% apart (MKL-DNN's batch norm updates them in
            # the backward pass from batch statistics the next forward of the statically
            # allocated graph rewrites, as far as I can tell); the synchronous engine, or
            # this wait, gives equal files.
            mx.nd.waitall()
            if epoch == 1 and batches == 0:
                print("gluoncv: initial loss %.3f (cls_loss %.3f, box_loss %.3f)"
                      % (sum(terms), terms[0], terms[1]), file=sys.stderr, flush=True)
            sums += terms
            batches += 1
        path = "%s-%04d.params" % (request["prefix"], epoch)
        net.save_parameters(path)
        cls_mean, box_mean = sums / max(batches, 1)
        answer({"epoch": epoch, "loss": cls_mean + box_mean, "cls_loss": cls_mean,
                "box_loss": box_mean, "batches": batches,
                "images": images, "seconds": time.time() - start, "params": path})


def _rcnn_loader(request, net):
    """GluonCV's script's loader: ``FasterRCNNDefaultTrainTransform`` given the network (its
    resize, flip and RPN targets in the data workers), ``FasterRCNNTrainBatchify``."""
    from gluoncv.data.batchify import FasterRCNNTrainBatchify
    from gluoncv.data.transforms.presets.rcnn import FasterRCNNDefaultTrainTransform
    from zoo.data.factory import open_dataset
    from zoo_bench.data import GluonCVImageFiles
    network = request["network"]
    images = GluonCVImageFiles(open_dataset("voc", request["root"], request["split"]).records)
    transform = FasterRCNNDefaultTrainTransform(
        network["rcnn"]["short"], network["rcnn"]["max_size"], net, ashape=net.ashape,
        **network["rpn_targets"])
    return paired_loader(request, images, transform, FasterRCNNTrainBatchify(net, 1)), \
        len(images)


def train_rcnn(request, answer):
    """Train GluonCV's Faster R-CNN as the request says (``train_faster_rcnn.py``'s step,
    :func:`rcnn_train_step`), writing a parameter file after every epoch."""
    from zoo.engine.trainer import lr_scheduler
    from zoo_bench.gluoncv_recipes import FasterRCNNLosses, on_cpu
    seed_everything(request["seed"])
    net = gluon_faster_rcnn(request["network"], request["classes"])
    net.load_parameters(request["init_params"], ctx=mx.cpu())
    loader, images = _rcnn_loader(request, net)
    net.hybridize(static_alloc=True)
    sgd, batch_size = request["sgd"], request["batch_size"]
    schedule = lr_scheduler(sgd["lr"], len(loader), sgd["lr_steps"], sgd["lr_factor"],
                            sgd["warmup_epochs"])
    trainer = gluon.Trainer(net.collect_train_params(), "sgd", {
        "learning_rate": sgd["lr"], "wd": sgd["wd"], "momentum": sgd["momentum"],
        "lr_scheduler": schedule})
    losses = FasterRCNNLosses(net)
    for epoch in range(1, request["epochs"] + 1):
        start, sums, batches = time.time(), np.zeros(4), 0
        for batch in loader:
            sums += rcnn_train_step(losses, trainer, on_cpu(batch), batch_size)
            mx.nd.waitall()  # as train's: the moving statistics of the batch norms
            batches += 1
        path = "%s-%04d.params" % (request["prefix"], epoch)
        net.save_parameters(path)
        rpn_cls, rpn_box, rcnn_cls, rcnn_box = sums / max(batches, 1)
        answer({"epoch": epoch, "loss": float(sums.sum() / max(batches, 1)),
                "cls_loss": rpn_cls + rcnn_cls, "box_loss": rpn_box + rcnn_box,
                "batches": batches, "images": images, "seconds": time.time() - start,
                "params": path})


TRAINERS = {"ssd": train, "faster_rcnn": train_rcnn}
"""The child's training loop per architecture of the request."""


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    with open(argv[0]) as f:
        request = json.load(f)
    # Only the answers go to standard output: anything else printed goes to stderr.
    answers, sys.stdout = sys.stdout, sys.stderr

    def answer(value):
        print(json.dumps(value), file=answers, flush=True)
    TRAINERS[request.get("architecture", "ssd")](request, answer)
    return 0


if __name__ == "__main__":
    sys.exit(main())
