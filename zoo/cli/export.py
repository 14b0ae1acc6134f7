"""``zoo export``: write a deployable artifact, from a trained artifact (e.g. the portable
unfused graph for GPUs) or from a registered model or YAML config (initialised parameters).

Examples:
    zoo export --checkpoint output/train/ssd_mobilenetv2 --no-fuse --output out/gpu/ssd
    zoo export --network ssd_resnet50 --data-shape 512 --output out/ssd_resnet50
"""
from ..jobs.export import ExportOptions, export
from .common import network, nonnegative_int, options_from, positive_int


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
    p.add_argument("--output", required=True, metavar="PREFIX", help="prefix to write")
    p.add_argument("--no-fuse", dest="fused", action="store_false",
                   help="write the portable graph instead of MKL-DNN's fused one")


def run(args):
    result = export(options_from(ExportOptions, args))
    print("epoch %d written to %s (%s)" % (result.epoch, result.prefix, result.meta_path))
    return 0
