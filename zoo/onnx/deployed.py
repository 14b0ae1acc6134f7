"""One loader for deployed detectors that picks the runtime from the file: ``PREFIX.onnx`` on
ONNX Runtime, ``PREFIX.xml`` (OpenVINO IR) on OpenVINO. Loads no MXNet.
:func:`zoo.open_detector` opens these and artifacts alike."""
import os

from zoo.errors import OnnxModelError

__all__ = ["DEPLOYED_SUFFIXES", "is_deployed", "load_deployed_detector"]

DEPLOYED_SUFFIXES = (".onnx", ".xml")


def is_deployed(path):
    """Whether ``path`` names a deployed detector file rather than an artifact prefix."""
    return os.fspath(path).endswith(DEPLOYED_SUFFIXES)


def load_deployed_detector(path, threads=None, exif="apply", data_threads=None):
    """The detector of a deployed file: an :class:`~zoo.onnx.runtime.OnnxDetector` for
    ``.onnx``, an :class:`~zoo.onnx.openvino_runtime.OpenVinoDetector` for ``.xml``; any
    other file, or one that does not load, is an :class:`~zoo.errors.OnnxModelError`.
    ``threads``: the threads a pass runs on (default the runtime's); ``exif`` and
    ``data_threads`` (the threads decoding images) as :class:`zoo.Detector` takes them."""
    path = os.fspath(path)
    if path.endswith(".xml"):
        from zoo.onnx.openvino_runtime import OpenVinoDetector
        return OpenVinoDetector(path, threads, exif, data_threads)
    if path.endswith(".onnx"):
        from zoo.onnx.runtime import OnnxDetector
        return OnnxDetector(path, threads=threads, exif=exif, data_threads=data_threads)
    raise OnnxModelError("%s: a deployed detector is a %s file" % (path, " or ".join(
        DEPLOYED_SUFFIXES)))
