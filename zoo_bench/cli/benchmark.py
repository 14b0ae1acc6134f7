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
import argparse

from zoo_bench.options import COMPARISONS, DTYPES, BenchmarkOptions
from zoo.config.registry import list_models
from zoo.cli.common import (KINDS, add_input_size_flags, comma_list, nonnegative_int, options_from,
                            positive_int)

__all__ = ["add_arguments", "dtype", "run"]


def dtype(value):
    if value not in DTYPES:
        raise argparse.ArgumentTypeError("one of %s, got %r" % (", ".join(DTYPES), value))
    return value


def add_arguments(p):
    source = p.add_mutually_exclusive_group(required=True)
    source.add_argument("--network", choices=list_models(), metavar="NAME",
                        help="registered model, built with fresh parameters: %s"
                             % ", ".join(list_models()))
    source.add_argument("--checkpoint", metavar="PREFIX",
                        help="artifact prefix (fp32, int8 or bf16), run with its own graph, "
                             "parameters and data shape; or a deployed .onnx or .xml file, "
                             "timed alone on ONNX Runtime or OpenVINO (no MXNet needed)")
    p.add_argument("--epoch", type=nonnegative_int, default=BenchmarkOptions.epoch,
                   help="epoch of --checkpoint (default: the best validated one, else the "
                        "newest)")
    add_input_size_flags(p, BenchmarkOptions, max_size=True, of_network=True)
    p.add_argument("--dtypes", type=comma_list(dtype), default=",".join(BenchmarkOptions.dtypes),
                   help="comma-separated, of --network: %s (int8: naive calibration on the "
                        "benchmark input, for speed only; bf16: the graph converted by MXNet's "
                        "AMP, timed converted-then-fused and fused-then-converted, on CPUs "
                        "with avx512_bf16 or amx_bf16)" % ", ".join(DTYPES))
    p.add_argument("--batch-sizes", type=comma_list(positive_int),
                   default=",".join(map(str, BenchmarkOptions.batch_sizes)),
                   help="comma-separated batch sizes")
    p.add_argument("--runs", type=positive_int, default=BenchmarkOptions.runs,
                   help="timed runs (the median is reported)")
    p.add_argument("--warmup", type=nonnegative_int, default=BenchmarkOptions.warmup,
                   help="untimed runs first")
    p.add_argument("--compare", choices=COMPARISONS, default=BenchmarkOptions.compare,
                   help="gluoncv: also time the closest GluonCV models (randomly "
                        "initialised, on the same input); onnxruntime, openvino: also time "
                        "our fp32 graph exported to ONNX on that runtime (OpenVINO in fp32); "
                        "all: MXNet, ONNX Runtime fp32 and OpenVINO fp32 and int8 (each "
                        "deployed one in its own process) beside GluonCV's fp32 and int8 "
                        "(quantize_net), naming the fastest of ours")
    p.add_argument("--num-classes", type=positive_int, default=BenchmarkOptions.num_classes,
                   help="classes of --network (VOC's 20, as GluonCV's models)")
    p.add_argument("--plot", default=BenchmarkOptions.plot, metavar="PNG",
                   help="plot images/s against batch size into this file")
    p.add_argument("--profile", action="store_true",
                   help="also time each part of our graphs (backbone, FPN, RPN head, "
                        "proposals, ROIAlign, box head, NMS) at the first batch size")
    # the help keeps a description's line breaks (and makes none): they are written here
    accuracy = p.add_argument_group(
        "accuracy", "with --checkpoint and --compare all: score each deployment on a dataset\n"
                    "split (as zoo eval does) and name what the fastest gives up; the OpenVINO\n"
                    "int8 model is then calibrated on --calib-split's first images")
    accuracy.add_argument("--data-root", default=BenchmarkOptions.data_root,
                          help="dataset folder to score on")
    accuracy.add_argument("--dataset", choices=KINDS, default=BenchmarkOptions.dataset,
                          help="its format")
    accuracy.add_argument("--split", default=BenchmarkOptions.split, help="split to score on")
    accuracy.add_argument("--annotations", default=BenchmarkOptions.annotations, metavar="FILE",
                          help="coco: the annotation file ('{split}': the split)")
    accuracy.add_argument("--image-dir", default=BenchmarkOptions.image_dir, metavar="DIR",
                          help="coco: the image folder ('{split}': the split)")
    accuracy.add_argument("--calib-split", default=BenchmarkOptions.calib_split,
                          help="split the int8 model is calibrated on (not the scored one)")
    accuracy.add_argument("--calib-images", type=positive_int,
                          default=BenchmarkOptions.calib_images,
                          help="first images of --calib-split calibrated on")


def run(args):
    options = options_from(BenchmarkOptions, args)
    if options.deployed:
        from zoo_bench.deployed import benchmark_file
        benchmark_file(options)
    else:
        from zoo_bench.inference import benchmark  # MXNet's
        benchmark(options)
    return 0
