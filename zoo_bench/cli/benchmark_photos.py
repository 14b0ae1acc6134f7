"""``zoo benchmark-photos``: ``zoo detect`` end to end on a folder of large photos (decode,
resize, inference, drawing, crops), each subject in its own processes, beside GluonCV's
``load_test`` and ``net(x)`` on the same photos; then where the zoo's time goes (see
:mod:`zoo_bench.large_photos`). Without ``--images`` it generates ``--num-images`` photos of
``--image-size`` (half turned by EXIF) into ``--output-dir``; without ``--checkpoint`` it
exports ``--network`` with fresh parameters there (kept for the next run), and quantizes it
to int8 calibrated on a few of the photos.

Example:
    zoo benchmark-photos --subjects zoo-fp32,zoo-int8,gluoncv,onnx --runs 3
    zoo benchmark-photos --isa avx2
"""
from zoo_bench.options import PhotosBenchmarkOptions
from zoo.flags import add_flags

__all__ = ["add_arguments", "run"]


def add_arguments(p):
    add_flags(p, PhotosBenchmarkOptions, "images", "num_images", "image_size", "checkpoint",
              "network", "data_shape", "max_size", "subjects", "gluoncv_network", "runs",
              "isa", "profile", "detect_flags", "output_dir", "seed")


def run(args):
    # Imported here: the benchmark loads MXNet, which the parser (--help) does without.
    from zoo_bench.large_photos import benchmark_photos
    benchmark_photos(PhotosBenchmarkOptions.from_flags(args))
    return 0
