"""The main job on the embedded data (``make demo``): generate the shapes dataset, train
ssd_mobilenetv2_stride8 on it from scratch, evaluate on the held-out split, plot the
training curves, draw detections on a held-out image, and export the detector to ONNX,
checked against MXNet on held-out images. About 5 minutes on 2 CPU cores."""
import json
import os
import shlex
import sys
from dataclasses import dataclass

from zoo.data import VOCDataset, embedded
from zoo.flags import flag, nonnegative_int, options_from, positive_int, progress_flag
from zoo.inference.visualize import plot_training_log
from zoo.jobs.demo import DemoOptions, demo
from zoo.jobs.evaluate import EvalOptions, evaluate
from zoo.jobs.export import ExportOptions, export
from zoo.jobs.recipes import SSD
from zoo.runfiles import log_path

__all__ = ["EPOCHS", "NETWORK", "QuickstartOptions", "python_line", "quickstart",
           "train_options", "trained_prefix"]

NETWORK = SSD.train.network
EPOCHS = SSD.train.epochs
ONNX_CHECK_IMAGES = 20
"""Held-out images on which the ONNX export must detect what MXNet does."""


@dataclass(frozen=True)
class QuickstartOptions:
    """What ``zoo quickstart`` (``make demo``) runs: each field declares its flag
    (:mod:`zoo.flags`)."""
    output_dir: str = flag("output", "folder of everything written")
    epochs: int = flag(EPOCHS, "training epochs (its accuracy band holds for the default only)",
                       type=positive_int)
    seed: int = flag(0, "seed of the training run (initialisation, batch order, augmentation)",
                     type=nonnegative_int)
    progress: bool = progress_flag()

    @classmethod
    def from_flags(cls, args, **values):
        """The options of ``zoo quickstart``'s parsed flags, those of ``values`` given."""
        return options_from(cls, args, **values)


@dataclass(frozen=True)
class QuickstartResult:
    train_dir: str
    results_path: str
    curves: str
    picture: str
    voc07_map: float
    coco_ap: float
    python_line: str                     # one shell line using the trained detector (MXNet)
    onnx_path: str                       # the detector exported to ONNX
    onnx_parity: object                  # a zoo.onnx.parity.Parity against MXNet
    onnx_python_line: str                # one shell line using it on ONNX Runtime


def trained_prefix(output_dir=QuickstartOptions.output_dir):
    """The artifact prefix of the detector the job trains under ``output_dir`` (by default
    ``make demo``'s): the prefix the README and the commands' --help examples name."""
    return os.path.join(output_dir, "train", NETWORK)


def train_options(root, train_dir, epochs, progress, seed=0):
    """make demo's training: the ``ssd`` recipe of :mod:`zoo.jobs.recipes`."""
    return SSD.options(root, train_dir, seed, progress, epochs=epochs,
                       lr_steps=(max(epochs - 1, 1),))


def quickstart(options):
    """Run the job; overwrites the previous quickstart run in ``output_dir``."""
    from zoo.jobs.train import train  # the training stack loads MXNet; the options do without
    root = embedded.generate(embedded.default_root(options.output_dir))
    train_dir = os.path.dirname(trained_prefix(options.output_dir))
    trained = train(train_options(root, train_dir, options.epochs, options.progress,
                                  options.seed))
    prefix = trained.prefix
    assert prefix == trained_prefix(options.output_dir), prefix
    results = evaluate(EvalOptions(checkpoint=prefix, data_root=root, split="val",
                                   output=prefix + "-eval-val.json",  # this run's, anew
                                   progress=options.progress))
    curves = plot_training_log(log_path(prefix), prefix + "-log.png")
    held_out = VOCDataset(root, "val")
    image = held_out.image_path(0)
    picture = os.path.join(options.output_dir, "demo.png")
    demo(DemoOptions(checkpoint=prefix, image=image, output=picture))
    checked = tuple(held_out.image_path(i) for i in range(ONNX_CHECK_IMAGES))
    exported = export(ExportOptions(output=os.path.join(options.output_dir, "deploy", NETWORK),
                                    checkpoint=prefix, format="onnx", verify=checked))
    return QuickstartResult(train_dir=train_dir, results_path=results.output, curves=curves,
                            picture=picture, voc07_map=results.voc["voc07"]["mAP"],
                            coco_ap=results.coco["AP"], python_line=python_line(prefix, image),
                            onnx_path=exported.path, onnx_parity=exported.parity,
                            onnx_python_line=python_line(exported.path, image))


def shell_path(path):
    """``path`` relative to the working folder if inside it, else absolute."""
    relative = os.path.relpath(path)
    return os.path.abspath(path) if relative.startswith(os.pardir) else relative


def python_line(path, image):
    """The shell line that opens the trained detector at ``path`` (an artifact prefix or a
    deployed file) with :func:`zoo.open_detector` and prints its detections on ``image``,
    runnable as printed from the working folder."""
    code = "import zoo; print(zoo.open_detector(%s)(%s))" % (
        json.dumps(shell_path(path)), json.dumps(shell_path(image)))
    return "%s -c %s" % (shlex.quote(shell_path(sys.executable)), shlex.quote(code))
