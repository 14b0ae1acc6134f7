"""``zoo export --format openvino``: the detector as an OpenVINO model (IR), fp32 or int8
calibrated on the first images of a dataset split (:mod:`zoo.onnx.int8`), written with its
metadata (:mod:`zoo.onnx.openvino_runtime`)."""
import os
import tempfile
import time

from zoo.data.factory import needs_root
from zoo.errors import DataError, OptionsError
from zoo.inference.runner import ImageList
from zoo.jobs.datasets import DataSplit, first_images, open_for_artifact
from zoo.predictor import warn_int8_speed
from zoo.progress import progress_bar

__all__ = ["check_runs", "export_openvino"]


def export_openvino(source, options, write_onnx):
    """Write ``options.output + ".xml"`` (and ``.bin``) from ``source``, an artifact or a
    fresh model (see :mod:`zoo.jobs.export`), exported to ONNX by ``write_onnx(source,
    path, graph_preprocessing)`` first; returns ``(path, precision)``."""
    from zoo.onnx.openvino_runtime import SUFFIX, write_ir
    check_options(options)
    with tempfile.TemporaryDirectory() as scratch:
        onnx_path = write_onnx(source, os.path.join(scratch, "fp32.onnx"),
                               options.graph_preprocessing)
        precision = {"dtype": "fp32"}
        if options.int8:
            split = DataSplit(options.dataset, options.data_root, options.split,
                              options.skip_bad, options.data_threads, options.annotations,
                              options.image_dir)
            images = calibration_images(source, split, options)
            onnx_path, precision = calibrated(source, onnx_path, options, split, images,
                                              os.path.join(scratch, "int8.onnx"))
            checked = write_ir(onnx_path, os.path.join(scratch, "int8" + SUFFIX), precision)
            check_runs(checked, options.output + SUFFIX, images)
        return write_ir(onnx_path, options.output + SUFFIX, precision), precision


def check_runs(path, output, images):
    """Raise :class:`~zoo.artifact.ArtifactError` unless OpenVINO runs the IR ``path`` on
    the first calibration image. OpenVINO rewrites a graph holding int8 layers (its
    low-precision transformations) and may fail only when it runs one (the int8 Faster
    R-CNN's anchor grid did, until :func:`zoo.onnx.int8.shield_integer_casts`): the user
    must learn that here, not from the first detection."""
    from zoo.artifact import ArtifactError
    from zoo.onnx.openvino_runtime import OpenVinoDetector
    try:
        OpenVinoDetector(path)(images[:1])
    except RuntimeError as err:
        reason = [line for line in str(err).splitlines() if line.startswith("[CPU]")]
        raise ArtifactError("%s: OpenVINO cannot run this int8 graph (%s); export it in fp32, "
                            "or use zoo quantize for MXNet int8"
                            % (output, (reason or [str(err).splitlines()[0]])[0])) from None


def check_options(options):
    """One-line errors for calibration settings that cannot be."""
    if options.int8 and not options.data_root and needs_root(options.dataset,
                                                             options.annotations,
                                                             options.image_dir):
        raise OptionsError("int8 calibrates on images: give data_root (and dataset, split), "
                           "or a COCO split's annotations and image_dir")
    if options.calib_images < 1 or options.batch_size < 1:
        raise OptionsError("calib_images and batch_size must be at least 1, got %d and %d"
                           % (options.calib_images, options.batch_size))


def calibrated(source, onnx_path, options, split, images, path):
    """The int8 QDQ file ``path`` of the fp32 export ``onnx_path``, calibrated on
    ``images`` (of ``split``, a :class:`~zoo.jobs.datasets.DataSplit`); returns ``(path,
    precision)``."""
    from zoo.onnx.int8 import quantize_file
    from zoo.onnx.runtime import OnnxDetector
    warn_int8_speed()
    detector = OnnxDetector(onnx_path)  # prepares the images as the deployed model will
    batch_size = min(options.batch_size, len(images))
    batches = (detector.inputs(batch.data, batch.im_info)
               for batch in detector.runner.batches(ImageList(images), batch_size))
    start = time.time()
    path, layers = quantize_file(onnx_path, batches, path,
                                 progress=calibration_bar(options, len(images), batch_size))
    return path, {"dtype": "int8", "calibration": {
        "mode": "naive", "images": len(images), "data": str(split),
        "int8_layers": layers, "source": source_name(source, options),
        "seconds": round(time.time() - start, 1)}}


def calibration_images(source, split, options):
    """The first ``calib_images`` images of ``split``: files, or decoded where the dataset
    keeps them in a record file. An artifact's classes must be the dataset's (or mapped)."""
    if hasattr(source, "class_names"):  # an artifact: calibrate on its own objects
        dataset, _ = open_for_artifact(split, source.class_names, source_name(source, options),
                                       options.class_map)
    else:
        dataset = split.open()
    if len(dataset) == 0:
        raise DataError("%s: no images to calibrate on" % split)
    return first_images(dataset, options.calib_images)


def source_name(source, options):
    if options.checkpoint is not None:
        return "%s-%04d" % (options.checkpoint, source.epoch)
    return options.network


def calibration_bar(options, images, batch_size):
    """A progress bar wrapper counting calibration batches, or None without progress. Not
    named ``progress_bar``: it would shadow :func:`zoo.progress.progress_bar`, which it
    calls (the default ``zoo export --int8`` failed so, with a TypeError)."""
    if not options.progress:
        return None
    return lambda batches: progress_bar(batches, total=-(-images // batch_size),
                                        desc="calibrating", unit="batch")
