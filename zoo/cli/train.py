"""``zoo train``: train a registered detector (or one from a YAML config) on a dataset.

Example, the embedded shapes dataset:
    zoo train --network ssd_mobilenetv2 --dataset embedded --data-root output/shapes \\
        --data-shape 256 --epochs 10 --output-dir output/train
Fine-tune another artifact (trained, or from `zoo import-gluoncv`) on a dataset's classes:
    zoo train --init-from models/ssd_voc --dataset voc --data-root my_data --lr 0.001
Small objects in large photos: train on 320-pixel tiles from the detector `make demo`
trained, validated on whole photos as `zoo detect` runs them (in the artifact's tiles):
    zoo train --network ssd_mobilenetv2_stride8 --dataset coco --image-dir birds/photos \\
        --annotations 'birds/{split}.json' --tiles 320 --max-expand 1 --data-shape 192 \\
        --init-from output/train/ssd_mobilenetv2_stride8
On two workers of a parameter-server cluster:
    zoo launch -n 2 -- zoo train ... --kv-store dist_sync
"""
import os

from zoo.jobs.train_options import TrainOptions
from zoo.cli import report
from zoo.cli.common import add_hidden_alias
from zoo.flags import add_flags

__all__ = ["add_arguments", "add_data_arguments", "add_tile_arguments", "run"]


def add_data_arguments(p, options_class):
    """The flags saying what data a run sees and how (``zoo train``'s and ``zoo
    check-data``'s): the dataset and its splits, the input size, the batch, the
    augmentation, the seed, what ``--skip-bad`` may drop; declared on the fields of
    ``options_class`` (:class:`TrainOptions`, or check-data's, which shares these fields)."""
    add_flags(p, options_class, "dataset", "data_root", "train_split")
    add_hidden_alias(p, "--train-set", "train_split")
    add_flags(p, options_class, "val_split")
    add_hidden_alias(p, "--val-set", "val_split")
    add_flags(p, options_class, "annotations", "image_dir", "skip_bad", "data_threads",
              "max_skipped", "data_shape", "batch_size", "seed", "max_expand", "crop")
    add_flags(p, options_class, "fit_anchors")


def add_tile_arguments(p):
    """The flags cutting a run's photos into tiles (``zoo train``'s only)."""
    add_flags(p, TrainOptions, "tiles", "tile_overlap", "empty_tiles")


def add_arguments(p):
    """Every field of :class:`TrainOptions` as a flag, in the order ``--help`` lists them:
    the model, the data, the optimizer, the devices, the start, the run."""
    add_flags(p, TrainOptions, "network")
    add_data_arguments(p, TrainOptions)
    add_flags(p, TrainOptions, "colour_jitter")
    add_tile_arguments(p)
    add_flags(p, TrainOptions, "epochs", "lr", "lr_steps", "lr_factor", "warmup_epochs",
              "optimizer", "momentum", "wd", "clip_gradient", "ctx", "kv_store",
              "connect_timeout")
    # What a run starts from and keeps fixed. The freeze patterns are checked once, by
    # zoo.engine.options.TrainerOptions, before the run touches anything.
    add_flags(p, TrainOptions, "pretrained_backbone", "freeze", "freeze_bn", "resume",
              "init_from", "init_epoch")
    # Where the run writes, how often it validates, and what it watches.
    add_flags(p, TrainOptions, "overwrite", "keep_last", "output_dir", "val_interval",
              "memory_saving", "dtype", "health", "reference", "overfit_batch", "progress")


def run(args):
    # Imported here: the training stack loads MXNet, which the parser (--help) does without.
    from zoo.jobs.train import eval_command, train
    if not args.network and not args.init_from:
        # a missing flag, as argparse reports one (its groups cannot say "one or both")
        return report("train", "one of the arguments --network --init-from is required", 2)
    options = TrainOptions.from_flags(args)
    result = train(options)
    if result.overfit:
        print(result.overfit)
    elif result.worker_log:
        print("worker rank %d: log in %s" % (result.rank, os.path.abspath(result.worker_log)))
    else:
        print("checkpoints and log in %s" % os.path.abspath(args.output_dir))
        best = (" (best validated epoch %d)" % result.best_epoch
                if result.best_epoch is not None else "")
        print("artifact %s%s; evaluate it with: %s"
              % (result.prefix, best, eval_command(options, result.prefix)))
    return 0
