"""The one path from a checkpoint to a detector: :func:`open_detector` opens an artifact
(fp32, int8 or bf16, on MXNet), an exported ``.onnx`` file (on ONNX Runtime) or an OpenVINO
``.xml`` (on OpenVINO), and gives the one detector type every job runs
(:class:`zoo.inference.runner.BatchDetector`). MXNet is imported for an artifact only, so a
deployed file opens where MXNet is not installed."""
from zoo import process
from zoo.errors import OptionsError
from zoo.onnx.deployed import is_deployed, load_deployed_detector

__all__ = ["checkpoint_sha256", "open_detector"]


def open_detector(checkpoint, epoch=None, *, data_threads=None, exif="apply", data_shape=None,
                  max_size=None):
    """The detector of ``checkpoint``: an artifact prefix (``epoch`` None: its best
    validated epoch, else its newest) or a deployed ``.onnx`` or ``.xml`` file (of one
    epoch: an ``epoch`` given with it is an :class:`~zoo.errors.OptionsError`).
    ``data_threads``: the threads that decode and preprocess images, on every runtime;
    ``exif`` as :class:`zoo.Detector` takes it. ``data_shape`` and ``max_size``: the input
    size to run at, a Faster R-CNN's short side and long-side limit (None: the size the
    checkpoint records, its training size); one the model cannot take is an OptionsError
    (:meth:`~zoo.inference.runner.BatchDetector.set_input_size`)."""
    if is_deployed(checkpoint):
        if epoch is not None:
            raise OptionsError("epoch %d: %s is a deployed file, of one epoch; give no epoch"
                               % (epoch, checkpoint))
        detector = load_deployed_detector(checkpoint, exif=exif, data_threads=data_threads)
        return detector.set_input_size(data_shape, max_size)
    process.use_fast_settings()  # the detector loads MXNet: the zoo's settings, unless loaded
    from zoo.inference.detector import load_detector  # MXNet's: not for a deployed file
    return load_detector(checkpoint, epoch, exif=exif, data_threads=data_threads,
                         data_shape=data_shape, max_size=max_size)


def checkpoint_sha256(checkpoint, epoch=None):
    """The sha256 that identifies what ``checkpoint`` runs: an artifact epoch's parameter
    file's, as its JSON records it (checked when the artifact loads; ``epoch`` None: the
    one :func:`open_detector` opens), or a deployed file's own (an OpenVINO ``.xml`` records
    its weights' sha256 inside)."""
    if is_deployed(checkpoint):
        from zoo.onnx.openvino_runtime import file_sha256  # reads the file, loads no runtime
        return file_sha256(checkpoint)
    from zoo.artifact import default_epoch, read_meta  # MXNet's, as the artifact is
    return read_meta(checkpoint, default_epoch(checkpoint) if epoch is None
                     else epoch)["params_sha256"]
