"""From images to labelled boxes on MXNet: the :class:`Detector` API.

A :class:`Detector` runs one model's deployed graph (an int8 artifact's int8 graph) on
images given as files or arrays, in batches (:class:`zoo.inference.BatchDetector`: worker
threads decode and preprocess the next batches while MXNet runs the current one, its
forward pass releasing the GIL), and one executor per input shape is bound once, on the
first batch of that shape, and reused by later calls (:class:`zoo.deploy.Predictor`).
:class:`Detections` and the helpers below it are :mod:`zoo.inference`'s, which loads no
MXNet; they stay importable from here.
"""
from .artifact import load as load_artifact
from .deploy import Predictor, fuse
from .inference import BatchDetector, Detections, label_names, rgb_image, write_coco_results

__all__ = ["Detections", "Detector", "label_names", "load_detector", "rgb_image",
           "write_coco_results"]


def fetched(output, sizes):
    """``(rows, sizes)`` of a batch: its output as numpy, pads dropped, once computed."""
    return output.asnumpy()[:len(sizes)], sizes


def load_detector(prefix, epoch=None, ctx=None, exif="apply"):
    """The :class:`Detector` of a saved artifact (``epoch`` None: its best epoch, else
    its newest), on ``ctx`` (default CPU); ``exif`` as :class:`Detector` takes it."""
    return Detector.from_artifact(load_artifact(prefix, epoch, ctx), ctx, exif)


class Detector(BatchDetector):
    """Detects objects on images with a model and its parameters.

    ``symbol`` is the graph to run (e.g. an artifact's int8 graph); by default
    the model's inference graph, fused for deployment. ``class_names`` name the
    labels; by default the config's, else the class ids as strings.
    ``preprocessing`` makes the graph's inputs (an artifact's, which may predate the
    model's own); by default the model's. ``exif``: ``"apply"`` (the default) turns a
    photo file as its EXIF orientation says, so boxes are in the frame a viewer shows;
    ``"ignore"`` keeps the stored pixels (:attr:`Detections.frame` says which). One call
    at a time: the bound executors are shared by calls.
    """

    def __init__(self, model, arg_params, aux_params, *, symbol=None, class_names=None,
                 ctx=None, preprocessing=None, exif="apply"):
        symbol = fuse(model.symbol()) if symbol is None else symbol
        if len(symbol.list_outputs()) != 1:
            raise ValueError("a detection graph has one output (B, N, 6), this one has %s"
                             % ", ".join(symbol.list_outputs()))
        config = model.config
        super().__init__(class_names or config["class_names"]
                         or [str(i) for i in range(config["num_classes"])],
                         preprocessing or model.preprocessing(), exif)
        self.model = model
        self.predictor = Predictor(symbol, arg_params, aux_params, ctx)

    @classmethod
    def from_model(cls, model, ctx=None, exif="apply"):
        """A detector on an in-memory model's parameters (initialised first if none)."""
        params = (model.init_params() if model.arg_params is None
                  else (model.arg_params, model.aux_params))
        return cls(model, *params, ctx=ctx, exif=exif)

    @classmethod
    def from_artifact(cls, artifact, ctx=None, exif="apply"):
        """The detector of a loaded :class:`zoo.artifact.Artifact`, running its own graph."""
        return cls(artifact.model, artifact.arg_params, artifact.aux_params,
                   symbol=artifact.symbol, class_names=artifact.class_names, ctx=ctx,
                   preprocessing=artifact.preprocessing, exif=exif)

    def run(self, images, batch_size):
        """Yield ``(rows, sizes)`` per batch: the graph's rows of each image and its
        ``(width, height)``, pads dropped."""
        previous = None
        for (data, im_info), sizes in self.prepared(images, batch_size):
            # MXNet runs the pass asynchronously; copying its output before the next pass
            # overwrites it lets the caller turn this batch into Detections meanwhile.
            inputs = self.model.input_arrays(data, im_info)
            current = self.predictor(**inputs)[0].copy(), sizes
            if previous is not None:
                yield fetched(*previous)
            previous = current
        if previous is not None:
            yield fetched(*previous)
