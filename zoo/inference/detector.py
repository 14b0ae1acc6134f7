"""From images to labelled boxes on MXNet: the :class:`Detector` API.

A :class:`Detector` runs one model's deployed graph (an int8 artifact's int8 graph) on
images given as files or arrays, in batches (the one batch runner,
:class:`zoo.inference.runner.BatchRunner`: worker threads of normal priority decode and
preprocess the next batches while MXNet's pass runs, the calling thread the images they
have not started), on an
:class:`MXNetEngine`: one executor per input shape is bound once, on the first batch of
that shape, and reused by later calls (:class:`zoo.predictor.Predictor`).
:class:`Detections` and the helpers below it are :mod:`zoo.inference.runner`'s, which loads no
MXNet; they stay importable from here.
"""
from zoo.artifact import load as load_artifact
from zoo.config.loading import class_names as default_class_names
from zoo.predictor import Predictor, fuse
from zoo.inference.runner import (BatchDetector, Detections, label_names, rgb_image,
                                  write_coco_results)
from zoo.inference.tiles import recorded_tiling

__all__ = ["Detections", "Detector", "MXNetEngine", "label_names", "load_detector",
           "rgb_image", "write_coco_results"]


class MXNetEngine:
    """Runs a batch on MXNet for a :class:`~zoo.inference.runner.BatchRunner`: ``model``
    makes the graph's inputs, ``predictor`` (a :class:`Predictor`) runs the graph."""

    def __init__(self, model, predictor):
        self.model = model
        self.predictor = predictor

    def launch(self, data, im_info):
        """Start the pass; MXNet runs it asynchronously. The output is copied, so the next
        pass does not overwrite it before :meth:`fetch`."""
        return self.predictor(**self.model.input_arrays(data, im_info))[0].copy()

    def fetch(self, handle):
        """The batch's rows as numpy, once computed."""
        return handle.asnumpy()


def load_detector(prefix, epoch=None, ctx=None, exif="apply", data_threads=None,
                  data_shape=None, max_size=None):
    """The :class:`Detector` of a saved artifact, fp32, int8 or bf16 (``epoch`` None: its best
    epoch, else its newest), on ``ctx`` (default CPU); ``exif`` and ``data_threads`` as
    :class:`Detector` takes them; ``data_shape`` and ``max_size`` the input size to run at
    (None: the artifact's, see :meth:`Detector.set_input_size`). :func:`zoo.open_detector`
    opens a deployed file too."""
    return Detector.from_artifact(load_artifact(prefix, epoch, ctx), ctx, exif,
                                  data_threads).set_input_size(data_shape, max_size)


class Detector(BatchDetector):
    """Detects objects on images with a model and its parameters.

    ``symbol`` is the graph to run (e.g. an artifact's int8 graph); by default
    the model's inference graph, fused for deployment. ``class_names`` name the
    labels; by default the config's, else the class ids as strings.
    ``preprocessing`` makes the graph's inputs (an artifact's, which may predate the
    model's own); by default the model's. ``category_ids``: each class's COCO category id
    (:attr:`Detections.category_ids`); by default the config's (a model trained on a COCO
    file has the file's), else None. ``exif``: ``"apply"`` (the default) turns a
    photo file as its EXIF orientation says, so boxes are in the frame a viewer shows;
    ``"ignore"`` keeps the stored pixels (:attr:`Detections.frame` says which).
    ``data_threads``: the threads decoding and preprocessing images (default: half the
    cores, at most 4). ``precision`` and ``epoch``: an artifact's (default fp32, no epoch).
    One call at a time: the bound executors are shared by calls.
    """

    def __init__(self, model, arg_params, aux_params, *, symbol=None, class_names=None,
                 ctx=None, preprocessing=None, exif="apply", category_ids=None,
                 data_threads=None, precision=None, epoch=None):
        symbol = fuse(model.symbol()) if symbol is None else symbol
        if len(symbol.list_outputs()) != 1:
            raise ValueError("a detection graph has one output (B, N, 6), this one has %s"
                             % ", ".join(symbol.list_outputs()))
        self.model = model
        self.epoch = epoch
        self.predictor = Predictor(symbol, arg_params, aux_params, ctx)
        super().__init__(class_names or default_class_names(model.config),
                         preprocessing or model.preprocessing(), exif,
                         model.config.get("category_ids") if category_ids is None
                         else category_ids, data_threads, precision)

    @classmethod
    def from_model(cls, model, ctx=None, exif="apply", data_threads=None):
        """A detector on an in-memory model's parameters (initialised first if none)."""
        params = (model.init_params() if model.arg_params is None
                  else (model.arg_params, model.aux_params))
        return cls(model, *params, ctx=ctx, exif=exif, data_threads=data_threads)

    @classmethod
    def from_artifact(cls, artifact, ctx=None, exif="apply", data_threads=None):
        """The detector of a loaded :class:`zoo.artifact.Artifact`, running its own graph
        (an int8 artifact's int8 graph), with its epoch, precision and the tiles it was
        trained on."""
        detector = cls(artifact.model, artifact.arg_params, artifact.aux_params,
                       symbol=artifact.symbol, class_names=artifact.class_names, ctx=ctx,
                       preprocessing=artifact.preprocessing, exif=exif,
                       category_ids=artifact.category_ids, data_threads=data_threads,
                       precision=artifact.precision, epoch=artifact.epoch)
        detector.tiles = recorded_tiling(artifact.tiles)
        return detector

    def engine(self):
        return MXNetEngine(self.model, self.predictor)
