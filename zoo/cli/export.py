"""``zoo export``: write a deployable detector, from a trained artifact or from a registered
model or YAML config (initialised parameters): a format-2 artifact (e.g. the portable
unfused graph for GPUs), or an ONNX file that runs on ONNX Runtime without MXNet.

Examples:
    zoo export --checkpoint output/train/ssd_mobilenetv2 --no-fuse --output out/gpu/ssd
    zoo export --network ssd_resnet50 --data-shape 512 --output out/ssd_resnet50
    zoo export --checkpoint output/train/ssd_mobilenetv2_stride8 --format onnx \\
        --output out/ssd --verify output/shapes/JPEGImages/000000.jpg
"""
from zoo.jobs.export import FORMATS, ExportOptions, export
from zoo.onnx import GRAPH_PREPROCESSING
from zoo.cli.common import network, nonnegative_int, options_from, positive_int

__all__ = ["add_arguments", "run"]


def add_arguments(p):
    source = p.add_mutually_exclusive_group(required=True)
    source.add_argument("--checkpoint", metavar="PREFIX", help="artifact prefix")
    source.add_argument("--network", type=network,
                        help="registered model name or YAML config path")
    p.add_argument("--epoch", type=nonnegative_int, default=None,
                   help="epoch of --checkpoint (default: the best validated one, else the "
                        "newest)")
    p.add_argument("--data-shape", type=positive_int, default=None,
                   help="input side of --network (default: the config's)")
    p.add_argument("--output", required=True, metavar="PREFIX",
                   help="prefix to write (PREFIX.onnx for --format onnx)")
    p.add_argument("--format", choices=FORMATS, default="mxnet",
                   help="an MXNet artifact, or one ONNX file holding the whole detector")
    p.add_argument("--no-fuse", dest="fused", action="store_false",
                   help="mxnet: write the portable graph instead of MKL-DNN's fused one")
    p.add_argument("--graph-preprocessing", choices=GRAPH_PREPROCESSING, default="none",
                   help="onnx: 'normalize' takes RGB pixels 0-255 (B, H, W, 3) and normalises "
                        "them in the graph; 'none' takes the normalised (B, 3, H, W) input")
    p.add_argument("--verify", nargs="+", default=(), metavar="IMAGE",
                   help="onnx: image files on which ONNX Runtime must detect what MXNet does "
                        "(top 100: same classes in order, scores within 1e-4, boxes within "
                        "1e-3 of the image side)")


def run(args):
    result = export(options_from(ExportOptions, args))
    print("epoch %d written to %s" % (result.epoch, result.path))
    if result.parity is not None:
        print("ONNX Runtime against MXNet: %s" % result.parity)
    return 0
