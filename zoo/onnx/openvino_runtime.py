"""Detectors deployed as OpenVINO models, fp32 or calibrated int8: :class:`OpenVinoDetector`;
loads no MXNet.

A deployment is OpenVINO's IR, ``PREFIX.xml`` with its weights ``PREFIX.bin`` beside it,
written by ``zoo export --format openvino`` from the ONNX export (:mod:`zoo.onnx.export`;
with ``--int8`` after :mod:`zoo.onnx.int8` put calibrated QDQ pairs in it, which OpenVINO
runs as int8 layers). The graph's inputs and output are the ONNX export's, and its
``rt_info`` under ``zoo`` holds the ONNX file's metadata (``format``, ``network``,
``class_names``, ``category_ids`` where it has them, ``preprocessing``,
``graph_preprocessing``, see :mod:`zoo.onnx.runtime`)
and ``precision``: JSON ``{"dtype": "fp32"}`` or ``{"dtype": "int8", "calibration": {...}}``.
"""
import functools
import json
import os
from collections import namedtuple

from zoo.errors import MissingPackage
from zoo.inference.runner import BatchDetector
from zoo.onnx import GRAPH_PREPROCESSING, OUTPUT
from zoo.onnx.runtime import (IMAGE_INPUTS, OnnxModelError, category_ids, check_format,
                              check_graph, graph_inputs, metadata_json, metadata_value)

__all__ = ["OpenVinoDetector", "SUFFIX", "compile_config", "layer_precisions",
           "load_openvino_detector", "shared_core", "write_ir"]

SUFFIX = ".xml"
INSTALL = "pip install -r requirements/openvino.txt in the zoo's checkout (no MXNet needed)"
METADATA_KEYS = ("zoo.format", "zoo.network", "zoo.class_names", "zoo.category_ids",
                 "zoo.preprocessing", "zoo.graph_preprocessing", "zoo.precision")
Port = namedtuple("Port", "name shape type")
ONNX_TYPES = {"f32": "tensor(float)", "f16": "tensor(float16)", "i64": "tensor(int64)",
              "i32": "tensor(int32)", "u8": "tensor(uint8)"}
"""OpenVINO's element types in ONNX Runtime's words, as :func:`zoo.onnx.runtime.check_graph`
reads a port's ``type``."""


def load_openvino_detector(path, threads=None, exif="apply"):
    """The :class:`OpenVinoDetector` of a deployed ``PREFIX.xml``."""
    return OpenVinoDetector(path, threads, exif)


class OpenVinoDetector(BatchDetector):
    """Detects objects on images with a deployed OpenVINO model (the file ``path``, IR
    ``.xml``) on the CPU: called as :class:`zoo.Detector` is, it gives the same
    :class:`zoo.Detections`.

    ``threads``: the threads a pass runs on (default OpenVINO's, one per physical core).
    Layers not quantized run in fp32 (not the bf16 OpenVINO would pick on CPUs with bf16
    units). ``network``, ``class_names``, ``category_ids``, ``preprocessing``,
    ``graph_preprocessing`` and ``precision`` are the file's metadata. One call at a time.
    """

    def __init__(self, path, threads=None, exif="apply"):
        self.path = os.fspath(path)
        core = shared_core()
        model = read_model(core, self.path)
        metadata = rt_metadata(model)
        check_format(self.path, metadata)
        self.network = metadata.get("zoo.network", "")
        self.graph_preprocessing = metadata_value(self.path, metadata, "zoo.graph_preprocessing",
                                                  GRAPH_PREPROCESSING)
        self.preprocessing = metadata_json(self.path, metadata, "zoo.preprocessing")
        self.precision = json.loads(metadata.get("zoo.precision", '{"dtype": "fp32"}'))
        self.image_input = IMAGE_INPUTS[self.graph_preprocessing]
        self.input_names = check_graph(self.path, Signature(model), self.image_input,
                                       self.preprocessing)
        self.compiled = core.compile_model(model, "CPU", compile_config(threads))
        self.request = self.compiled.create_infer_request()
        super().__init__(metadata_json(self.path, metadata, "zoo.class_names"),
                         self.preprocessing, exif, category_ids(self.path, metadata))

    def engine(self):
        return self

    def launch(self, data, im_info):
        """Run a batch (synchronously): its rows, copied out of the request's buffer, which
        the next batch reuses."""
        return self.request.infer(self.inputs(data, im_info))[OUTPUT].copy()

    def fetch(self, rows):
        return rows

    def inputs(self, data, im_info):
        """The graph's inputs by name for a prepared batch (see :mod:`zoo.onnx.runtime`)."""
        return graph_inputs(self, data, im_info)


def compile_config(threads):
    """OpenVINO's CPU settings: fp32 where a layer is not int8 (its default on CPUs with
    bf16 units is bf16, which moves scores by about 3e-4), latency first."""
    config = {"INFERENCE_PRECISION_HINT": "f32", "PERFORMANCE_HINT": "LATENCY"}
    if threads is not None:
        config["INFERENCE_NUM_THREADS"] = int(threads)
    return config


@functools.lru_cache(maxsize=None)
def shared_core():
    """The process's one ``openvino.Core``, kept until the process ends.

    Why one: OpenVINO's CPU plugin (2026.4) gives the thread that compiles a model an
    alternate signal stack of its own, one per Core, and puts back the one it found when
    that Core goes. Two Cores that go in the order they came leave the thread on the first
    one's unmapped stack, and the next signal delivered there (Ctrl-C, SIGTERM) kills the
    process with SIGSEGV and no traceback. One Core never puts a stack back."""
    try:
        import openvino
    except ImportError:
        raise MissingPackage("a .xml file (OpenVINO IR) runs on OpenVINO, which is not "
                             "installed: %s" % INSTALL) from None
    return openvino.Core()


def read_model(core, path):
    """OpenVINO's model of the IR ``path``, or :class:`OnnxModelError` in one line."""
    if not path.endswith(SUFFIX):
        raise OnnxModelError("%s: not an OpenVINO IR (expected a %s file; run ONNX files "
                             "with zoo.load_onnx_detector)" % (path, SUFFIX))
    for needed in (path, path[:-len(SUFFIX)] + ".bin"):
        if not os.path.isfile(needed):
            raise OnnxModelError("%s: no such file" % needed)
    try:
        return core.read_model(path)
    except RuntimeError as err:
        raise OnnxModelError("%s: not an OpenVINO IR OpenVINO reads (%s)"
                             % (path, str(err).strip().splitlines()[0])) from None


def rt_metadata(model):
    """``{"zoo.key": text}`` of the model's ``rt_info`` under ``zoo``."""
    found = {}
    for key in METADATA_KEYS:
        path = key.split(".")
        if model.has_rt_info(path):
            found[key] = model.get_rt_info(path).astype(str)
    return found


class Signature:
    """A compiled or read model's inputs and outputs as :func:`zoo.onnx.runtime.check_graph`
    reads an ONNX Runtime session's: ports with ``name``, ``shape`` (None where free) and
    ``type``."""

    def __init__(self, model):
        self.model = model

    def get_inputs(self):
        return [_port(given) for given in self.model.inputs]

    def get_outputs(self):
        return [_port(given) for given in self.model.outputs]


def _port(given):
    shape = given.get_partial_shape()
    dims = ([None if dim.is_dynamic else dim.get_length() for dim in shape]
            if shape.rank.is_static else [])
    return Port(given.get_any_name(), dims, ONNX_TYPES.get(given.get_element_type().get_type_name(),
                                                        given.get_element_type().get_type_name()))


def write_ir(onnx_path, path, precision):
    """Convert the exported ONNX file ``onnx_path`` (fp32, or int8 QDQ) into the IR ``path``
    (``.xml``, its ``.bin`` beside it; both replaced atomically) carrying the ONNX file's
    metadata and ``precision``; returns ``path``. Needs onnx."""
    import onnx
    import openvino

    if not path.endswith(SUFFIX):
        raise ValueError("%s: an OpenVINO IR path ends in %s" % (path, SUFFIX))
    model = openvino.convert_model(onnx_path)
    props = {p.key: p.value for p in onnx.load(onnx_path, load_external_data=False)
             .metadata_props}
    props["zoo.precision"] = json.dumps(precision)
    for key in METADATA_KEYS:
        if key in props:
            model.set_rt_info(props[key], key.split("."))
    staging = path[:-len(SUFFIX)] + ".writing" + SUFFIX
    # Weights as they are: fp32, or the int8 ones the QDQ pairs carry.
    openvino.save_model(model, staging, compress_to_fp16=False)
    os.replace(staging[:-len(SUFFIX)] + ".bin", path[:-len(SUFFIX)] + ".bin")
    os.replace(staging, path)
    return path


def layer_precisions(compiled):
    """``[(layer, type, precision)]`` of the layers a compiled model runs, as OpenVINO's CPU
    plugin executes them (after its fusions): which run in int8 (``u8``/``i8``) and which
    in fp32 (``f32``)."""
    return [(op.get_friendly_name(), info["layerType"].astype(str),
             info["runtimePrecision"].astype(str))
            for op in compiled.get_runtime_model().get_ops() for info in [op.get_rt_info()]]
