"""``zoo train``: train a registered detector (or one from a YAML config) on a dataset.

Example, the embedded shapes dataset:
    zoo train --network ssd_mobilenetv2 --dataset embedded --data-root output/shapes \\
        --data-shape 256 --epochs 10 --output-dir output/train
Fine-tune another artifact (trained, or from `zoo import-gluoncv`) on a dataset's classes:
    zoo train --init-from models/ssd_voc --dataset voc --data-root my_data --lr 0.001
On two workers of a parameter-server cluster:
    zoo launch -n 2 -- zoo train ... --kv-store dist_sync
"""
import os

from zoo.choices import OPTIMIZERS, OVERFIT_FRACTION, TRAIN_DTYPES
from zoo.distributed.cluster import DEFAULT_CONNECT_TIMEOUT
from zoo.jobs.train_options import KV_STORES, TrainOptions
from zoo.cli import report
from zoo.cli.common import (add_batch_flag, add_ctx_flag, add_dataset_flags, add_hidden_alias,
                            add_input_size_flags, add_progress_flag, comma_list, float_in,
                            fraction, increasing, network, nonnegative_float, nonnegative_int,
                            options_from, positive_float, positive_int)

__all__ = ["add_arguments", "add_data_arguments", "run"]


def add_data_arguments(p, options):
    """The flags saying what data a run sees and how (``zoo train``'s and ``zoo
    check-data``'s): the dataset and its splits, the input size, the batch, the
    augmentation, the seed, what ``--skip-bad`` may drop; their defaults the fields of
    ``options`` (:class:`TrainOptions`, or check-data's copy of its data fields)."""
    add_dataset_flags(p, options, {"--train-split": "split to train on",
                                   "--val-split": "split to validate on ('' for none)"})
    add_hidden_alias(p, "--train-set", "train_split")
    add_hidden_alias(p, "--val-set", "val_split")
    p.add_argument("--max-skipped", type=fraction, default=options.max_skipped,
                   metavar="SHARE",
                   help="with --skip-bad: stop when more than this share of a split's images "
                        "would be dropped, rather than train on the few left")
    add_input_size_flags(p, options)
    add_batch_flag(p, options.batch_size)
    p.add_argument("--seed", type=nonnegative_int, default=options.seed,
                   help="seed of the initialisation, the data order and the augmentation")
    p.add_argument("--max-expand", type=float_in(1.0), default=options.max_expand,
                   help="largest zoom-out of the expansion augmentation (1 disables it)")
    p.add_argument("--no-crop", dest="crop", action="store_false",
                   help="no IoU-constrained random crop in the augmentation")


def add_arguments(p):
    p.add_argument("--network", type=network, default=TrainOptions.network,
                   help="registered model name or YAML config path (default with --init-from: "
                        "the config its artifact stores)")
    add_data_arguments(p, TrainOptions)
    add_optimizer_arguments(p)
    add_ctx_flag(p, TrainOptions.ctx)
    p.add_argument("--kv-store", default=TrainOptions.kv_store, choices=KV_STORES,
                   help="dist_* runs under `zoo launch`, each worker on its rank's shard of "
                        "the data")
    p.add_argument("--connect-timeout", type=positive_float, default=TrainOptions.connect_timeout,
                   help="seconds a dist worker waits for its cluster before it fails "
                        "(default: $ZOO_CONNECT_TIMEOUT, else %g)" % DEFAULT_CONNECT_TIMEOUT)
    add_start_arguments(p)
    add_run_arguments(p)
    add_progress_flag(p)


def add_optimizer_arguments(p):
    """How long, and with which update rule and schedule."""
    p.add_argument("--epochs", type=positive_int, default=TrainOptions.epochs,
                   help="epochs to train in all")
    p.add_argument("--lr", type=positive_float, default=TrainOptions.lr,
                   help="learning rate of a step, kept whatever the batch (default: the "
                        "architecture's recipe lr scaled linearly to the total batch, "
                        "--batch-size x dist_sync workers; the run's first line says which); "
                        "gradients are averaged over devices and dist_sync workers")
    p.add_argument("--lr-steps", type=increasing(comma_list(nonnegative_float)),
                   default=TrainOptions.lr_steps,
                   help="comma-separated epochs at which the lr drops (none by default)")
    p.add_argument("--lr-factor", type=positive_float, default=TrainOptions.lr_factor,
                   help="lr multiplier at each step")
    p.add_argument("--warmup-epochs", type=nonnegative_float, default=TrainOptions.warmup_epochs,
                   help="linear warm-up length")
    p.add_argument("--optimizer", default=TrainOptions.optimizer, choices=OPTIMIZERS,
                   help="update rule")
    p.add_argument("--momentum", type=float_in(0.0, 1.0, high_open=True),
                   default=TrainOptions.momentum, help="momentum of sgd and nag")
    p.add_argument("--wd", type=nonnegative_float, default=TrainOptions.wd, help="weight decay")
    p.add_argument("--clip-gradient", type=positive_float, default=TrainOptions.clip_gradient,
                   help="clip each gradient element to +-this (default: no clipping)")


def add_start_arguments(p):
    """What a run starts from and keeps fixed. The freeze patterns are checked once, by
    :class:`zoo.engine.trainer.TrainerOptions`, before the run touches anything."""
    p.add_argument("--pretrained-backbone", action="store_true",
                   help="start the backbone from GluonCV's ImageNet weights in $MXNET_HOME/models")
    p.add_argument("--freeze", default=TrainOptions.freeze, metavar="REGEX",
                   help="regular expression of parameter names to keep fixed, e.g. "
                        "'^conv1_|^stage1_'")
    p.add_argument("--freeze-bn", nargs="?", const=".", metavar="REGEX",
                   default=TrainOptions.freeze_bn,
                   help="frozen batch norm (GluonCV's and Detectron2's FrozenBN) for the "
                        "BatchNorm layers whose name matches REGEX (all without one): they "
                        "normalise with their running statistics in training too, and "
                        "statistics, scale and shift all stay fixed; for fine-tuning from "
                        "an artifact whose statistics fit the data")
    p.add_argument("--resume", default=TrainOptions.resume, metavar="PREFIX|auto",
                   help="artifact prefix to continue from, or 'auto' for this run's own")
    p.add_argument("--init-from", default=TrainOptions.init_from, metavar="PREFIX",
                   help="start a new run from this artifact (trained, or imported from "
                        "GluonCV): arrays of equal name and shape copied, the class layers "
                        "taken class by class where class names are shared, the rest afresh; "
                        "same architecture and backbone")
    p.add_argument("--init-epoch", type=nonnegative_int, default=TrainOptions.init_epoch,
                   metavar="N",
                   help="epoch of --init-from (default: its best validated, else newest)")


def add_run_arguments(p):
    """Where the run writes, how often it validates, and what it watches."""
    p.add_argument("--overwrite", action="store_true",
                   help="start afresh in an --output-dir that holds another run's checkpoints")
    p.add_argument("--keep-last", type=positive_int, default=TrainOptions.keep_last,
                   help="checkpoints kept besides the best validated one")
    p.add_argument("--output-dir", default=TrainOptions.output_dir,
                   help="folder of the artifact (PREFIX = <output-dir>/<model name>) and the "
                        "CSV log")
    p.add_argument("--val-interval", type=positive_int, default=TrainOptions.val_interval,
                   help="validate every N epochs")
    p.add_argument("--memory-saving", action="store_true",
                   help="keep few activations and recompute the others in backward, "
                        "segment by segment (zoo.engine.memory); same losses and gradients. "
                        "ssd_resnet101, batch 8 at 512: about half the peak memory for about "
                        "1.2x the step time (zoo benchmark-memory)")
    p.add_argument("--dtype", choices=TRAIN_DTYPES, default=TrainOptions.dtype,
                   help="precision of the layers: bf16 runs convolutions, batch norm, "
                        "activations, pooling and fully connected layers in bfloat16 "
                        "(parameters, optimizer, anchors, targets and losses stay fp32; "
                        "checkpoints are fp32), on CPUs with avx512_bf16 or amx_bf16; auto "
                        "picks bf16 there and fp32 elsewhere (default: %(default)s)")
    p.add_argument("--no-health", dest="health", action="store_false",
                   help="turn the training-health checks off (see the README's \"When "
                        "training goes wrong\"); the run then prints no health warning")
    p.add_argument("--reference", default=TrainOptions.reference, metavar="RUN",
                   help="compare each epoch's loss and validation mAP with those of another "
                        "run (its CSV log as zoo train writes it, its artifact prefix or "
                        "folder) and warn when this one falls behind by more than a band")
    p.add_argument("--overfit-batch", type=positive_int, default=TrainOptions.overfit_batch,
                   metavar="STEPS",
                   help="sanity mode: train up to STEPS steps on one fixed batch (the first "
                        "--batch-size images of the training split, no augmentation, no weight "
                        "decay, no lr schedule, no checkpoint) and pass once the loss is below "
                        "%g%%%% of its start, else fail naming the loss it reached"
                        % (100 * OVERFIT_FRACTION))


def run(args):
    # Imported here: the training stack loads MXNet, which the parser (--help) does without.
    from zoo.jobs.train import eval_command, train
    if not args.network and not args.init_from:
        # a missing flag, as argparse reports one (its groups cannot say "one or both")
        return report("train", "one of the arguments --network --init-from is required", 2)
    options = options_from(TrainOptions, args)
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
