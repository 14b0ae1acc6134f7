"""``zoo benchmark-train``: samples/s of the zoo's whole training step (its Trainer, data
included), with ``--compare gluoncv`` beside GluonCV's own training recipe for the same
network, alternating round for round, with milliseconds per step of each part (see
:mod:`zoo_bench.train`).

Our side runs in fp32 and, where the CPU has bfloat16 units, in bf16 (``--dtypes``), each
beside GluonCV's; one more round of each is timed operator by operator: the share of the
step in bf16 layers, fp32 layers, casts, targets, losses and the optimizer, and the layers'
GFLOP/s against the machine's matmul peak of their precision.

Examples:
    zoo benchmark-train --network ssd_resnet50_v1_gluoncv_voc --data-shape 512 --batch-size 4
    zoo benchmark-train --network faster_rcnn_fpn_resnet50_gluoncv_coco --data-shape 512 \\
        --max-size 512 --batch-size 1 --freeze '^(conv1_|stage1_)|_bn_(gamma|beta)$'
The cost of the training-health checks (on against off, alternating):
    zoo benchmark-train --network ssd_mobilenetv2_stride8 --data-shape 192 --batch-size 8 \\
        --steps 20 --rounds 7 --compare health

"""
import argparse

from zoo_bench.options import GLUONCV_RECIPES, TrainBenchmarkOptions
from zoo.choices import TRAIN_DTYPES
from zoo.config.registry import list_models
from zoo.cli.common import (add_batch_flag, add_input_size_flags, comma_list, nonnegative_int,
                            options_from, positive_float, positive_int)

__all__ = ["add_arguments", "run"]


def add_arguments(p):
    p.add_argument("--network", default=TrainBenchmarkOptions.network, choices=list_models(),
                   metavar="NAME", help="registered model; --compare gluoncv knows %s"
                   % ", ".join(GLUONCV_RECIPES))
    add_input_size_flags(p, TrainBenchmarkOptions, max_size=True)
    add_batch_flag(p, TrainBenchmarkOptions.batch_size)
    p.add_argument("--steps", type=positive_int, default=TrainBenchmarkOptions.steps,
                   help="steps per round: one epoch of each side")
    p.add_argument("--rounds", type=positive_int, default=TrainBenchmarkOptions.rounds,
                   help="timed rounds per side")
    p.add_argument("--warmup-rounds", type=nonnegative_int,
                   default=TrainBenchmarkOptions.warmup_rounds,
                   help="untimed rounds per side first")
    p.add_argument("--data-threads", type=positive_int, default=TrainBenchmarkOptions.data_threads,
                   help="our loader's threads and GluonCV's worker processes")
    p.add_argument("--image-size", type=positive_int, default=TrainBenchmarkOptions.image_size,
                   help="side of the embedded JPEGs, generated into --data-root")
    p.add_argument("--num-images", type=positive_int, default=TrainBenchmarkOptions.num_images,
                   help="distinct images generated; rounds cycle over them")
    p.add_argument("--data-root", default=TrainBenchmarkOptions.data_root,
                   help="folder of the generated images (default: output/shapes_<image-size>)")
    p.add_argument("--freeze", default=TrainBenchmarkOptions.freeze,
                   help="regular expression of our parameters kept fixed (GluonCV's recipe "
                        "trains its network's collect_train_params())")
    p.add_argument("--compare", choices=("gluoncv", "health", "none"),
                   default=TrainBenchmarkOptions.compare,
                   help="'health': ours with the training-health checks off and on, "
                        "alternating (their cost); 'none': time ours only")
    p.add_argument("--dtypes", type=comma_list(train_dtype),
                   default=",".join(TrainBenchmarkOptions.dtypes),
                   help="comma-separated precisions of our side, each run in turn beside "
                        "GluonCV's (zoo train --dtype): %s; auto is bf16 where the CPU has "
                        "it, else fp32 (default: %%(default)s)" % ", ".join(TRAIN_DTYPES))
    p.add_argument("--peak-probes", type=nonnegative_int,
                   default=TrainBenchmarkOptions.peak_probes,
                   help="runs of each matmul peak probe (fp32, bf16), the best kept; 0: no "
                        "ratio to the peaks (default: %(default)s)")
    p.add_argument("--peak-seconds", type=positive_float,
                   default=TrainBenchmarkOptions.peak_seconds,
                   help="duration of each peak probe (default: %(default)s)")


def train_dtype(value):
    if value not in TRAIN_DTYPES:
        raise argparse.ArgumentTypeError("one of %s, got %r" % (", ".join(TRAIN_DTYPES), value))
    return value


def run(args):
    options = options_from(TrainBenchmarkOptions, args,
                           compare=None if args.compare == "none" else args.compare)
    # Imported here: the benchmarks load MXNet, which the parser (--help) does without.
    if options.compare == "health":
        from zoo_bench.health import benchmark_health
        benchmark_health(options)
    else:
        from zoo_bench.train import benchmark_train
        benchmark_train(options)
    return 0
