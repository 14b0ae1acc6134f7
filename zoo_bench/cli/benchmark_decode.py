"""``zoo benchmark-decode``: decode time and peak memory of large JPEGs for detection, the
whole photo beside libjpeg's DCT scaling to the size the network needs, each in a fresh
process (see :mod:`zoo_bench.decode`). Without ``--images`` it generates ``--num-images``
photos of ``--image-size`` (half turned by EXIF) into ``--output-dir``.

Example:
    zoo benchmark-decode --num-images 16 --data-shape 600 --max-size 1000
"""
from zoo_bench.options import DecodeBenchmarkOptions, image_size
from zoo.cli.common import add_input_size_flags, options_from, positive_int

__all__ = ["add_arguments", "run"]


def add_arguments(p):
    p.add_argument("--images", nargs="+", default=list(DecodeBenchmarkOptions.images),
                   metavar="JPEG", help="photos to decode (default: generated ones)")
    p.add_argument("--num-images", type=positive_int,
                   default=DecodeBenchmarkOptions.num_images,
                   help="photos generated without --images, every other one turned by EXIF")
    p.add_argument("--image-size", type=image_size, metavar="WxH",
                   default="%dx%d" % DecodeBenchmarkOptions.image_size,
                   help="size of the generated photos")
    p.add_argument("--output-dir", default=DecodeBenchmarkOptions.output_dir,
                   help="folder the generated photos are kept in")
    add_input_size_flags(p, DecodeBenchmarkOptions, max_size=True)
    p.add_argument("--seed", type=int, default=DecodeBenchmarkOptions.seed,
                   help="seed of the generated photos")


def run(args):
    from zoo_bench.decode import benchmark_decode
    benchmark_decode(options_from(DecodeBenchmarkOptions, args, images=tuple(args.images)))
    return 0
