"""Train a registered detector (or one from a YAML config) on a dataset, on one process or
as one worker of a parameter-server cluster (``dist_*`` kvstores, started by ``zoo launch``):
open the datasets, build the model, the augmentation and the loader, and run
:class:`zoo.engine.trainer.Trainer` with the default hooks."""
import contextlib
import logging
import os
import shlex
from dataclasses import asdict, dataclass, replace
from typing import Optional

from zoo import artifact, runlock
from zoo.engine import finetune, memory
from zoo.data import DetectionLoader, inference_transform, train_transform
from zoo.data.factory import needs_root
from zoo.data.tiles import TiledDataset, tiling
from zoo.distributed.cluster import create_dist_kvstore, is_distributed, is_synchronous
from zoo.engine.health import census
from zoo.engine.health.first_batch import FirstBatch, picture_path
from zoo.engine.health.batches import BatchRepeatCheck
from zoo.engine.health.dynamics import LossDynamicsCheck
from zoo.engine.health.loss import InitialLossCheck
from zoo.engine.health.batchnorm import BatchNormCheck
from zoo.engine.health.overfit import OneBatchLoader, OverfitCheck
from zoo.engine.health.reference import ConfusionMatrix, ReferenceCheck, reference_log
from zoo.engine.health.report import HealthReport
from zoo.engine.health.summary import HealthSummary
from zoo.engine.hooks import DivergenceCheck, ProgressBar, default_hooks, last_checkpoint_note
from zoo.engine.precision import resolve_dtype
from zoo.engine.trainer import Trainer, TrainingInterrupted
from zoo.errors import OptionsError
from zoo.inference.runner import default_batch_size
from zoo.process import gpu_ids
from zoo.schema.anchors import best_possible_recall
from zoo.schema.preprocessing import input_size
from zoo.model import build_model
from zoo.config.registry import network_config
from zoo.jobs import LOG_FORMAT
from zoo.jobs.datasets import DataSplit
from zoo.jobs.train_options import TrainOptions  # the job's options, defined without MXNet

__all__ = ["LOG", "TrainOptions", "WARMUP_SHARE", "build_train_model", "data_census",
           "eval_command", "fit_anchors", "last_batch", "learning_rate", "make_trainer",
           "open_data", "resolved", "resume_prefix", "total_batch", "train", "training_batch",
           "training_loader", "warm_up"]

LOG = logging.getLogger("zoo.train")
CLASSES_SHOWN = 8
"""Class names the header line lists before "...". """
ANCHORS = "anchors"
"""The name of ``--fit-anchors``' result in the health record."""
MEMORY_SHARE = 0.5
"""The share of the available memory a default batch's estimate may take: the rest is the
machine's (other processes, the page cache of the photos, the validation's detector)."""
MEMORY_MARGIN = 0.9
"""A given batch whose estimate exceeds this share of the available memory is refused."""
MIN_STEPS = 4
"""A default batch leaves at least this many steps an epoch (a quarter of the images):
fewer would make the lr schedule and warm-up, counted in steps, a handful of updates."""
DROP_SHARE = 0.05
"""The share of an epoch's images a short last batch may leave out (a different few each
epoch: the order is shuffled); with more left over, it is filled from the epoch's start."""
WARMUP_SHARE = 0.5
"""The most of a run's updates a default warm-up takes: a recipe's (500 updates) would
outlast a short run on a small data set (10 epochs of 20 steps), which would then never
train at its lr."""


@dataclass(frozen=True)
class TrainResult:
    prefix: str                          # the run's artifact prefix
    rows: list                           # per-epoch log rows of this process's epochs
    best_epoch: Optional[int]            # of the artifact (None: none validated, or rank > 0)
    rank: int = 0
    worker_log: Optional[str] = None     # a dist worker of rank > 0 logs to this file
    overfit: Optional[str] = None        # with overfit_batch: the line saying it passed


def train_config(options):
    """The config of ``network``, else the one ``init_from``'s artifact stores."""
    if options.network:
        return network_config(options.network)
    if options.init_from:
        return finetune.source_config(options.init_from, options.init_epoch)
    raise OptionsError("train needs a network, or init_from to build the model of the "
                       "artifact it starts from")


def build_train_model(options, class_names, category_ids=None):
    """The model for the dataset's classes (and their COCO category ids, a COCO file's; None
    for a dataset without, whatever the config or the fine-tuned artifact held) at the
    options' data shape."""
    config = train_config(options)
    overrides = {"num_classes": len(class_names), "class_names": list(class_names),
                 "category_ids": None if category_ids is None else list(category_ids)}
    if options.data_shape:
        overrides["data_shape"] = options.data_shape
    return build_model(config, pretrained_backbone=options.pretrained_backbone, **overrides)


def make_trainer(options, kvstore=None):
    """The :class:`Trainer` of a run; with a dist ``kvstore`` this worker trains on its
    rank's shard and only rank 0 validates and writes checkpoints."""
    if options.overfit_batch:
        return make_overfit_trainer(options, kvstore)
    rank, num_workers = (kvstore.rank, kvstore.num_workers) if kvstore is not None else (0, 1)
    precision, note = resolve_dtype(options.dtype, options.ctx)
    train_set, val_set = open_data(options, rank, num_workers)
    model = build_train_model(options, train_set.class_names, train_set.category_ids)
    items = training_items(options, train_set)
    options, batch_note = training_batch(options, model, items, num_workers)
    # the items the census and the fitted anchors measure: the tiles are cut once; the
    # loader's steps count the default warm-up (its transform takes no anchors)
    loader = training_loader(options, model, items, num_workers, rank)
    lr, lr_note = learning_rate(options, model.arch, num_workers)
    options, warmup_note = warm_up(options, model, len(loader))
    LOG.info("%s", header_line(options, model, len(train_set), precision, note,
                               ", ".join(filter(None, (lr_note, warmup_note))), batch_note))
    health = HealthReport()
    model, fit_line = fit_anchors(options, model, items, health)
    if fit_line:
        LOG.info("%s", fit_line)
    if options.health and rank == 0:
        LOG.info("first batch, as the network gets it: %s", picture_path(options.output_dir))
        for line in data_census(options, model, train_set, val_set, health, items):
            LOG.info("%s", line)
    if options.tiles:
        LOG.info("%s", tiles_line(loader))
    elif remainder_line(loader):
        LOG.info("%s", remainder_line(loader))
    if kvstore is not None:
        LOG.info("%s worker rank %d of %d: %d of %d samples, %d steps per epoch, %d samples "
                 "per step in all", kvstore.type, rank, num_workers,
                 len(train_set) // num_workers, len(train_set), len(loader),
                 options.batch_size * num_workers)
    prefix = os.path.join(options.output_dir, model.name)
    hooks = default_hooks(model, options.output_dir, val_dataset=val_set,
                          val_interval=options.val_interval, keep_last=options.keep_last,
                          overwrite=options.overwrite, progress=options.progress,
                          run=run_record(options),
                          checks=health_checks(options, prefix, loader.dataset, val_set, model),
                          tiles=tiling(options.tiles, options.tile_overlap))
    return Trainer(model, loader, resolved(options, lr, precision), hooks=hooks,
                   kvstore=kvstore, initial_params=initial_params(options, model),
                   health=health)


def make_overfit_trainer(options, kvstore=None):
    """The :class:`Trainer` of ``--overfit-batch``: up to ``overfit_batch`` steps on the first
    ``batch_size`` items the run would train (:func:`training_items`: images of the training
    split, or with ``--tiles`` the windows of its first epoch, in order), resized as for
    inference (no augmentation), no weight decay, no lr schedule; it writes no checkpoint."""
    for flag, value in (("--resume", options.resume), ("--reference", options.reference),
                        ("--kv-store", options.kv_store if kvstore is not None else "")):
        if value:
            raise OptionsError("--overfit-batch trains one process from the start, "
                               "alone: drop %s %s" % (flag, value))
    precision, note = resolve_dtype(options.dtype, options.ctx)
    train_set = data_split(options, options.train_split).open()
    check_batch_size(options, len(train_set), 1)  # an epoch has a window of every photo
    model = build_train_model(options, train_set.class_names, train_set.category_ids)
    items = training_items(options, train_set)
    options, _ = training_batch(options, model, items)
    lr, lr_note = learning_rate(options, model.arch)
    # The tiles, not whole photos, are what a tiled run must learn: its objects are small.
    what = "images" if options.tiles is None else "windows"
    LOG.info("overfit-batch: up to %d steps of %s on the first %d %s%s of %s, without "
             "augmentation or weight decay, %s, %s", options.overfit_batch, model.name,
             options.batch_size, what, "" if options.tiles is None else
             " (%d-pixel tiles, as the run trains them)" % options.tiles,
             data_split(options, options.train_split), precision_words(precision, note),
             lr_note)
    loader = OneBatchLoader(DetectionLoader(
        items, options.batch_size, inference_transform(model.preprocessing()),
        shuffle=False, seed=options.seed, num_workers=options.data_threads,
        max_objects=max_objects(items), skip_bad=options.skip_bad), options.overfit_batch,
        what)
    hooks = [DivergenceCheck(os.path.join(options.output_dir, model.name)),
             OverfitCheck(loader)] + ([ProgressBar()] if options.progress else [])
    return Trainer(model, loader, replace(resolved(options, lr, precision), epochs=1, wd=0.0,
                                          lr_steps=(), warmup_epochs=0.0),
                   hooks=hooks, initial_params=initial_params(options, model),
                   health=HealthReport())


def health_checks(options, prefix, train_set, val_set, model):
    """The run's training-health hooks (:mod:`zoo.engine.health`), in the order they run;
    with ``health`` off, only the summary (which then lists no check)."""
    checks = []
    if options.reference and not options.health:
        raise OptionsError("--reference %s compares through the health checks: drop "
                           "--no-health" % options.reference)
    if options.health:
        checks.append(FirstBatch(model, train_set, str(data_split(options, options.train_split)),
                                 options.output_dir))
        checks += [InitialLossCheck(), BatchRepeatCheck(), LossDynamicsCheck()]
        checks.append(BatchNormCheck(prefix, options.val_interval))
        if val_set is not None:
            checks.append(ConfusionMatrix(prefix, val_set))
        if options.reference:
            checks.append(ReferenceCheck(reference_log(options.reference), model.loss_names))
    return checks + [HealthSummary(prefix)]


def open_data(options, rank=0, num_workers=1):
    """``(train_set, val_set)``: the training split and, on rank 0, the validation split
    (None without one). Refused in one line: a batch larger than this worker's share, and
    (:mod:`zoo.engine.health.census`) boxes normalised to [0, 1], ``skip_bad`` dropping more
    than ``max_skipped`` of a split, a training split without a box."""
    check_split_paths(options)
    train_set = open_split(options, options.train_split)
    census.check_has_boxes(train_set, str(data_split(options, options.train_split)))
    check_batch_size(options, len(train_set), num_workers)
    val_set = open_val_set(options) if options.val_split and rank == 0 else None
    return train_set, val_set


def open_split(options, split, verify=False):
    """The dataset of ``split``, every image decoded first if ``verify`` (bad ones dropped
    with ``skip_bad``), refused when ``skip_bad`` dropped too many or its boxes look
    normalised."""
    name = str(data_split(options, split))
    dataset = data_split(options, split).open()
    if verify:
        dataset.verify(skip_bad=options.skip_bad, num_workers=options.data_threads)
    census.check_skipped(dataset, name, options.max_skipped)
    census.check_boxes_in_pixels(dataset, name)
    return dataset


def data_census(options, model, train_set, val_set, health, items=None):
    """The census lines of the training and validation splits (:mod:`zoo.engine.health.census`),
    their warnings issued into ``health``; boxes under a pixel at ``model``'s input counted;
    then the training boxes against ``model``'s anchors, with the recall of anchors fitted
    to them where the census would suggest ``--fit-anchors``: those of ``items``, what the
    run trains on (:func:`training_items`; default ``train_set``)."""
    items = train_set if items is None else items
    preprocessing = model.preprocessing()
    name = str(data_split(options, options.train_split))
    train = census.take_census(train_set, name, preprocessing)
    val = (census.take_census(val_set, str(data_split(options, options.val_split)), preprocessing)
           if val_set is not None else None)
    lines = census.report(health, train, val)
    sizes = census.take_sizes(items, name, preprocessing, model.anchor_maps(),
                              options.max_expand, fitted=options.fit_anchors)
    if sizes is None:
        return lines
    if census.needs_advice(sizes) and not options.fit_anchors:
        # fitted here only to say what --fit-anchors would give: a graph build, under a second
        sides = census.box_sides(items, preprocessing)
        fitted = model.with_fitted_anchors(sides)
        if fitted is not None:
            sizes = replace(sizes, fitted_recall=best_possible_recall(sides,
                                                                      *fitted.anchor_maps()))
    return lines + [census.report_sizes(health, sizes)]


def fit_anchors(options, model, train_set, health):
    """``(model, line)``: with ``--fit-anchors``, ``model`` rebuilt with anchors fitted to
    the boxes of ``train_set`` (:mod:`zoo.schema.anchors`) and the line saying so, with the
    best possible recall before and after, also recorded in ``health`` (so in each
    checkpoint's metadata); else ``model`` and None. Refused in one line for an
    architecture whose anchors cannot be fitted."""
    check_resumed_fit(options, model.name)
    if not options.fit_anchors:
        return model, None
    sides = census.box_sides(train_set, model.preprocessing())
    fitted = model.with_fitted_anchors(sides)
    if fitted is None:
        raise OptionsError("--fit-anchors: the anchors of %s (%s) cannot be fitted; drop "
                           "--fit-anchors" % (model.name, model.arch.name))
    before, after = (best_possible_recall(sides, *m.anchor_maps()) for m in (model, fitted))
    config = fitted.config
    detail = "%d boxes of %s: best possible recall %s -> %s at IoU %g; %s" % (
        len(sides), data_split(options, options.train_split), census.percent(before),
        census.percent(after), model.anchor_maps()[1], "; ".join(
            "%s %s" % (field, list_words(config[field])) for field in config
            if config[field] != model.config.get(field)))
    health.result(ANCHORS, "ok", detail)
    return fitted, "anchors fitted to the %s (--fit-anchors)" % detail


def list_words(values):
    """``[0.1, 0.2] [0.3]`` for a list of lists, ``[2, 4, 8]`` for a list."""
    if values and isinstance(values[0], list):
        return " ".join(map(list_words, values))
    return "[%s]" % ", ".join("%g" % value for value in values)


def check_resumed_fit(options, model_name):
    """Refuse, in one line, to resume a checkpoint trained with ``--fit-anchors`` without
    it, or the other way round: its heads learnt their offsets from other anchors. (The fit
    is deterministic: on the same training data it gives the checkpoint's anchors again.)"""
    prefix, epoch, run = resumed_run(options, model_name)
    if run is None:
        return
    fitted = bool(run.get("fit_anchors"))
    if fitted != options.fit_anchors:
        raise OptionsError("%s-%04d was trained %s --fit-anchors: resume it %s" % (
            prefix, epoch, "with" if fitted else "without",
            "with --fit-anchors (the same training data gives the same anchors)" if fitted
            else "without --fit-anchors"))


def resumed_run(options, model_name):
    """``(prefix, epoch, run record)`` of the checkpoint the options resume, the record None
    when there is none to read (the resume itself says what is wrong with it)."""
    prefix = resume_prefix(options, model_name)
    epoch = artifact.latest_epoch(prefix) if prefix else None
    if epoch is None:
        return prefix, epoch, None
    try:
        meta = artifact.read_meta(prefix, epoch)
    except artifact.ArtifactError:
        return prefix, epoch, None
    return prefix, epoch, (meta.get("training") or {}).get("run") or {}


def training_loader(options, model, items, num_workers=1, rank=0):
    """The loader of this worker's shard of ``items`` (:func:`training_items`: the photos,
    or with ``tiles`` their windows, a :class:`zoo.data.tiles.TiledDataset`, whose last batch
    of an epoch is filled up rather than dropped: every photo is seen every epoch) through
    ``model``'s augmentation, batches in the order the run's seed gives."""
    transform = train_transform(model.preprocessing(), options.max_expand, options.crop,
                                options.colour_jitter)
    return DetectionLoader(items, options.batch_size, transform, shuffle=True,
                           seed=options.seed, num_workers=options.data_threads,
                           max_objects=max_objects(items), num_shards=num_workers,
                           shard_index=rank, skip_bad=options.skip_bad,
                           max_skipped=options.max_skipped,
                           last_batch=last_batch(options, len(items) // num_workers))


def max_objects(items):
    """The rows of a batch's label: the most boxes an image (or tile) of ``items`` has."""
    return max(1, max(len(r.class_ids) for r in items.records))


def last_batch(options, share):
    """How the loader ends an epoch of ``share`` items (this worker's): it drops a short last
    batch (:data:`DROP_SHARE` of the items at most), else fills it from the epoch's start,
    as on tiles, whose windows vary by epoch: every item is then seen every epoch."""
    if options.tiles or share % options.batch_size > DROP_SHARE * share:
        return "pad"
    return "discard"


def remainder_line(loader):
    """What the end of each epoch leaves out or repeats, in one line; None when the batch
    divides the items."""
    share = len(loader.sample_order(loader.next_epoch))
    rest = share % loader.batch_size
    if not rest:
        return None
    if loader.last_batch == "pad":
        return ("each epoch's last batch: its %d images and %d from the epoch's start, so "
                "that all %d images are seen each epoch at batch %d" % (
                    rest, loader.batch_size - rest, share, loader.batch_size))
    return ("each epoch leaves out its last %d of %d images (the remainder of batch %d, "
            "other ones each epoch: the order is shuffled)" % (rest, share, loader.batch_size))


def training_batch(options, model, items, num_workers=1):
    """``(options, note)``: the options with the run's batch and, for its first line, why
    it is that one (None for a given one). Without ``--batch-size``: the largest batch
    whose estimated memory (:class:`zoo.engine.memory.TrainingMemory`) fits
    :data:`MEMORY_SHARE` of the available memory, at most the :data:`MIN_STEPS` th of this
    worker's share of ``items`` and, on a CPU, what fills a megapixel of input (the
    detection's default, :func:`zoo.inference.runner.default_batch_size`: a larger batch is
    no faster an image there), on GPUs the recipe's batch. A given batch whose estimate
    exceeds :data:`MEMORY_MARGIN` of it is refused in one line, naming the largest that
    fits. On GPUs nothing is estimated (the estimate is of the host's memory)."""
    share = len(items) // num_workers
    on_gpu = bool(gpu_ids(options.ctx))
    _, _, run = resumed_run(options, model.name)
    if options.batch_size is None and (run or {}).get("batch_size"):
        # a resume goes on as the run began: the same batches, whatever memory is free now
        return replace(options, batch_size=run["batch_size"]), "the resumed run's"
    if options.batch_size is not None:
        if not on_gpu and not options.memory_saving:
            check_batch_fits(options, model, items, share)
        return options, None
    most_data = max(1, share // MIN_STEPS)
    most_input = model.arch.recipe_lr[1] if on_gpu else default_batch_size(
        model.preprocessing())
    most = min(most_data, most_input)
    reason = (("a %dth of the %d training images" % (MIN_STEPS, share)
               if share >= MIN_STEPS else "one image a step of the %d training images" % share)
              if most_data < most_input else
              "the recipe's" if on_gpu else "as many as fill a megapixel of input")
    if on_gpu:
        return replace(options, batch_size=most), "%s; --batch-size to choose" % reason
    available = memory.available_memory_mb()
    estimate = memory.TrainingMemory(model, max_objects(items))
    batch, mb = estimate.largest_batch(MEMORY_SHARE * available, most)
    if not batch:
        batch, mb = check_batch_fits(replace(options, batch_size=1), model, items, share,
                                     estimate, available), estimate.mb(1)
        reason = "the smallest, over half the memory available"
    elif batch < most:
        reason = "the most that fit half the memory available"
    return replace(options, batch_size=batch), (
        "%s: about %s of the %s available; --batch-size to choose" % (
            reason, gigabytes(mb), gigabytes(available)))


def check_batch_fits(options, model, items, share, estimate=None, available=None):
    """Refuse, in one line and before anything is bound, a batch whose estimated memory
    exceeds :data:`MEMORY_MARGIN` of the available memory; returns the batch."""
    estimate = estimate or memory.TrainingMemory(model, max_objects(items))
    available = memory.available_memory_mb() if available is None else available
    needed = estimate.mb(options.batch_size)
    if needed <= MEMORY_MARGIN * available:
        return options.batch_size
    fits, _ = estimate.largest_batch(MEMORY_MARGIN * available,
                                     min(options.batch_size - 1, max(1, share)))
    raise OptionsError(
        "batch %d of %s at %s needs about %s to train (estimated), over %d%% of the %s "
        "available: %s" % (
            options.batch_size, model.name, input_size(model.preprocessing()),
            gigabytes(needed), round(100 * MEMORY_MARGIN), gigabytes(available),
            "the largest that fits is %d (--batch-size %d), or --memory-saving" % (fits, fits)
            if fits else "not even batch 1 fits; try --memory-saving or a smaller "
                         "--data-shape"))


def gigabytes(mb):
    return "%.1f GB" % (mb / 1024)


def training_items(options, train_set):
    """What a run trains on: ``train_set``'s photos, or with ``--tiles`` their windows
    (:class:`zoo.data.tiles.TiledDataset`), whose boxes the census and ``--fit-anchors``
    measure at the scale the network gets them."""
    tiles = tiling(options.tiles, options.tile_overlap)
    return train_set if tiles is None else TiledDataset(train_set, tiles, options.empty_tiles)


def tiles_line(loader):
    """What a run on tiles trains each epoch and how it validates, in one line."""
    tiled = loader.dataset
    items = tiled.epoch_items(loader.seed, loader.next_epoch)
    return ("tiles: %d-pixel tiles overlapping %g of the %d photos, each epoch %d windows of "
            "%d photos (their tiles, and the %d whole photos holding a box too large for "
            "a tile): the %d with a box, %d of the %d without (--empty-tiles %g); "
            "validation scores whole photos run whole and in these tiles, as zoo detect "
            "runs the artifact" % (
                tiled.tiles.size, tiled.tiles.overlap, len(tiled.dataset), len(items),
                len(tiled.epoch_photos(items)), tiled.whole_photos(), len(tiled.boxed),
                len(items) - len(tiled.boxed), len(tiled.empty), tiled.empty_tiles))


def initial_params(options, model):
    """``(arg_params, aux_params)`` a fine-tuning run starts from (its summary logged in one
    line), or None: the model's initialiser, or a resume, which restores everything."""
    if not options.init_from or options.resume:
        return None
    args, aux, summary = finetune.init_from(model, options.init_from, options.init_epoch,
                                            seed=options.seed)
    LOG.info("%s", summary.line())
    return args, aux


def data_split(options, split):
    """The :class:`DataSplit` of ``split`` of the dataset the options name."""
    return DataSplit(options.dataset, options.data_root, split, options.skip_bad,
                     options.data_threads, options.annotations, options.image_dir)


def header_line(options, model, images, precision="fp32", note=None, lr_note=None,
                batch_note=None):
    """What a run trains, on what, at which batch (and why: ``batch_note``, from
    :func:`training_batch`) and lr (``lr_note``, from :func:`learning_rate`), in which
    precision (and, for ``--dtype auto``, why: ``note``) and where its artifact goes, in
    one line."""
    names = model.config["class_names"]
    shown = ", ".join(names[:CLASSES_SHOWN]) + (", ..." if len(names) > CLASSES_SHOWN else "")
    return ("training %s: %d images of %s, %d classes (%s), %s parameters, batch %d%s, %s"
            "%d epochs, %s, output %s" % (
                model.name, images, data_split(options, options.train_split), len(names),
                shown, "{:,}".format(model.num_params()), options.batch_size,
                " (%s)" % batch_note if batch_note else "", lr_note + ", " if lr_note else "",
                options.epochs,
                precision_words(precision, note), os.path.join(options.output_dir, model.name)))


def total_batch(options, num_workers=1):
    """Samples per update: the batch of a process (over its devices) times the dist_sync
    workers, whose gradients are averaged into one update (dist_async applies each
    worker's alone)."""
    return options.batch_size * (num_workers if is_synchronous(options.kv_store) else 1)


def learning_rate(options, arch, num_workers=1):
    """``(lr, note)``: the run's lr and, for its first line, where it came from. Given
    (``--lr``), it is kept whatever the batch; else the architecture's recipe lr
    (:attr:`~zoo.architectures.base.Architecture.recipe_lr`) scaled linearly from the
    recipe's total batch to this run's (:func:`total_batch`)."""
    if options.lr is not None:
        return options.lr, "lr %g (as given, not scaled)" % options.lr
    base_lr, base_batch = arch.recipe_lr
    batch = total_batch(options, num_workers)
    lr = base_lr * batch / base_batch
    if batch == base_batch:
        return lr, "lr %g (the %s recipe's, at batch %d)" % (lr, arch.name, base_batch)
    return lr, ("lr %g (the %s recipe's %g at batch %d, scaled linearly to batch %d; --lr "
                "keeps one)" % (lr, arch.name, base_lr, base_batch, batch))


def warm_up(options, model, steps_per_epoch):
    """``(options, note)``: the options with the run's ``warmup_epochs`` and, for its first
    line, the default one's words (None for none). Given (``--warmup-epochs``) or with a
    given ``--lr``, it is kept (none by default); a resumed run keeps its own; else the
    warm-up of ``model``'s architecture
    (:attr:`~zoo.architectures.base.Architecture.recipe_warmup`), counted in updates as the
    recipes count it (whatever the data set), at most :data:`WARMUP_SHARE` of the run's
    ``steps_per_epoch x epochs`` updates."""
    if options.warmup_epochs is not None:
        return options, None
    _, _, run = resumed_run(options, model.name)
    if (run or {}).get("warmup_epochs") is not None:
        # a resume goes on as the run began, whatever its epochs now
        return replace(options, warmup_epochs=run["warmup_epochs"]), None
    arch = model.arch
    total = steps_per_epoch * options.epochs
    updates = 0 if options.lr is not None else min(arch.recipe_warmup,
                                                   int(WARMUP_SHARE * total))
    if not updates:
        return replace(options, warmup_epochs=0.0), None
    return replace(options, warmup_epochs=updates / steps_per_epoch), (
        "warmed up from lr/10 over the first %d of its %d updates (the %s recipe's %d, at "
        "most half the run; --warmup-epochs to choose)" % (
            updates, total, arch.name, arch.recipe_warmup))


def precision_words(precision, note=None):
    """``bf16`` or ``fp32``, with why ``--dtype auto`` chose it."""
    return precision + (" (%s)" % note if note else "")


def eval_command(options, prefix):
    """The ``zoo eval`` command line that scores the artifact at ``prefix`` on the run's
    validation split (its training split if it had none), found by the flags the run found
    its data by: a COCO split named by both its file and its folder reads no root, so the
    command carries none (a default one would name a folder the run never read)."""
    root = (options.data_root if needs_root(options.dataset, options.annotations,
                                             options.image_dir) else None)
    flags = ["--checkpoint", prefix,
             "--dataset", "voc" if options.dataset == "embedded" else options.dataset,
             "--split", options.val_split or options.train_split]
    for flag, value in (("--data-root", root), ("--annotations", options.annotations),
                        ("--image-dir", options.image_dir)):
        flags += [flag, value] if value else []
    return "zoo eval " + " ".join(shlex.quote(flag) for flag in flags)


def open_val_set(options):
    """The validation split with every image decoded once: a bad one stops the run now, in
    one line, rather than after the first epoch (with ``skip_bad`` it is dropped)."""
    return open_split(options, options.val_split, verify=True)


def check_split_paths(options):
    """Refuse one COCO annotation file for both splits: validation would score the
    training images."""
    if (options.annotations and "{split}" not in options.annotations and options.val_split
            and options.val_split != options.train_split):
        raise OptionsError("--annotations %s names one file for both --train-split %s and "
                           "--val-split %s: put {split} in it, or pass --val-split ''"
                           % (options.annotations, options.train_split, options.val_split))


def check_batch_size(options, samples, num_workers):
    """Refuse a given batch larger than this worker's share of the data: there would be no
    full batch to train on (a default one never is)."""
    share = samples // num_workers
    if options.batch_size is not None and options.batch_size > share:
        raise OptionsError("batch_size %d is larger than the %d training images of %s:%s/%s%s:"
                           " no full batch to train on; lower --batch-size" % (
                               options.batch_size, share, options.dataset, options.data_root,
                               options.train_split,
                               " per worker (%d workers)" % num_workers if num_workers > 1
                               else ""))


def resolved(options, lr, precision):
    """The options as the Trainer takes them (a :class:`TrainOptions` is its trainer's and
    optimizer's options both): the run's ``lr`` (:func:`learning_rate`) and ``precision``,
    the resolved ``dtype`` (fp32 or bf16)."""
    return replace(options, lr=lr, dtype=precision)


def check_options(options):
    """Refuse options the trainer or the optimizer would (the dtype, the freeze patterns,
    the lr schedule, ...), and tiles :class:`zoo.data.tiles.Tiling` would, before the
    run touches anything."""
    # Any positive lr checks the schedule: the run's own depends on the model (learning_rate).
    # Any batch too: the run's own depends on the model and the machine (training_batch).
    run = replace(resolved(options, options.lr or 1.0,
                           resolve_dtype(options.dtype, options.ctx)[0]),
                  batch_size=options.batch_size or 1)
    run.check_trainer()
    run.check_optimizer()
    tiling(options.tiles, options.tile_overlap)


def run_record(options):
    """What a checkpoint records of the run besides the trainer's and optimizer's options:
    the data and the job's own settings (how a run is resumed or overwritten is not)."""
    return {k: v for k, v in asdict(options).items() if k not in ("resume", "overwrite")}


def resume_prefix(options, model_name):
    if not options.resume:
        return None
    if options.resume == "auto":
        return os.path.join(options.output_dir, model_name)
    return options.resume


def train(options):
    """Run the training; returns its :class:`TrainResult`."""
    # Refused before the output folder or a cluster is touched.
    check_options(options)
    kvstore, worker_log = None, None
    if is_distributed(options.kv_store):
        kvstore = create_dist_kvstore(options.kv_store, options.connect_timeout)
        if kvstore.rank != 0:
            worker_log = log_to_worker_file(options.output_dir, kvstore.rank)
    # Rank 0 alone writes the folder: another worker of this run never contends for it.
    writer = kvstore is None or kvstore.rank == 0
    with (runlock.hold(runlock.train_lock_path(options.output_dir),
                       "output folder %s" % options.output_dir)
          if writer else contextlib.nullcontext()):
        return _train(options, kvstore, worker_log)


def _train(options, kvstore, worker_log):
    trainer = make_trainer(options, kvstore)
    prefix = os.path.join(options.output_dir, trainer.model.name)
    try:
        rows = trainer.fit(resume_prefix(options, trainer.model.name))
    except TrainingInterrupted as err:
        raise TrainingInterrupted(err.signum, "%s; %s" % (err, last_checkpoint_note(prefix))) \
            from None
    # Rank 0 writes the artifact; the best epoch may precede a resume.
    best = artifact.best_epoch(prefix) if trainer.rank == 0 else None
    overfit = [hook.summary for hook in trainer.hooks if isinstance(hook, OverfitCheck)]
    return TrainResult(prefix=prefix, rows=rows, best_epoch=best, rank=trainer.rank,
                       worker_log=worker_log, overfit=overfit[0] if overfit else None)


def log_to_worker_file(output_dir, rank):
    """Send this worker's log to ``<output_dir>/worker-<rank>.log``; only warnings and errors
    still reach the console. Returns the file's path."""
    os.makedirs(output_dir, exist_ok=True)
    path = os.path.join(output_dir, "worker-%d.log" % rank)
    root = logging.getLogger()
    for handler in root.handlers:
        handler.setLevel(logging.WARNING)
    handler = logging.FileHandler(path)
    handler.setFormatter(logging.Formatter(LOG_FORMAT))
    root.addHandler(handler)
    return path
