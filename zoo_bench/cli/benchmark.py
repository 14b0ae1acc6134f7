"""``zoo benchmark``: inference speed of a registered model or a saved artifact, fp32 and
int8, optionally beside the closest GluonCV models or its fp32 graph on ONNX Runtime or
OpenVINO, or (``--compare all``) every deployment of ours beside GluonCV's fp32 and int8,
ending with the fastest; and with a profile of where the time goes (see
:mod:`zoo_bench.inference`). A deployed ``.onnx`` or ``.xml`` file is timed alone on its
runtime, without MXNet.

Examples:
    zoo benchmark --network ssd_resnet50 --dtypes fp32,int8 --compare gluoncv
    zoo benchmark --network faster_rcnn_fpn_resnet50 --data-shape 600 --max-size 1000 \\
        --dtypes fp32,int8 --compare gluoncv --profile
    zoo benchmark --checkpoint output/train/ssd_mobilenetv2_stride8-int8
    zoo benchmark --network ssd_resnet50 --dtypes fp32,int8 --compare onnxruntime
    zoo benchmark --network ssd_resnet50 --dtypes fp32,int8 --batch-sizes 1,4 --compare all
    zoo benchmark --network ssd_resnet50 --dtypes fp32,int8 --compare gluoncv \\
        --batch-sizes 1,2,4,8 --plot throughput.png
    zoo benchmark --checkpoint output/train/ssd_mobilenetv2_stride8 --compare all \\
        --batch-sizes 1,4 --data-root output/shapes --split val
    zoo benchmark --checkpoint out/ssd-int8.xml --batch-sizes 1,4
"""
from zoo_bench.options import BenchmarkOptions, dtype
from zoo.flags import add_flags

__all__ = ["add_arguments", "dtype", "run"]


def add_arguments(p):
    add_flags(p.add_mutually_exclusive_group(required=True), BenchmarkOptions, "network",
              "checkpoint")
    add_flags(p, BenchmarkOptions, "epoch", "data_shape", "max_size", "dtypes", "batch_sizes",
              "runs", "warmup", "compare", "num_classes", "plot", "profile")
    # the help keeps a description's line breaks (and makes none): they are written here
    accuracy = p.add_argument_group(
        "accuracy", "with --checkpoint and --compare all: score each deployment on a dataset\n"
                    "split (as zoo eval does) and name what the fastest gives up; the OpenVINO\n"
                    "int8 model is then calibrated on --calib-split's first images")
    add_flags(accuracy, BenchmarkOptions, "data_root", "dataset", "split", "annotations",
              "image_dir", "calib_split", "calib_images")


def run(args):
    options = BenchmarkOptions.from_flags(args)
    if options.deployed:
        from zoo_bench.deployed import benchmark_file
        benchmark_file(options)
    else:
        from zoo_bench.inference import benchmark  # MXNet's
        benchmark(options)
    return 0
