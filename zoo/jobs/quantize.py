"""Quantize an fp32 artifact for inference on MKL-DNN: to int8, calibrated on the first
batches of a dataset split, or to bf16, converted without data where the CPU has native
bfloat16. The result is a format-2 artifact whose graph is the int8 or bf16 one."""
import dataclasses
import os
import time
from dataclasses import dataclass
from typing import Optional, Tuple

from zoo import runlock
from zoo.choices import CALIB_MODES
from zoo.errors import DataError, OptionsError
from zoo.flags import (annotations_flag, batch_size_flag, checkpoint_flag, class_map_flag,
                       comma_list, data_root_flag, data_threads_flag, dataset_flag, epoch_flag,
                       flag, image_dir_flag, options_from, positive_int, skip_bad_flag)
from zoo.jobs.datasets import DataSplit, checkpoint_name, open_for_artifact

__all__ = ["DTYPES", "QuantizeOptions", "quantize"]

DTYPES = ("int8", "bf16")
BF16_ORDER = "convert, fuse"
"""How a bf16 graph is made (:func:`zoo.engine.precision.bf16_inference_graph`,
``fuse_first`` False): AMP converts the plain graph, MKL-DNN's pass fuses the result. The
order ``zoo benchmark --dtypes bf16`` times faster of the two on SSD-512 ResNet-50."""


@dataclass(frozen=True)
class QuantizeOptions:
    """What ``zoo quantize`` converts, and the data int8 calibrates on: each field declares
    its flag (:mod:`zoo.flags`)."""
    checkpoint: str = checkpoint_flag("fp32 artifact prefix")
    # None: only for a COCO split named by annotations and image_dir
    data_root: Optional[str] = data_root_flag(None, named=True)
    epoch: Optional[int] = epoch_flag()  # None: the best validated epoch, else the newest
    dataset: str = dataset_flag("voc")
    split: str = flag("train", "split whose first images calibrate (not the one you evaluate "
                               "on)")
    calib_mode: str = flag("naive", "naive: observed min/max; entropy: KL-optimal thresholds",
                           choices=CALIB_MODES)
    calib_batches: int = flag(5, "batches of the split that calibrate", type=positive_int)
    batch_size: int = batch_size_flag(8)
    exclude: Tuple[str, ...] = flag((), "comma-separated layer names to keep in fp32 besides "
                                        "the defaults", type=comma_list(str))
    output: Optional[str] = flag(None, "output prefix (default: <checkpoint>-int8, or -bf16)")
    data_threads: Optional[int] = data_threads_flag()
    skip_bad: bool = skip_bad_flag()
    annotations: Optional[str] = annotations_flag()
    image_dir: Optional[str] = image_dir_flag()
    # None: the dataset's classes are the artifact's; else pairs (dataset class, artifact
    # class), see jobs.datasets.class_lookup (calibration only needs matching images)
    class_map: Optional[Tuple[Tuple[str, str], ...]] = class_map_flag()
    dtype: str = flag("int8", "int8: calibrated on a dataset split (the flags below); bf16: "
                              "converted, no data and no calibration flags (a CPU with "
                              "avx512_bf16 or amx_bf16)", choices=DTYPES)

    @classmethod
    def from_flags(cls, args, **values):
        """The options of ``zoo quantize``'s parsed flags, those of ``values`` given."""
        return options_from(cls, args, **values)

    def __post_init__(self):
        if self.dtype not in DTYPES:
            raise OptionsError("--dtype %r: one of %s" % (self.dtype, ", ".join(DTYPES)))
        if self.dtype == "bf16":
            _check_bf16(self)


CALIBRATION_FIELDS = ("data_root", "dataset", "split", "calib_mode", "calib_batches",
                      "batch_size", "exclude", "data_threads", "skip_bad", "annotations",
                      "image_dir", "class_map")
"""The options only int8's calibration reads."""


def _check_bf16(options):
    """Refuse calibration settings given with bf16 (a conversion reads no images: they would
    be silently ignored), and bf16 where the CPU would emulate it."""
    from zoo.predictor import bf16_unavailable  # its module loads MXNet: bf16 only
    defaults = {f.name: f.default for f in dataclasses.fields(options)}
    given = [name for name in CALIBRATION_FIELDS if getattr(options, name) != defaults[name]]
    if given:
        raise OptionsError("%s: only int8 calibrates on images; bf16 converts the graph "
                           "without data: give no calibration flag with --dtype bf16"
                           % " and ".join("--" + name.replace("_", "-") for name in given))
    reason = bf16_unavailable()
    if reason:
        raise OptionsError("--dtype bf16: %s; deploy the fp32 artifact, or quantize it with "
                           "--dtype int8" % reason)


@dataclass(frozen=True)
class QuantizeResult:
    prefix: str
    epoch: int
    precision: dict                      # {"dtype": "int8", "calibration": {...}} or
                                         # {"dtype": "bf16", "source": ..., ...}


def quantize(options):
    """Quantize (calibrate, or convert) and save the int8 or bf16 artifact, holding its
    prefix's lock."""
    output = options.output or "%s-%s" % (options.checkpoint, options.dtype)
    with runlock.hold(runlock.lock_path(output), "output prefix %s" % output):
        return _quantize(options, output)


def _quantize(options, output):
    # Artifacts load MXNet: imported where the job runs, so that the options (and zoo
    # quantize's parser) do without it.
    from zoo import artifact
    source = artifact.load(options.checkpoint, options.epoch)
    refusal = artifact.fp32_only(source.name, source.precision, "quantize")
    if refusal:
        raise artifact.ArtifactError(refusal)
    check_output(output, options.checkpoint, source.epoch, options.dtype)
    make = _converted if options.dtype == "bf16" else _calibrated
    symbol, arg_params, aux_params, precision = make(options, source)
    os.makedirs(os.path.dirname(os.path.abspath(output)), exist_ok=True)
    artifact.save(output, source.epoch, source.model, arg_params, aux_params, symbol=symbol,
                  precision=precision, preprocessing=source.preprocessing,
                  tiles=source.tiles)
    return QuantizeResult(prefix=output, epoch=source.epoch, precision=precision)


def _calibrated(options, source):
    """``(symbol, arg_params, aux_params, precision)`` of the int8 graph, calibrated on the
    first batches of the options' split."""
    from zoo.inference.quantization import (calibration_iter, int8_layers,
                                            quantize as quantize_graph)
    from zoo.predictor import warn_int8_speed
    split = DataSplit(options.dataset, options.data_root, options.split, options.skip_bad,
                      options.data_threads, options.annotations, options.image_dir)
    dataset, _ = open_for_artifact(split, source.class_names,
                                   checkpoint_name(options.checkpoint, source.epoch),
                                   options.class_map)
    if len(dataset) < options.batch_size:
        raise DataError("%s: %d images, fewer than one calibration batch of %d"
                        % (split, len(dataset), options.batch_size))
    warn_int8_speed()
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
        "source": source.name,
        "seconds": round(time.time() - start, 1)}}
    return symbol, arg_params, aux_params, precision


def _converted(options, source):
    """``(symbol, arg_params, aux_params, precision)`` of the bf16 graph: converted, then
    fused, its layers' weights stored in bfloat16 (see :data:`BF16_ORDER`)."""
    from zoo.engine.precision import bf16_inference_graph, bf16_layers  # AMP: bf16 only
    start = time.time()
    shapes = source.model.input_shapes(1)
    symbol, arg_params, aux_params = bf16_inference_graph(
        source.model.symbol(), source.arg_params, source.aux_params, shapes, fuse_first=False)
    precision = {"dtype": "bf16", "source": source.name, "order": BF16_ORDER,
                 "bf16_layers": len(bf16_layers(symbol, shapes)),
                 "seconds": round(time.time() - start, 1)}
    return symbol, arg_params, aux_params, precision


def check_output(output, checkpoint, epoch, dtype="int8"):
    """Refuse an output prefix whose files quantizing would replace: the fp32 artifact's own,
    one holding fp32 epochs or another artifact's or another dtype's, or this epoch already.
    Only the epochs of the same checkpoint in the same dtype may be added to."""
    from zoo import artifact
    if _same_prefix(output, checkpoint):
        raise artifact.ArtifactError("%s: the output is the fp32 artifact's own prefix; "
                                     "quantizing there would replace its graph and files: "
                                     "choose another --output" % output)
    for existing in artifact.epochs(output):
        precision = artifact.read_meta(output, existing)["precision"]
        source = artifact.source_name(precision) or ""
        if precision["dtype"] != dtype or not _same_prefix(source[:-5], checkpoint):
            raise artifact.ArtifactError(
                "%s: holds epoch %d of another artifact (%s); quantization adds only to the "
                "%s epochs of %s: choose another --output" % (
                    output, existing, source or precision["dtype"], dtype, checkpoint))
        if existing == epoch:
            raise artifact.ArtifactError("%s: already holds %s epoch %d; remove it or choose "
                                         "another --output" % (output, dtype, epoch))


def _same_prefix(a, b):
    return os.path.realpath(a) == os.path.realpath(b)
