"""``zoo benchmark-small-objects``: the small-objects recipe of docs/training.md end to end
on generated bird photos (:mod:`zoo_bench.small_objects`): ``zoo check-data``, ``zoo
train --tiles --init-from`` (the detector ``make demo`` trains), ``zoo eval`` of the
held-out whole photos and ``zoo detect --crops`` on 4000x3000 photos scored with
pycocotools, beside the same network trained from random weights, with fitted anchors and on
whole photos; one table.

Examples:
    make demo && zoo benchmark-small-objects
    zoo benchmark-small-objects --generate-only --work-dir birds
    zoo benchmark-small-objects --init-from none --epochs 12 --baseline-epochs 0
"""
from zoo.flags import add_flags
from zoo_bench.options import SmallObjectsBenchmarkOptions

__all__ = ["add_arguments", "run"]


def add_arguments(p):
    add_flags(p, SmallObjectsBenchmarkOptions, "work_dir", "train_images", "val_images",
              "test_images", "width", "height", "test_width", "test_height", "network",
              "data_shape", "tiles", "epochs", "baseline_epochs", "batch_size", "lr",
              "init_from", "seed", "generate_only", "progress")


def run(args):
    # Imported here: the generator loads OpenCV and the photos; --help needs neither.
    from zoo_bench.small_objects import benchmark_small_objects, report
    options = SmallObjectsBenchmarkOptions.from_flags(args)
    census, rows = benchmark_small_objects(options, print if options.progress else
                                           (lambda line: None))
    print(report(options, census, rows))
    return 0
