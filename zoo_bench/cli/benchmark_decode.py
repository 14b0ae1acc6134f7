"""``zoo benchmark-decode``: decode time and peak memory of large JPEGs for detection, the
whole photo beside libjpeg's DCT scaling to the size the network needs, each in a fresh
process (see :mod:`zoo_bench.decode`). Without ``--images`` it generates ``--num-images``
photos of ``--image-size`` (half turned by EXIF) into ``--output-dir``.

Example:
    zoo benchmark-decode --num-images 16 --data-shape 600 --max-size 1000
"""
from zoo_bench.options import DecodeBenchmarkOptions
from zoo.flags import add_flags

__all__ = ["add_arguments", "run"]


def add_arguments(p):
    add_flags(p, DecodeBenchmarkOptions, "images", "num_images", "image_size", "output_dir",
              "data_shape", "max_size", "seed")


def run(args):
    from zoo_bench.decode import benchmark_decode
    benchmark_decode(DecodeBenchmarkOptions.from_flags(args, images=tuple(args.images)))
    return 0
