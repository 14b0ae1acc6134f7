"""One loader for deployed detectors that picks the runtime from the file: ``PREFIX.onnx`` on
ONNX Runtime, ``PREFIX.xml`` (OpenVINO IR) on OpenVINO. Loads no MXNet."""
import os

from zoo.errors import OnnxModelError

__all__ = ["DEPLOYED_SUFFIXES", "is_deployed", "load_deployed_detector"]

DEPLOYED_SUFFIXES = (".onnx", ".xml")


def is_deployed(path):
    """Whether ``path`` names a deployed detector file rather than an artifact prefix."""
    return os.fspath(path).endswith(DEPLOYED_SUFFIXES)


def load_deployed_detector(path, threads=None, exif="apply"):
    """The detector of a deployed file: an :class:`~zoo.onnx.runtime.OnnxDetector` for
    ``.onnx``, an :class:`~zoo.onnx.openvino_runtime.OpenVinoDetector` for ``.xml``; any
    other file, or one that does not load, is an :class:`~zoo.errors.OnnxModelError`."""
    path = os.fspath(path)
    if path.endswith(".xml"):
        from zoo.onnx.openvino_runtime import OpenVinoDetector
        return OpenVinoDetector(path, threads, exif)
    if path.endswith(".onnx"):
        from zoo.onnx.runtime import OnnxDetector
        return OnnxDetector(path, threads=threads, exif=exif)
    raise OnnxModelError("%s: a deployed detector is a %s file" % (path, " or ".join(
        DEPLOYED_SUFFIXES)))
