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
``weights_sha256`` there is the sha256 of the ``.bin`` written with it: loading refuses a
``.bin`` that is not the one its ``.xml`` was written with, as an artifact refuses other
parameters (IRs of earlier versions, which lack it, load unchecked).
"""
import functools
import hashlib
import json
import os
import re
from collections import namedtuple

from defusedxml import DefusedXmlException
from defusedxml import ElementTree

from zoo.errors import MissingPackage
from zoo.inference.runner import BatchDetector
from zoo.onnx import GRAPH_PREPROCESSING, OUTPUT
from zoo.onnx.runtime import (IMAGE_INPUTS, OnnxModelError, category_ids, check_format,
                              check_graph, file_tiles, graph_inputs, metadata_json,
                              metadata_value)

__all__ = ["OpenVinoDetector", "SUFFIX", "WEIGHTS_SUFFIX", "compile_config", "layer_precisions",
           "load_openvino_detector", "recorded_weights_sha256", "shared_core", "write_ir"]

SUFFIX = ".xml"
WEIGHTS_SUFFIX = ".bin"
WEIGHTS_SHA256 = ("zoo", "weights_sha256")
"""Where in ``rt_info`` the ``.xml`` records its ``.bin``'s sha256."""
PENDING_SHA256 = "zoo-weights-sha256-pending"
"""What :func:`write_ir` records until the ``.bin`` it hashes is written."""
INSTALL = "pip install -r requirements/openvino.txt in the zoo's checkout (no MXNet needed)"
METADATA_KEYS = ("zoo.format", "zoo.network", "zoo.class_names", "zoo.category_ids",
                 "zoo.preprocessing", "zoo.graph_preprocessing", "zoo.precision", "zoo.tiles")
Port = namedtuple("Port", "name shape type")
ONNX_TYPES = {"f32": "tensor(float)", "f16": "tensor(float16)", "i64": "tensor(int64)",
              "i32": "tensor(int32)", "u8": "tensor(uint8)"}
"""OpenVINO's element types in ONNX Runtime's words, as :func:`zoo.onnx.runtime.check_graph`
reads a port's ``type``."""


def load_openvino_detector(path, threads=None, exif="apply", data_threads=None):
    """The :class:`OpenVinoDetector` of a deployed ``PREFIX.xml``; an IR that does not load
    (its ``.bin`` missing or not its own included) is an :class:`~zoo.errors.OnnxModelError`,
    one line naming the file."""
    return OpenVinoDetector(path, threads, exif, data_threads)


class OpenVinoDetector(BatchDetector):
    """Detects objects on images with a deployed OpenVINO model (the file ``path``, IR
    ``.xml``) on the CPU: called as :class:`zoo.Detector` is, it gives the same
    :class:`zoo.Detections`.

    ``threads``: the threads a pass runs on (default OpenVINO's, one per physical core);
    ``exif`` and ``data_threads`` (the threads decoding images) as :class:`zoo.Detector`
    takes them.
    Layers not quantized run in fp32 (not the bf16 OpenVINO would pick on CPUs with bf16
    units). ``network``, ``class_names``, ``category_ids``, ``preprocessing``,
    ``graph_preprocessing``, ``precision`` and ``tiles`` are the file's metadata. One call at
    a time.
    """

    def __init__(self, path, threads=None, exif="apply", data_threads=None):
        self.path = os.fspath(path)
        core = shared_core()
        model = read_model(core, self.path)
        metadata = rt_metadata(model)
        check_format(self.path, metadata)
        self.network = metadata.get("zoo.network", "")
        self.graph_preprocessing = metadata_value(self.path, metadata, "zoo.graph_preprocessing",
                                                  GRAPH_PREPROCESSING)
        self.preprocessing = metadata_json(self.path, metadata, "zoo.preprocessing")
        self.tiles = file_tiles(self.path, metadata)
        # IRs of earlier versions have no precision: fp32 (BatchDetector's default).
        precision = json.loads(metadata["zoo.precision"]) if "zoo.precision" in metadata else None
        self.image_input = IMAGE_INPUTS[self.graph_preprocessing]
        self.input_names = check_graph(self.path, Signature(model), self.image_input,
                                       self.preprocessing)
        self.compiled = core.compile_model(model, "CPU", compile_config(threads))
        self.request = self.compiled.create_infer_request()
        super().__init__(metadata_json(self.path, metadata, "zoo.class_names"),
                         self.preprocessing, exif, category_ids(self.path, metadata),
                         data_threads, precision)

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


def weights_path(path):
    """The ``.bin`` beside the IR ``path``."""
    return path[:-len(SUFFIX)] + WEIGHTS_SUFFIX


def read_model(core, path):
    """OpenVINO's model of the IR ``path``, its ``.bin`` checked against the sha256 the
    ``.xml`` records, or :class:`OnnxModelError` in one line."""
    if not path.endswith(SUFFIX):
        raise OnnxModelError("%s: not an OpenVINO IR (expected a %s file; run ONNX files "
                             "with zoo.load_onnx_detector)" % (path, SUFFIX))
    if not os.path.isfile(path):
        raise OnnxModelError("%s: no such file" % path)
    recorded = recorded_weights_sha256(path)
    weights = weights_path(path)
    if not os.path.isfile(weights):
        raise OnnxModelError("%s: its weights %s: no such file (an IR is the %s and the %s "
                             "written beside it)" % (path, weights, SUFFIX, WEIGHTS_SUFFIX))
    if recorded is not None and file_sha256(weights) != recorded:
        raise OnnxModelError("%s: not the weights %s was written with (its sha256 differs "
                             "from the one the %s records): put back its own %s, or export "
                             "again" % (weights, path, SUFFIX, WEIGHTS_SUFFIX))
    try:
        return core.read_model(path)
    except RuntimeError as err:
        raise OnnxModelError("%s: not an OpenVINO IR OpenVINO reads (%s)"
                             % (path, str(err).strip().splitlines()[0])) from None


def recorded_weights_sha256(path):
    """The ``.bin``'s sha256 the IR ``path`` records (None in an IR of an earlier
    version); :class:`OnnxModelError` for an ``.xml`` that does not parse (cut short,
    say) or a record that is no sha256. Read here, before OpenVINO reads the ``.bin``:
    another model's weights may fail OpenVINO's own checks with a message naming
    neither file."""
    try:
        root = ElementTree.parse(path).getroot()
    except ElementTree.ParseError as err:
        raise OnnxModelError("%s: not an OpenVINO IR (its XML does not parse: %s)"
                             % (path, err)) from None
    except DefusedXmlException as err:
        raise OnnxModelError("%s: not an OpenVINO IR (forbidden XML construct: %s)"
                             % (path, err)) from None
    except OSError as err:
        raise OnnxModelError("%s: cannot be read (%s)" % (path, err.strerror or err)) from None
    entry = root.find("rt_info/" + "/".join(WEIGHTS_SHA256))
    if entry is None:
        return None
    value = entry.get("value", "")
    if not re.fullmatch(r"[0-9a-f]{64}", value):
        raise OnnxModelError("%s: %s = %r: expected 64 hexadecimal digits, the sha256 of its "
                             "%s" % (path, ".".join(WEIGHTS_SHA256), value[:70], WEIGHTS_SUFFIX))
    return value


def file_sha256(path):
    with open(path, "rb") as stream:
        return hashlib.file_digest(stream, "sha256").hexdigest()


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
    metadata, ``precision`` and the ``.bin``'s sha256; returns ``path``. Needs onnx. A file
    system that refuses (disk full, no permission) is an :class:`~zoo.artifact.ArtifactError`
    naming ``path``; the staging files are removed and ``path`` is as it was."""
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
    model.set_rt_info(PENDING_SHA256, list(WEIGHTS_SHA256))
    staging = path[:-len(SUFFIX)] + ".writing" + SUFFIX
    try:
        _save(openvino, model, staging, path)
        os.replace(weights_path(staging), weights_path(path))
        os.replace(staging, path)
    except OSError as err:
        _refused(path, err.strerror or err)
    finally:
        for written in (staging, weights_path(staging)):
            if os.path.lexists(written):
                os.remove(written)
    return path


def _save(openvino, model, staging, path):
    """Write the IR ``staging`` with its ``.bin``'s sha256 recorded, flushed to disk."""
    try:
        # Weights as they are: fp32, or the int8 ones the QDQ pairs carry.
        openvino.save_model(model, staging, compress_to_fp16=False)
    except RuntimeError as err:
        # OpenVINO reports a failed write (a full disk) as its stream's error only.
        _refused(path, "OpenVINO could not write it: %s; is the disk full?"
                 % " ".join(str(err).split()))
    with open(staging, encoding="utf-8") as stream:
        text = stream.read()
    if text.count(PENDING_SHA256) != 1:
        raise ValueError("%s: OpenVINO wrote the weights' record %d times"
                         % (staging, text.count(PENDING_SHA256)))
    with open(staging, "w", encoding="utf-8") as stream:
        stream.write(text.replace(PENDING_SHA256, file_sha256(weights_path(staging))))
        stream.flush()
        os.fsync(stream.fileno())
    with open(weights_path(staging), "rb") as stream:
        os.fsync(stream.fileno())


def _refused(path, reason):
    from zoo.artifact import ArtifactError  # here: the runtime side loads no MXNet
    raise ArtifactError("%s: cannot be written (%s)" % (path, reason)) from None


def layer_precisions(compiled):
    """``[(layer, type, precision)]`` of the layers a compiled model runs, as OpenVINO's CPU
    plugin executes them (after its fusions): which run in int8 (``u8``/``i8``) and which
    in fp32 (``f32``)."""
    return [(op.get_friendly_name(), info["layerType"].astype(str),
             info["runtimePrecision"].astype(str))
            for op in compiled.get_runtime_model().get_ops() for info in [op.get_rt_info()]]
