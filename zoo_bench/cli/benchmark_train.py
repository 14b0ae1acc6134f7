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
from zoo_bench.options import TrainBenchmarkOptions
from zoo.flags import add_flags

__all__ = ["add_arguments", "run"]


def add_arguments(p):
    add_flags(p, TrainBenchmarkOptions, "network", "data_shape", "max_size", "batch_size",
              "steps", "rounds", "warmup_rounds", "data_threads", "image_size", "num_images",
              "data_root", "freeze", "compare", "dtypes", "peak_probes", "peak_seconds")


def run(args):
    options = TrainBenchmarkOptions.from_flags(
        args, compare=None if args.compare == "none" else args.compare)
    # Imported here: the benchmarks load MXNet, which the parser (--help) does without.
    if options.compare == "health":
        from zoo_bench.health import benchmark_health
        benchmark_health(options)
    else:
        from zoo_bench.train import benchmark_train
        benchmark_train(options)
    return 0
