"""``zoo benchmark-parity``: the zoo's training beside GluonCV's on one light network from the
same initial parameters (GluonCV's initialised network imported into the zoo, proved equal
before the first step), at several seeds, every epoch scored by ``zoo eval`` on the same
held-out images; one verdict line, ``parity_<arch>.json`` (every epoch) and
``parity_<arch>.png`` (held-out mAP by epoch, a band per side) in --work-dir (see
:mod:`zoo_bench.parity`). Exits 1 when the zoo's mean falls more than --tolerance points
below GluonCV's.

Examples:
    zoo benchmark-parity --architecture ssd
    zoo benchmark-parity --seeds 0 --epochs 3 --tolerance 3
    zoo benchmark-parity --architecture faster_rcnn     # after make demo: its trunk is the start
    zoo benchmark-parity --architecture faster_rcnn --seeds 0 --epochs 1 --num-train 200
    zoo benchmark-parity --gluoncv-input zoo     # both sides on the zoo's batches
"""
from zoo.flags import add_flags
from zoo_bench.options import ParityBenchmarkOptions

__all__ = ["add_arguments", "run"]


def add_arguments(p):
    add_flags(p, ParityBenchmarkOptions, "architecture", "seeds", "epochs", "batch_size",
              "data_shape", "lr", "momentum", "wd", "lr_steps", "lr_factor", "warmup_epochs",
              "augmentation", "gluoncv_input", "preset", "num_train", "num_val", "data_seed",
              "data_workers", "backbone_from", "anchors", "tolerance", "zoo_config", "order",
              "run_sides", "work_dir", "progress")


def run(args):
    # Imported here: training loads MXNet and GluonCV; --help needs neither.
    from zoo_bench.parity import benchmark_parity, report, verdict, write_outputs
    options = ParityBenchmarkOptions.from_flags(args)
    result = benchmark_parity(options)
    json_path, png_path = write_outputs(result, options.work_dir)
    print(report(result))
    print("every epoch: %s; curves: %s" % (json_path, png_path))
    return 0 if verdict(result)["passed"] else 1
