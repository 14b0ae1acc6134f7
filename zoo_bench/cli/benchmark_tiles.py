"""``zoo benchmark-tiles``: COCO AP and VOC07 mAP of a shapes detector on generated large
photos of small shapes, whole and in tiles (``zoo detect --tiles``), one table (see
:mod:`zoo_bench.tiles`). The photos are generated into --work-dir once.

Examples:
    zoo benchmark-tiles --checkpoint output/train/ssd_mobilenetv2_stride8
    zoo benchmark-tiles --checkpoint output/deploy/ssd_mobilenetv2_stride8.onnx \\
        --tiles 800,400 --tile-overlap 0.25 --num-images 12
"""
from zoo_bench.options import TilesBenchmarkOptions
from zoo.cli.common import (add_batch_flag, add_progress_flag, comma_list, float_in,
                            options_from, positive_int)
from zoo.inference.tiles import DEFAULT_OVERLAP

__all__ = ["add_arguments", "run"]

DEFAULTS = TilesBenchmarkOptions()


def add_arguments(p):
    p.add_argument("--checkpoint", default=DEFAULTS.checkpoint,
                   help="a detector of the shapes classes (`make demo` trains one): artifact "
                        "prefix, .onnx or .xml")
    p.add_argument("--work-dir", default=DEFAULTS.work_dir,
                   help="where the photos are generated (kept for the next run)")
    p.add_argument("--num-images", type=positive_int, default=DEFAULTS.num_images,
                   help="photos to generate")
    p.add_argument("--width", type=positive_int, default=DEFAULTS.width, help="photo width")
    p.add_argument("--height", type=positive_int, default=DEFAULTS.height,
                   help="photo height")
    p.add_argument("--object-sides", type=comma_list(float_in(0.0, 1.0, low_open=True)),
                   default=",".join("%g" % side for side in DEFAULTS.object_sides),
                   metavar="LEAST,MOST",
                   help="a shape's side, as a share of the photo's longer side")
    p.add_argument("--objects", type=positive_int, default=DEFAULTS.objects,
                   help="shapes asked per photo (fewer where they do not fit)")
    p.add_argument("--tiles", type=comma_list(positive_int),
                   default=",".join(map(str, DEFAULTS.tiles)), metavar="SIZE,...",
                   help="tile sizes to score, each beside the whole-photo pass")
    p.add_argument("--tile-overlap", type=float_in(0.0, 1.0, high_open=True),
                   default=DEFAULTS.tile_overlap, metavar="SHARE",
                   help="share of a tile's side its neighbours overlap (default %g)"
                        % DEFAULT_OVERLAP)
    add_batch_flag(p, DEFAULTS.batch_size)
    p.add_argument("--seed", type=int, default=DEFAULTS.seed, help="of the generated photos")
    add_progress_flag(p)


def run(args):
    # Imported here: scoring loads pycocotools, and an artifact MXNet; --help needs neither.
    from zoo_bench.tiles import benchmark_tiles, report
    progress = args.progress
    options = options_from(TilesBenchmarkOptions, args)
    print(report(options, benchmark_tiles(options, progress)))
    return 0
