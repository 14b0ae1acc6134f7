"""``zoo benchmark-tiles``: COCO AP and VOC07 mAP of a shapes detector on generated large
photos of small shapes, whole and in tiles (``zoo detect --tiles``), one table (see
:mod:`zoo_bench.tiles`). The photos are generated into --work-dir once.

Examples:
    zoo benchmark-tiles --checkpoint output/train/ssd_mobilenetv2_stride8
    zoo benchmark-tiles --checkpoint output/deploy/ssd_mobilenetv2_stride8.onnx \\
        --tiles 800,400 --tile-overlap 0.25 --num-images 12
"""
from zoo_bench.options import TilesBenchmarkOptions
from zoo.flags import add_flags

__all__ = ["add_arguments", "run"]


def add_arguments(p):
    add_flags(p, TilesBenchmarkOptions, "checkpoint", "work_dir", "num_images", "width",
              "height", "object_sides", "objects", "tiles", "tile_overlap", "batch_size", "seed",
              "progress")


def run(args):
    # Imported here: scoring loads pycocotools, and an artifact MXNet; --help needs neither.
    from zoo_bench.tiles import benchmark_tiles, report
    options = TilesBenchmarkOptions.from_flags(args)
    print(report(options, benchmark_tiles(options, options.progress)))
    return 0
