"""Quantize an fp32 artifact to int8 (MKL-DNN), calibrated on the first batches of a dataset
split; the result is a format-2 artifact whose graph is the int8 one."""
import os
import time
from dataclasses import dataclass
from typing import Optional, Tuple

from zoo import artifact, runlock
from zoo.errors import DataError
from zoo.inference.quantization import calibration_iter, int8_layers, quantize as quantize_graph
from zoo.jobs.datasets import DataSplit, checkpoint_name, open_for_artifact

__all__ = ["QuantizeOptions", "quantize"]


@dataclass(frozen=True)
class QuantizeOptions:
    checkpoint: str
    data_root: Optional[str] = None      # None: only for a COCO split named by annotations
                                         # and image_dir
    epoch: Optional[int] = None          # None: the best validated epoch, else the newest
    dataset: str = "voc"
    split: str = "train"                 # calibrate on images you do not evaluate on
    calib_mode: str = "naive"            # naive: observed min/max; entropy: KL thresholds
    calib_batches: int = 5
    batch_size: int = 8
    exclude: Tuple[str, ...] = ()        # layers kept in fp32 besides the defaults
    output: Optional[str] = None         # prefix; None: <checkpoint>-int8
    data_threads: Optional[int] = None
    skip_bad: bool = False
    annotations: Optional[str] = None    # coco: the annotation file ({split}: the split)
    image_dir: Optional[str] = None      # coco: the image folder ({split}: the split)
    # None: the dataset's classes are the artifact's; else pairs (dataset class, artifact
    # class), see jobs.datasets.class_lookup (calibration only needs matching images)
    class_map: Optional[Tuple[Tuple[str, str], ...]] = None


@dataclass(frozen=True)
class QuantizeResult:
    prefix: str
    epoch: int
    precision: dict                      # {"dtype": "int8", "calibration": {...}}


def quantize(options):
    """Calibrate, quantize and save the int8 artifact, holding its prefix's lock."""
    output = options.output or options.checkpoint + "-int8"
    with runlock.hold(runlock.lock_path(output), "output prefix %s" % output):
        return _quantize(options, output)


def _quantize(options, output):
    source = artifact.load(options.checkpoint, options.epoch)
    if source.is_int8:
        raise artifact.ArtifactError("%s-%04d: already int8; quantize an fp32 artifact"
                                     % (options.checkpoint, source.epoch))
    check_output(output, options.checkpoint, source.epoch)
    split = DataSplit(options.dataset, options.data_root, options.split, options.skip_bad,
                      options.data_threads, options.annotations, options.image_dir)
    dataset, _ = open_for_artifact(split, source.class_names,
                                   checkpoint_name(options.checkpoint, source.epoch),
                                   options.class_map)
    if len(dataset) < options.batch_size:
        raise DataError("%s: %d images, fewer than one calibration batch of %d"
                        % (split, len(dataset), options.batch_size))
    calib_data = calibration_iter(source.model, dataset, options.batch_size,
                                  options.calib_batches, options.data_threads,
                                  preprocessing=source.preprocessing)
    start = time.time()
    # The unfused graph: MKL-DNN's quantization pass does its own fusion.
    symbol, arg_params, aux_params = quantize_graph(
        source.model.symbol(), source.arg_params, source.aux_params, calib_data,
        options.calib_mode, options.exclude)
    precision = {"dtype": "int8", "calibration": {
        "mode": options.calib_mode,
        "images": min(len(dataset) // options.batch_size, options.calib_batches)
        * options.batch_size,
        "data": str(split), "excluded": list(options.exclude),
        "int8_layers": len(int8_layers(symbol)),
        "source": "%s-%04d" % (options.checkpoint, source.epoch),
        "seconds": round(time.time() - start, 1)}}
    os.makedirs(os.path.dirname(os.path.abspath(output)), exist_ok=True)
    artifact.save(output, source.epoch, source.model, arg_params, aux_params, symbol=symbol,
                  precision=precision, preprocessing=source.preprocessing)
    return QuantizeResult(prefix=output, epoch=source.epoch, precision=precision)


def check_output(output, checkpoint, epoch):
    """Refuse an output prefix whose files quantizing would replace: the fp32 artifact's own,
    one holding fp32 epochs or another artifact's int8 ones, or this epoch already. Only
    the int8 epochs of the same checkpoint may be added to."""
    if _same_prefix(output, checkpoint):
        raise artifact.ArtifactError("%s: the output is the fp32 artifact's own prefix; "
                                     "quantizing there would replace its graph and files: "
                                     "choose another --output" % output)
    for existing in artifact.epochs(output):
        meta = artifact.read_meta(output, existing)
        source = meta["precision"].get("calibration", {}).get("source", "")
        if meta["precision"]["dtype"] != "int8" or not _same_prefix(source[:-5], checkpoint):
            raise artifact.ArtifactError(
                "%s: holds epoch %d of another artifact (%s); quantization adds only to the "
                "int8 epochs of %s: choose another --output" % (
                    output, existing, source or meta["precision"]["dtype"], checkpoint))
        if existing == epoch:
            raise artifact.ArtifactError("%s: already holds int8 epoch %d; remove it or choose "
                                         "another --output" % (output, epoch))


def _same_prefix(a, b):
    return os.path.realpath(a) == os.path.realpath(b)
