"""What ``zoo train`` runs, as options: :class:`TrainOptions`, in a module that loads no MXNet,
so that the command line's parser (``zoo train --help``) and ``zoo check-data``'s, which
shares its data flags, build without it. The job itself is :func:`zoo.jobs.train.train`,
whose module hands these options on.

Each option is declared once, as a field with its flag (:func:`zoo.flags.flag`): the training
loop's in :mod:`zoo.engine.options` (:class:`TrainOptions` is a
:class:`~zoo.engine.options.TrainerOptions` and an
:class:`~zoo.engine.options.OptimizerOptions`, and the Trainer takes it as both), the job's
own here. The flags that several commands share (``--dataset``, ``--data-shape``,
``--batch-size``, ...) are declared in :mod:`zoo.flags`, each field taking its maker; a test
(``tests/zoo/test_flags.py``) holds each field and its flag together."""
import os
from dataclasses import dataclass
from typing import Optional

from zoo.choices import OVERFIT_FRACTION
from zoo.data.tiles import DEFAULT_EMPTY_TILES, MIN_KEPT
from zoo.distributed.cluster import DEFAULT_CONNECT_TIMEOUT
from zoo.engine.options import KV_STORES, OptimizerOptions, TrainerOptions
from zoo.flags import (annotations_flag, data_root_flag, data_shape_flag, data_threads_flag,
                       dataset_flag, flag, float_in, fraction, image_dir_flag, nonnegative_float,
                       nonnegative_int, options_from, positive_float, positive_int,
                       progress_flag, skip_bad_flag, tile_overlap_flag, tiles_flag)
from zoo.flags import network as network_name  # "network" is the field's name

__all__ = ["KV_STORES", "TrainOptions"]


@dataclass(frozen=True)
class TrainOptions(TrainerOptions, OptimizerOptions):
    """A training run: the loop's options (:class:`~zoo.engine.options.TrainerOptions`:
    ``epochs``, ``ctx``, ``kv_store``, ``freeze``, ``memory_saving``,
    ``seed``, ``freeze_bn``, ``dtype``, which may be ``auto`` here, and ``batch_size``,
    which may be None here: chosen for the machine and the data), the optimizer's
    (:class:`~zoo.engine.options.OptimizerOptions`: ``optimizer``, ``lr``, ``momentum``,
    ``wd``, ``clip_gradient``, ``lr_steps``, ``lr_factor``, ``warmup_epochs``), and the data
    and the job's own below. Checked when the run starts (:func:`zoo.jobs.train.train`), once
    ``lr``, ``warmup_epochs`` and ``dtype`` are resolved."""
    network: Optional[str] = flag(       # None: init_from's stored config
        None, "registered model name or YAML config path (default with --init-from: the "
              "config its artifact stores)", type=network_name)
    dataset: str = dataset_flag("embedded")
    data_root: str = data_root_flag(os.path.join("output", "shapes"))
    train_split: str = flag("train", "split to train on")
    val_split: str = flag("val", "split to validate on ('' for none)")
    data_shape: Optional[int] = data_shape_flag()  # None: the config's
    batch_size: Optional[int] = flag(    # None: zoo.jobs.train.training_batch's
        None, "images per step (default: the most whose estimated memory fits half of what "
              "the machine has available, at most a megapixel of input on a CPU (the recipe's "
              "batch on GPUs) and a quarter of the training images; the first line says "
              "which and why); a batch estimated not to fit is refused", type=positive_int)
    lr: Optional[float] = flag(          # None: the recipe's (zoo.jobs.train.learning_rate)
        None, "learning rate of a step, kept whatever the batch (default: the architecture's "
              "recipe lr scaled linearly to the total batch, --batch-size x dist_sync "
              "workers; the run's first line says which); gradients are averaged over devices "
              "and dist_sync workers", type=positive_float)
    warmup_epochs: Optional[float] = flag(  # None: the recipe's (zoo.jobs.train.warm_up)
        None, "epochs of linear warm-up from lr / 10 (default: with the recipe lr, the "
              "architecture's recipe warm-up, counted in updates, at most half of the run's; "
              "with --lr, none; the run's first line says which)", type=nonnegative_float)
    connect_timeout: Optional[float] = flag(
        None, "seconds a dist worker waits for its cluster before it fails (default: "
              "$ZOO_CONNECT_TIMEOUT, else %g)" % DEFAULT_CONNECT_TIMEOUT, type=positive_float)
    pretrained_backbone: bool = flag(
        False, "start the backbone from GluonCV's ImageNet weights in $MXNET_HOME/models")
    resume: str = flag("", "artifact prefix to continue from, or 'auto' for this run's own",
                       metavar="PREFIX|auto")
    init_from: str = flag(               # zoo.engine.finetune
        "", "start a new run from this artifact (trained, or imported from GluonCV): arrays of "
            "equal name and shape copied, the class layers taken class by class where class "
            "names are shared, the rest afresh; same architecture and backbone",
        metavar="PREFIX")
    init_epoch: Optional[int] = flag(
        None, "epoch of --init-from (default: its best validated, else newest)",
        type=nonnegative_int, metavar="N")
    overwrite: bool = flag(
        False, "start afresh in an --output-dir that holds another run's checkpoints")
    keep_last: int = flag(3, "checkpoints kept besides the best validated one",
                          type=positive_int)
    output_dir: str = flag(os.path.join("output", "train"),
                           "folder of the artifact (PREFIX = <output-dir>/<model name>) and "
                           "the CSV log")
    data_threads: Optional[int] = data_threads_flag()  # None: all cores
    val_interval: int = flag(1, "validate every N epochs", type=positive_int)
    max_expand: float = flag(4.0, "largest zoom-out of the expansion augmentation (1 disables "
                                  "it)", type=float_in(1.0))
    crop: bool = flag(True, "no IoU-constrained random crop in the augmentation")
    colour_jitter: bool = flag(True, "no colour jitter (brightness, contrast, saturation, hue) "
                                     "in the augmentation")
    tiles: Optional[int] = tiles_flag(training=True)  # None: whole photos (zoo.data.tiles)
    tile_overlap: Optional[float] = tile_overlap_flag()  # None: the tiles' default
    empty_tiles: float = flag(
        DEFAULT_EMPTY_TILES, "with --tiles: tiles without a box trained each epoch per tile "
                             "with one, drawn afresh each epoch (at least one of each photo "
                             "without a box, so every epoch sees every photo); a box cut by a "
                             "tile's edge is kept, clipped, when at least %g of it is inside"
                             % MIN_KEPT, type=float_in(0.0), metavar="RATIO")
    fit_anchors: bool = flag(            # zoo.schema.anchors
        False, "fit the anchors' sizes (and ratios, for boxes far from square) to the "
               "training boxes at the input size (the best possible recall before and after "
               "is printed, the artifact keeps them)")
    skip_bad: bool = skip_bad_flag()
    max_skipped: float = flag(
        0.2, "with --skip-bad: stop when more than this share of a split's images would be "
             "dropped, rather than train on the few left", type=fraction, metavar="SHARE")
    annotations: Optional[str] = annotations_flag()
    image_dir: Optional[str] = image_dir_flag()
    progress: bool = progress_flag()
    health: bool = flag(
        True, "turn the training-health checks off (see the README's \"When training goes "
              "wrong\"); the run then prints no health warning")
    reference: str = flag(               # zoo.engine.health.reference
        "", "compare each epoch's loss and validation mAP with those of another run (its CSV "
            "log as zoo train writes it, its artifact prefix or folder) and warn when this one "
            "falls behind by more than a band", metavar="RUN")
    overfit_batch: Optional[int] = flag(  # zoo.engine.health.overfit
        None, "sanity mode: train up to STEPS steps on one fixed batch (the first --batch-size "
              "images of the training split, with --tiles the first windows of its tiles, "
              "no augmentation, no weight decay, no lr schedule, no checkpoint) and pass once "
              "the loss is below %g%%%% of its start, else fail naming the loss it reached"
              % (100 * OVERFIT_FRACTION),
        type=positive_int, metavar="STEPS")

    def __post_init__(self):
        # Not the loop's checks: dtype may be auto and lr None until the run resolves them.
        object.__setattr__(self, "lr_steps", tuple(self.lr_steps))

    @classmethod
    def from_flags(cls, args):
        """The options of ``zoo train``'s parsed flags (every field has one)."""
        return options_from(cls, args)
