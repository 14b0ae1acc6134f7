"""Write a deployable detector: a format-2 artifact (e.g. an artifact's portable unfused graph
for GPUs, or one epoch on its own), an ONNX file (:mod:`zoo.onnx.export`) or an OpenVINO
model, fp32 or int8 calibrated on a dataset split (:mod:`zoo.jobs.export_openvino`), from a
trained artifact or from a registered model or YAML config with freshly initialised
parameters."""
import dataclasses
import os
from dataclasses import dataclass
from typing import Optional, Tuple

from zoo import runlock
from zoo.errors import OptionsError
from zoo.config.registry import network_config
from zoo.data.factory import KINDS
from zoo.flags import (REQUIRED, annotations_flag, class_map_flag, data_shape_flag,
                       data_threads_flag, epoch_flag, existing_folder, flag, image_dir_flag,
                       max_size_flag, options_from, positive_int, progress_flag)
from zoo.flags import network as network_name  # "network" is the field's name
from zoo.onnx import GRAPH_PREPROCESSING

__all__ = ["ExportOptions", "FORMATS", "SUFFIXES", "export", "output_prefix", "write_onnx"]

FORMATS = ("mxnet", "onnx", "openvino")
SUFFIXES = {"mxnet": "", "onnx": ".onnx", "openvino": ".xml"}
"""The suffix of the file each format writes at ``PREFIX`` (mxnet: an artifact's files,
``PREFIX-NNNN.json`` and the others; openvino: ``PREFIX.bin`` beside the ``.xml``)."""
WRITTEN_SUFFIXES = (".onnx", ".xml", ".bin", ".json", ".params")


@dataclass(frozen=True)
class ExportOptions:
    """What ``zoo export`` writes, from what: each field declares its flag (:mod:`zoo.flags`);
    the int8 ones are OpenVINO's calibration's."""
    output: str = flag(                  # prefix written (output_prefix: a folder is refused)
        REQUIRED, "the file to write, one prefix for every format: PREFIX-NNNN.json and "
                  ".params (mxnet), PREFIX.onnx (onnx), PREFIX.xml and PREFIX.bin (openvino); "
                  "a name ending in the format's own suffix is that file (out/ssd.onnx writes "
                  "out/ssd.onnx). A folder (out/, an existing folder) is refused: name the "
                  "file in it", metavar="PREFIX")
    checkpoint: Optional[str] = flag(None, "artifact prefix", metavar="PREFIX")  # or
    network: Optional[str] = flag(None, "registered model name or YAML config path",
                                  type=network_name)
    epoch: Optional[int] = epoch_flag()  # of checkpoint; None: best, else newest
    # The input size a network is built at, a checkpoint runs at (recorded in the export);
    # None: the config's, the checkpoint's.
    data_shape: Optional[int] = data_shape_flag(max_size=True, of_network=True,
                                                of_checkpoint=True)
    max_size: Optional[int] = max_size_flag(of_network=True, of_checkpoint=True)
    fused: bool = flag(True, "mxnet: write the portable graph instead of MKL-DNN's fused one",
                       name="--no-fuse")
    format: str = flag("mxnet", "an MXNet artifact, one ONNX file holding the whole detector, "
                                "or an OpenVINO model (PREFIX.xml and PREFIX.bin)",
                       choices=FORMATS)
    graph_preprocessing: str = flag(     # zoo.onnx.export
        "none", "onnx: 'normalize' takes RGB pixels 0-255 (B, H, W, 3) and normalises them in "
                "the graph; 'none' takes the normalised (B, 3, H, W) input",
        choices=GRAPH_PREPROCESSING)
    verify: tuple = flag((), "onnx: image files on which ONNX Runtime must detect what MXNet "
                             "does (top 100: same classes in order, scores within 1e-4, boxes "
                             "within 1e-3 of the image side)", nargs="+", metavar="IMAGE")
    int8: bool = flag(False, "openvino: quantize convolutions and fully connected layers to "
                             "int8, calibrated on the first --calib-images of --data-root's "
                             "--split (post-processing stays fp32)")
    dataset: str = flag("voc", "--int8: the calibration images' dataset format", choices=KINDS)
    data_root: Optional[str] = flag(
        None, "--int8: the calibration dataset folder (not needed for --dataset coco with "
              "--annotations and --image-dir)", type=existing_folder)
    split: str = flag("train", "--int8: split to calibrate on (not one you score on)")
    annotations: Optional[str] = annotations_flag("--int8 --dataset coco")
    image_dir: Optional[str] = image_dir_flag("--int8 --dataset coco")
    calib_images: int = flag(32, "--int8: images calibrated on", type=positive_int)
    # 1: calibration holds the input of every quantized layer of a batch at once
    # (faster_rcnn_fpn_resnet50 at 320 on 1600x1200 photos: 1985 MB peak at batch 1, 2308 MB
    # at 2), and its min/max ranges do not depend on how the images are batched (a batch
    # holds images of one canvas, unpadded)
    batch_size: int = flag(1, "--int8: calibration images per batch (each layer's input of a "
                              "whole batch is held at once: a larger batch takes more memory, "
                              "for no other change)", type=positive_int)
    data_threads: Optional[int] = data_threads_flag()
    skip_bad: bool = flag(False, "--int8: skip bad images with a warning instead of stopping")
    class_map: Optional[Tuple[Tuple[str, str], ...]] = class_map_flag()  # as zoo quantize's
    progress: bool = progress_flag()

    @classmethod
    def from_flags(cls, args, **values):
        """The options of ``zoo export``'s parsed flags, those of ``values`` given."""
        return options_from(cls, args, **values)


@dataclass(frozen=True)
class ExportResult:
    prefix: str
    epoch: int
    path: str                            # the metadata file written, or the ONNX file
    parity: Optional[object] = None      # onnx with verify: a zoo.onnx.parity.Parity
    precision: Optional[dict] = None     # openvino: {"dtype": ..., "calibration": {...}}


def export(options):
    """Write the artifact or ONNX file; exactly one of ``checkpoint`` and ``network`` is set.
    With ``verify``, an ONNX export that detects otherwise than MXNet on those images is
    an :class:`~zoo.artifact.ArtifactError` naming the difference; the export stays beside,
    as ``OUTPUT.unverified.onnx``, for inspection. Every input is checked before anything is
    written, and a failure leaves the files already at ``output`` as they were."""
    if (options.checkpoint is None) == (options.network is None):
        raise OptionsError("export takes a checkpoint or a network, exactly one")
    if options.format not in FORMATS:
        raise OptionsError("format: expected one of %s, got %r"
                           % (", ".join(FORMATS), options.format))
    if options.verify and options.format != "onnx":
        raise OptionsError("verify compares an ONNX export with MXNet: it needs format onnx")
    if options.int8 and options.format != "openvino":
        raise OptionsError("int8 is calibrated into an OpenVINO model: it needs format "
                           "openvino (zoo quantize makes an MXNet int8 artifact)")
    for field in ("data_root", "annotations", "image_dir"):
        if getattr(options, field) and not options.int8:
            raise OptionsError("%s %s: only int8 calibrates on a dataset; add int8 or leave "
                               "%s out" % (field, getattr(options, field), field))
    options = dataclasses.replace(options, output=output_prefix(options))
    missing = [image for image in options.verify if not os.path.isfile(image)]
    if missing:
        raise FileNotFoundError("%s: no such image to verify the export on (nothing was "
                                "written)" % missing[0])
    with runlock.hold(runlock.lock_path(options.output), "output prefix %s" % options.output):
        return _export(options)


def output_prefix(options):
    """The prefix ``options.output`` names for ``options.format``: the same for every format,
    ``out/ssd`` writing ``out/ssd.onnx``, ``out/ssd.xml`` (and ``.bin``) or the artifact
    ``out/ssd-NNNN.json``; a name ending in the format's own suffix names that file
    (``out/ssd.onnx`` writes ``out/ssd.onnx``, not ``out/ssd.onnx.onnx``). Refused with an
    :class:`~zoo.errors.OptionsError`: a folder (``out/``, an existing folder, a name that is
    only a suffix such as ``out/.onnx``), and another format's file (``out/ssd.xml`` for
    onnx), which would read as a second suffix."""
    own = SUFFIXES[options.format]
    output = options.output
    prefix = output[:-len(own)] if own and output.endswith(own) else output
    if os.path.basename(prefix) in ("", ".", "..") or os.path.isdir(output):
        raise OptionsError("output %s names a folder, not the file to write: give a name in "
                           "it, e.g. %s" % (output, os.path.join(
                               output if os.path.basename(prefix) else os.path.dirname(prefix),
                               _source_name(options) + own)))
    if prefix.endswith(WRITTEN_SUFFIXES):
        stem = os.path.splitext(prefix)[0]
        raise OptionsError("output %s ends in %s, which --format %s does not write: give %s "
                           "(writing %s)" % (output, os.path.splitext(prefix)[1],
                                             options.format, stem, _written(stem, options.format)))
    return prefix


def _source_name(options):
    """A file name for the export: the artifact's, or the network's (a config's stem)."""
    source = options.checkpoint or options.network
    name = os.path.basename(os.path.normpath(source))
    stem, extension = os.path.splitext(name)
    # a file's extension (.yaml, .params), not a dotted model name's (ssd_mobilenet1.0_...)
    return (stem if extension[1:].isalpha() else name) or "model"


def _written(prefix, format):
    if format == "mxnet":
        return "%s-NNNN.json and .params" % prefix
    if format == "openvino":
        return "%s.xml and %s.bin" % (prefix, prefix)
    return prefix + SUFFIXES[format]


def _export(options):
    # Artifacts and models load MXNet: imported where the export runs, so that the options
    # (and zoo export's parser) do without it.
    from zoo import artifact
    if options.checkpoint is not None and options.format == "mxnet" and \
            os.path.realpath(options.output) == os.path.realpath(options.checkpoint):
        raise artifact.ArtifactError("%s: the output is the artifact it exports; writing there "
                                     "would replace its files: choose another --output"
                                     % options.output)
    os.makedirs(os.path.dirname(os.path.abspath(options.output)), exist_ok=True)
    source = _source(options)
    if options.format == "onnx":
        return _export_onnx(source, options)
    if options.format == "openvino":
        from zoo.jobs.export_openvino import export_openvino
        path, precision = export_openvino(source, options, write_onnx)
        return ExportResult(options.output, source.epoch, path, precision=precision)
    if options.network is not None:
        artifact.export(source.model, options.output, fused=options.fused)
        return ExportResult(options.output, 0, artifact.epoch_files(options.output, 0).meta)
    refusal = artifact.fp32_only(source.name, source.precision, "export --no-fuse")
    derived = refusal is not None
    if derived and not options.fused:  # it has no portable unfused form
        raise artifact.ArtifactError(refusal)
    # An int8 or bf16 graph is deployed as it is; an fp32 one is rebuilt fused or portable.
    symbol = source.symbol if derived else (None if options.fused else source.model.symbol())
    meta_path = artifact.save(options.output, source.epoch, source.model, source.arg_params,
                              source.aux_params, symbol=symbol, precision=source.precision,
                              preprocessing=source.preprocessing if sized(options) else None,
                              tiles=source.tiles)
    return ExportResult(options.output, source.epoch, meta_path)


def _source(options):
    """The loaded artifact (its preprocessing at the input size chosen, which every format
    records, a size the model cannot take refused), or a :class:`_Fresh` model with
    initialised parameters, built at the size chosen."""
    from zoo import artifact
    from zoo.model import build_model
    from zoo.schema.preprocessing import with_input_size
    if options.checkpoint is not None:
        loaded = artifact.load(options.checkpoint, options.epoch)
        if not sized(options):
            return loaded
        return dataclasses.replace(loaded, meta=dict(loaded.meta, preprocessing=with_input_size(
            loaded.preprocessing, options.data_shape, options.max_size)))
    overrides = {name: getattr(options, name) for name in ("data_shape", "max_size")
                 if getattr(options, name)}
    return _Fresh(build_model(network_config(options.network), **overrides))


def sized(options):
    """Whether the options choose an input size."""
    return bool(options.data_shape or options.max_size)


@dataclass(frozen=True)
class _Fresh:
    """A registered model or config as an export source: epoch 0, initialised parameters."""
    model: object
    epoch: int = 0

    def detector(self):
        from zoo.inference.detector import Detector
        return Detector.from_model(self.model)


def write_onnx(source, path, graph_preprocessing):
    """Export ``source`` (an artifact or :class:`_Fresh`) to the ONNX file ``path``."""
    from zoo.onnx.export import export_artifact, export_model
    if isinstance(source, _Fresh):
        export_model(source.model, *source.model.init_params(), path,
                     graph_preprocessing=graph_preprocessing)
    else:
        export_artifact(source, path, graph_preprocessing=graph_preprocessing)
    return path


def _export_onnx(source, options):
    """Written to ``OUTPUT.onnx`` directly, or, with ``verify``, beside it first and moved
    there once ONNX Runtime agrees with MXNet (a good ``.onnx`` is never replaced by one
    that failed)."""
    from zoo import artifact
    path = options.output + ".onnx"
    candidate = options.output + ".unverified.onnx" if options.verify else path
    write_onnx(source, candidate, options.graph_preprocessing)
    if not options.verify:
        return ExportResult(options.output, source.epoch, path)
    try:
        parity = _verified(source, candidate, options.verify)
    except artifact.ArtifactError:
        raise  # a mismatch: the candidate stays for inspection, the error names it
    except BaseException:
        os.remove(candidate)
        raise
    os.replace(candidate, path)
    return ExportResult(options.output, source.epoch, path, parity)


def _verified(source, path, images):
    from zoo import artifact
    from zoo.inference.detector import Detector
    from zoo.onnx.parity import verify
    from zoo.onnx.runtime import OnnxDetector
    mxnet_detector = (source.detector() if isinstance(source, _Fresh)
                      else Detector.from_artifact(source))
    parity = verify(mxnet_detector, OnnxDetector(path), images)
    if not parity.equal:
        raise artifact.ArtifactError("%s: ONNX Runtime detects otherwise than MXNet: %s; "
                                     "first: %s (nothing replaced)"
                                     % (path, parity, parity.mismatches[0]))
    return parity
