"""Detectors exported to ONNX, run on ONNX Runtime: :class:`OnnxDetector`; loads no MXNet.

An export is one file ``PREFIX.onnx`` that describes itself in its ``metadata_props``:

- ``zoo.format``: ``"1"`` (:data:`zoo.onnx.FORMAT`); ``zoo.network``: the config's name;
- ``zoo.class_names``: a JSON list of the class names; ``zoo.num_classes``: their count,
  checked against the list on loading (files of earlier versions lack it);
- ``zoo.category_ids`` (a model trained on a COCO file only): a JSON list of each class's
  COCO category id, which :class:`zoo.Detections` carry;
- ``zoo.preprocessing``: a JSON dict of :mod:`zoo.schema.preprocessing`, how an image is resized;
- ``zoo.graph_preprocessing``: ``"none"``, the graph takes ``data`` (B, 3, H, W) normalised
  as the MXNet graph's input is, or ``"normalize"``, the graph takes ``image`` (B, H, W, 3),
  RGB 0..255 resized and padded with the mean pixel, and normalises it itself;
- ``zoo.tiles`` (a model trained on tiles only): a JSON object ``{"size", "overlap"}``, the
  tiles ``zoo detect`` and ``zoo eval`` run the file in unless told otherwise.

A Faster R-CNN also takes ``im_info`` (B, 3), rows ``[height, width, scale]`` as the MXNet
graph's. The output ``detections`` (B, N, 6) has the MXNet graph's rows ``[class, score,
x1, y1, x2, y2]``, corners normalised to the image, class -1 for no detection. The batch
dimension is free. Loading checks every input's and the output's name, rank and dtype
(float32), and refuses detections of a class the names do not cover.
"""
import json
import os

import numpy as np

from zoo.errors import MissingPackage, OnnxModelError
from zoo.inference.runner import BatchDetector
from zoo.inference.tiles import recorded_tiling
from zoo.schema.checks import repeated
from zoo.schema.preprocessing import canvas_im_info
from zoo.onnx import FORMAT, GRAPH_PREPROCESSING, OUTPUT

__all__ = ["IMAGE_INPUTS", "OnnxDetector", "OnnxModelError", "category_ids", "check_format",
           "check_graph",
           "check_image_size", "file_tiles", "graph_inputs", "load_onnx_detector", "metadata_json",
           "metadata_value", "pixels"]

IMAGE_INPUTS = {"none": "data", "normalize": "image"}
"""The image input of each ``zoo.graph_preprocessing``."""
IM_INFO = "im_info"
INSTALL = "pip install -r requirements/onnxruntime.txt in the zoo's checkout (no MXNet needed)"
JSON_METADATA = {
    # key: (whether a decoded value is good, what is expected)
    "zoo.class_names": (lambda value: isinstance(value, list) and len(value) > 0
                        and all(isinstance(name, str) for name in value)
                        and not repeated(value),
                        "a JSON list of class names, none repeated"),
    "zoo.category_ids": (lambda value: isinstance(value, list) and len(value) > 0
                         and all(type(v) is int for v in value),
                         "a JSON list of integer category ids"),
    "zoo.preprocessing": (lambda value: isinstance(value, dict)
                          and {"mean", "std", "data_shape"} <= set(value),
                          "a JSON object with mean, std and data_shape"),
    "zoo.tiles": (lambda value: isinstance(value, dict) and set(value) == {"size", "overlap"}
                  and type(value["size"]) is int and value["size"] > 0
                  and isinstance(value["overlap"], (int, float))
                  and 0 <= value["overlap"] < 1,
                  'a JSON object {"size": pixels, "overlap": a share below 1}'),
}


def load_onnx_detector(path, providers=None, threads=None, exif="apply", data_threads=None):
    """The :class:`OnnxDetector` of an exported ``PREFIX.onnx`` file; a file that does not
    load is an :class:`~zoo.errors.OnnxModelError`, one line naming it."""
    return OnnxDetector(path, providers, threads, exif, data_threads)


class OnnxDetector(BatchDetector):
    """Detects objects on images with an exported detector (the file ``path``) on ONNX
    Runtime: called as :class:`zoo.Detector` is, it gives the same :class:`zoo.Detections`.

    ``providers`` are ONNX Runtime's execution providers, in order of preference (default
    the CPU's); ``threads`` the threads a pass runs on (default ONNX Runtime's, one per
    physical core); ``exif`` and ``data_threads`` (the threads decoding images) as
    :class:`zoo.Detector` takes them.
    ``network``, ``class_names``, ``category_ids``, ``preprocessing``,
    ``graph_preprocessing`` and ``tiles`` are the file's metadata. One call at a time.
    """

    def __init__(self, path, providers=None, threads=None, exif="apply", data_threads=None):
        self.path = os.fspath(path)
        self.session = open_session(self.path, providers, threads)
        metadata = self.session.get_modelmeta().custom_metadata_map
        check_format(self.path, metadata)
        self.network = metadata.get("zoo.network", "")
        self.graph_preprocessing = metadata_value(self.path, metadata, "zoo.graph_preprocessing",
                                                  GRAPH_PREPROCESSING)
        self.preprocessing = metadata_json(self.path, metadata, "zoo.preprocessing")
        self.tiles = file_tiles(self.path, metadata)
        super().__init__(metadata_json(self.path, metadata, "zoo.class_names"),
                         self.preprocessing, exif, category_ids(self.path, metadata),
                         data_threads)
        self.image_input = IMAGE_INPUTS[self.graph_preprocessing]
        self.input_names = check_graph(self.path, self.session, self.image_input,
                                       self.preprocessing)
        check_num_classes(self.path, metadata, self.class_names)

    def engine(self):
        return self

    def launch(self, data, im_info):
        """Run a batch (ONNX Runtime's pass is synchronous): its rows, checked."""
        rows, = self.session.run([OUTPUT], self.inputs(data, im_info))
        check_rows(self.path, rows, len(self.class_names))
        return rows

    def fetch(self, rows):
        return rows

    def inputs(self, data, im_info):
        """The graph's inputs by name for a prepared batch: ``data`` normalised (B, 3, H, W)
        and ``im_info`` (None for stretched images: the whole canvas at scale 1)."""
        return graph_inputs(self, data, im_info)


def graph_inputs(detector, data, im_info):
    """The inputs by name of an exported graph (``detector``'s ``image_input``,
    ``input_names`` and ``preprocessing``) for a prepared batch; shared by the runtimes."""
    feed = {detector.image_input: (pixels(data, detector.preprocessing)
                                   if detector.image_input == "image" else data)}
    if IM_INFO in detector.input_names:
        feed[IM_INFO] = canvas_im_info(data) if im_info is None else im_info
    return feed


def pixels(data, preprocessing):
    """The (B, H, W, 3) RGB pixels of a normalised batch (B, 3, H, W): the padding becomes
    the mean pixel, as the graph's own normalisation expects."""
    mean = np.asarray(preprocessing["mean"], np.float32)
    std = np.asarray(preprocessing["std"], np.float32)
    return np.ascontiguousarray(data.transpose(0, 2, 3, 1) * std + mean)


def open_session(path, providers, threads):
    """An ONNX Runtime session on ``path``."""
    try:
        import onnxruntime
    except ImportError:
        raise MissingPackage("%s: a .onnx file runs on ONNX Runtime, which is not installed: "
                             "%s" % (path, INSTALL)) from None
    if not os.path.isfile(path):
        raise OnnxModelError("%s: no such file" % path)
    if os.path.getsize(path) == 0:
        raise OnnxModelError("%s: an empty file (0 bytes), not an ONNX model" % path)
    options = onnxruntime.SessionOptions()
    if threads is not None:
        options.intra_op_num_threads = int(threads)
    try:
        return onnxruntime.InferenceSession(path, options,
                                            providers=providers or ["CPUExecutionProvider"])
    except onnxruntime.capi.onnxruntime_pybind11_state.InvalidProtobuf:
        raise OnnxModelError("%s: not an ONNX model (its protobuf does not parse)"
                             % path) from None
    except (onnxruntime.capi.onnxruntime_pybind11_state.Fail,
            onnxruntime.capi.onnxruntime_pybind11_state.InvalidArgument,
            onnxruntime.capi.onnxruntime_pybind11_state.InvalidGraph,
            onnxruntime.capi.onnxruntime_pybind11_state.NotImplemented) as err:
        raise OnnxModelError("%s: ONNX Runtime cannot load it (%s)" % (
            path, shortened(" ".join(str(err).split()), 160))) from None


def check_format(path, metadata):
    """Raise :class:`OnnxModelError` unless ``metadata`` is a zoo export's of :data:`FORMAT`."""
    if "zoo.format" not in metadata:
        raise OnnxModelError("%s: not a zoo export (no zoo.format in its metadata_props); "
                             "export one with: zoo export --format onnx" % path)
    if metadata["zoo.format"] != FORMAT:
        raise OnnxModelError("%s: zoo.format %r; this zoo reads zoo.format %r"
                             % (path, metadata["zoo.format"], FORMAT))


def metadata_value(path, metadata, key, allowed):
    """The value of ``key``, one of ``allowed``."""
    value = metadata.get(key)
    if value not in allowed:
        raise OnnxModelError("%s: %s = %r: expected one of %s"
                             % (path, key, value, ", ".join(map(repr, allowed))))
    return value


def metadata_json(path, metadata, key):
    """The JSON value of ``key``, checked as :data:`JSON_METADATA` says."""
    good, expected = JSON_METADATA[key]
    try:
        value = json.loads(metadata[key])
    except KeyError:
        raise OnnxModelError("%s: no %s in its metadata_props" % (path, key)) from None
    except ValueError as err:
        raise OnnxModelError("%s: %s is not valid JSON (%s)" % (path, key, err)) from None
    if not good(value):
        raise OnnxModelError("%s: %s = %s: expected %s"
                             % (path, key, shortened(metadata[key]), expected))
    return value


def shortened(text, limit=60):
    return text if len(text) <= limit else text[:limit - 3] + "..."


def check_graph(path, session, image_input, preprocessing):
    """The graph's input names, checked: ``image_input`` (of the size ``preprocessing``
    makes), ``im_info`` at most besides, and the output ``detections``, each of its rank
    and float32."""
    inputs = {given.name: given for given in session.get_inputs()}
    if image_input not in inputs or set(inputs) - {image_input, IM_INFO}:
        raise OnnxModelError("%s: inputs %s: expected %r (and %r for a Faster R-CNN)"
                             % (path, ", ".join(inputs), image_input, IM_INFO))
    outputs = {given.name: given for given in session.get_outputs()}
    if OUTPUT not in outputs:
        raise OnnxModelError("%s: outputs %s: expected %r" % (path, ", ".join(outputs), OUTPUT))
    for given in list(inputs.values()) + [outputs[OUTPUT]]:
        check_tensor(path, given)
    check_image_size(path, image_input, inputs[image_input].shape, preprocessing)
    return list(inputs)


TENSORS = {"data": (4, None), "image": (4, 3), IM_INFO: (2, 3), OUTPUT: (3, 6)}
"""Each tensor's rank and the size of its last axis (None: free)."""


def check_tensor(path, given):
    """Raise unless the input or output ``given`` (ONNX Runtime's NodeArg) is float32 of
    its :data:`TENSORS` rank, its last axis of the fixed size where the file fixes it."""
    rank, last = TENSORS[given.name]
    shape = given.shape
    fixed_last = len(shape) == rank and isinstance(shape[-1], int)
    if (given.type != "tensor(float)" or len(shape) != rank
            or (last is not None and fixed_last and shape[-1] != last)):
        raise OnnxModelError("%s: %s is %s of shape %s: expected tensor(float) of rank %d%s"
                             % (path, given.name, given.type, shape, rank,
                                ", last axis %d" % last if last else ""))


def category_ids(path, metadata):
    """The file's ``zoo.category_ids`` (one per name of ``zoo.class_names``), or None where
    it has none."""
    if "zoo.category_ids" not in metadata:
        return None
    ids = metadata_json(path, metadata, "zoo.category_ids")
    names = metadata_json(path, metadata, "zoo.class_names")
    if len(ids) != len(names):
        raise OnnxModelError("%s: zoo.category_ids lists %d ids for the %d names of "
                             "zoo.class_names: expected one per class"
                             % (path, len(ids), len(names)))
    return ids


def file_tiles(path, metadata):
    """The :class:`~zoo.inference.tiles.Tiling` a file's model was trained on (``zoo.tiles``),
    None for whole photos (and for files of earlier versions, which record none)."""
    if "zoo.tiles" not in metadata:
        return None
    return recorded_tiling(metadata_json(path, metadata, "zoo.tiles"))


def check_num_classes(path, metadata, class_names):
    """Raise unless ``zoo.num_classes`` (where the file has one) counts ``class_names``."""
    if "zoo.num_classes" not in metadata:
        return
    count = metadata["zoo.num_classes"]
    if count != str(len(class_names)):
        raise OnnxModelError("%s: zoo.class_names lists %d names, zoo.num_classes = %s: "
                             "expected one name per class of the graph"
                             % (path, len(class_names), shortened(count)))


def check_rows(path, rows, num_classes):
    """Raise unless the graph's output is (B, N, 6) with classes -1 or below ``num_classes``:
    a class the names do not cover would come back under a made-up name."""
    if rows.ndim != 3 or rows.shape[-1] != 6:
        raise OnnxModelError("%s: %s of shape %s: expected (batch, N, 6)"
                             % (path, OUTPUT, rows.shape))
    classes = rows[..., 0]
    bad = classes[(classes >= num_classes) | ((classes < 0) & (classes != -1))]
    if bad.size:
        raise OnnxModelError("%s: detects class %g, but zoo.class_names lists %d classes"
                             % (path, bad[0], num_classes))


def check_image_size(path, name, shape, preprocessing):
    """Raise unless the image input's fixed height and width (an SSD's) are those images
    are stretched to; ONNX Runtime would refuse every batch."""
    if preprocessing.get("resize") == "short_side":  # any size, padded per batch
        return
    axes = (2, 3) if name == "data" else (1, 2)
    sides = [shape[axis] if len(shape) == 4 else None for axis in axes]
    if any(isinstance(side, int) and side != expected
           for side, expected in zip(sides, preprocessing["data_shape"])):
        raise OnnxModelError("%s: input %s of shape %s: expected height and width %s, "
                             "zoo.preprocessing's data_shape" % (path, name, shape,
                                                                 preprocessing["data_shape"]))
