#!/usr/bin/env python
"""Train a registered detector (or one from a YAML config) on a dataset.

Example, the embedded shapes dataset:
    python tools/train.py --network ssd_mobilenetv2 --dataset embedded \\
        --data-root output/shapes --data-shape 256 --epochs 10 --output-dir output/train
On two workers of a parameter-server cluster (see tools/launch.py):
    python tools/launch.py -n 2 -- python tools/train.py ... --kv-store dist_sync
"""
import argparse
import logging
import os
import sys

import zoo
from zoo.data import DetectionLoader, TrainTransform
from zoo.data.factory import KINDS, open_dataset
from zoo.distributed import ClusterError, create_dist_kvstore, is_distributed
from zoo.errors import ConfigError, DataError, PretrainedNotFound
from zoo.training import Trainer, TrainingDiverged

LOG = logging.getLogger("zoo.train")
LOG_FORMAT = "%(asctime)s %(message)s"


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--network", required=True, help="registered model (%s) or a YAML config "
                   "path" % ", ".join(zoo.list_models()))
    p.add_argument("--dataset", choices=KINDS, default="embedded")
    p.add_argument("--data-root", default=os.path.join("output", "shapes"))
    p.add_argument("--train-set", default="train", help="image set / split to train on")
    p.add_argument("--val-set", default="val", help="split to validate on ('' for none)")
    p.add_argument("--data-shape", type=int, default=None, help="input side (default: config's)")
    p.add_argument("--batch-size", type=int, default=16,
                   help="samples per step of this process, split over its --ctx devices; N "
                        "dist workers take N x this per step")
    p.add_argument("--epochs", type=int, default=10)
    p.add_argument("--lr", type=float, default=0.01,
                   help="base learning rate of a step; gradients are averaged over devices "
                        "and dist_sync workers, so N workers with --batch-size B train like "
                        "one with N x B at the same --lr")
    p.add_argument("--lr-steps", default="", help="comma-separated epochs at which lr drops")
    p.add_argument("--lr-factor", type=float, default=0.1, help="lr multiplier at each step")
    p.add_argument("--warmup-epochs", type=float, default=0.0, help="linear warm-up length")
    p.add_argument("--optimizer", default="sgd", choices=("sgd", "nag", "adam", "rmsprop"))
    p.add_argument("--momentum", type=float, default=0.9)
    p.add_argument("--wd", type=float, default=5e-4, help="weight decay")
    p.add_argument("--clip-gradient", type=float, default=None)
    p.add_argument("--ctx", default="cpu", help="'cpu' or 'gpu0,1,...'")
    p.add_argument("--kv-store", default="local",
                   help="local, device, dist_sync, dist_device_sync or dist_async; dist_* "
                        "runs under tools/launch.py, each worker on its rank's shard of the data")
    p.add_argument("--connect-timeout", type=float, default=None,
                   help="seconds a dist worker waits for its cluster before it fails "
                        "(default: $ZOO_CONNECT_TIMEOUT, else 120)")
    p.add_argument("--pretrained-backbone", action="store_true",
                   help="start the backbone from GluonCV's ImageNet weights in $MXNET_HOME/models")
    p.add_argument("--freeze", default="", help="regular expression of parameter names to "
                   "keep fixed, e.g. '^conv1_|^stage1_'")
    p.add_argument("--resume", default="",
                   help="checkpoint prefix to continue from, or 'auto' for this run's own")
    p.add_argument("--output-dir", default=os.path.join("output", "train"))
    p.add_argument("--data-threads", type=int, default=None,
                   help="threads decoding and augmenting (default: all cores)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--val-interval", type=int, default=1, help="validate every N epochs")
    p.add_argument("--max-expand", type=float, default=4.0,
                   help="largest zoom-out of the expansion augmentation (1 disables it)")
    p.add_argument("--no-crop", dest="crop", action="store_false",
                   help="no IoU-constrained random crop in the augmentation")
    p.add_argument("--skip-bad", action="store_true",
                   help="skip bad annotations/images with a warning instead of stopping")
    p.add_argument("--memory-saving", action="store_true",
                   help="keep few activations and recompute the others in backward, "
                        "segment by segment (zoo.memory); same losses and gradients. "
                        "ssd_resnet101, batch 8 at 512: about half the peak memory for about "
                        "1.2x the step time (tools/benchmark_memory.py)")
    p.add_argument("--no-progress", dest="progress", action="store_false",
                   help="no progress bar (log lines only)")
    args = p.parse_args(argv)
    args.lr_steps = [float(x) for x in args.lr_steps.split(",") if x.strip()]
    return args


def build_model(args, class_names):
    overrides = {"num_classes": len(class_names), "class_names": list(class_names)}
    if args.data_shape:
        overrides["data_shape"] = args.data_shape
    if os.path.exists(args.network):
        config = zoo.load_config(args.network)
    else:
        config = zoo.get_config(args.network)
    if config.get("arch") == "faster_rcnn":
        # The training pipeline feeds square images, so the long side equals the short one.
        overrides["max_size"] = overrides.get("data_shape", config.get("data_shape", 600))
    model = zoo.build_model(config, pretrained_backbone=args.pretrained_backbone, **overrides)
    return model, overrides


def make_trainer(args, kvstore=None):
    """Everything ``main`` runs, built from the parsed flags; with a dist ``kvstore`` this
    worker trains on its rank's shard and only rank 0 validates."""
    rank, num_workers = (kvstore.rank, kvstore.num_workers) if kvstore is not None else (0, 1)
    train_set = open_dataset(args.dataset, args.data_root, args.train_set, args.skip_bad)
    val_set = (open_dataset(args.dataset, args.data_root, args.val_set, args.skip_bad)
               if args.val_set and rank == 0 else None)
    model, overrides = build_model(args, train_set.class_names)
    config = model.config
    transform = TrainTransform(config["data_shape"], config["mean_pixels"], config["std_pixels"],
                               max_expand=args.max_expand,
                               **({} if args.crop else {"min_ious": (None,)}))
    max_objects = max(1, max(len(r.class_ids) for r in train_set.records))
    loader = DetectionLoader(train_set, args.batch_size, transform, shuffle=True, seed=args.seed,
                             num_workers=args.data_threads, max_objects=max_objects,
                             num_shards=num_workers, shard_index=rank)
    meta = {"network": args.network, "overrides": overrides, "seed": args.seed,
            "args": {k: v for k, v in vars(args).items() if k != "resume"}}
    if kvstore is not None:
        LOG.info("%s worker rank %d of %d: %d of %d samples, %d steps per epoch, %d samples "
                 "per step in all", kvstore.type, rank, num_workers,
                 len(train_set) // num_workers, len(train_set), len(loader),
                 args.batch_size * num_workers)
    return Trainer(model, loader, args, val_dataset=val_set, meta=meta, kvstore=kvstore)


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


def main(argv=None):
    args = parse_args(argv)
    logging.basicConfig(level=logging.INFO, format=LOG_FORMAT)
    kvstore, log_path = None, None
    try:
        if is_distributed(args.kv_store):
            kvstore = create_dist_kvstore(args.kv_store, args.connect_timeout)
            if kvstore.rank != 0:
                log_path = log_to_worker_file(args.output_dir, kvstore.rank)
        trainer = make_trainer(args, kvstore)
        trainer.fit()
    except (ConfigError, DataError, PretrainedNotFound, TrainingDiverged, FileNotFoundError,
            ClusterError) as err:
        print("train.py: error: %s" % err, file=sys.stderr)
        return 1
    if log_path:
        print("worker rank %d: log in %s" % (kvstore.rank, os.path.abspath(log_path)))
    else:
        print("checkpoints and log in %s" % os.path.abspath(args.output_dir))
    return 0


if __name__ == "__main__":
    sys.exit(main())
