"""Model artifacts, format 2: self-describing, written atomically, read without pickle.

The files of epoch N:

- ``PREFIX-symbol.json``: the deployed inference graph (fused for MKL-DNN, or int8, or
  bf16), so ``mx.model.load_checkpoint`` runs it too;
- ``PREFIX-NNNN-symbol.json`` (int8 and bf16 only): the epoch's own graph, which carries its
  calibration (int8), so quantizing another epoch into the prefix never changes this one's
  meaning;
- ``PREFIX-NNNN.params``: parameters (``arg:``/``aux:`` names, MXNet's binary format; a
  bf16 artifact's layer weights in bfloat16);
- ``PREFIX-NNNN.states`` and ``PREFIX-NNNN.states.json`` (training only): the optimizer's
  arrays in MXNet's binary NDArray format and their structure and update counts;
- ``PREFIX-NNNN.json``, written last: the format version, the zoo version, the fully
  resolved config the model is rebuilt from, class names (and the COCO category ids of a
  model trained on a COCO file, else null), preprocessing, precision, the best validation
  record, the training options, the tiles the model was trained on (``{"size", "overlap"}``,
  null for whole photos; :mod:`zoo.inference.tiles`) and the sha256 of the parameter file,
  of the graph and of the class-name list (checked on loading; an artifact saved before
  the class names had theirs loads unchecked, its names made safe wherever they name a
  file, :mod:`zoo.filenames`).

An epoch without its JSON is incomplete and never loaded; each file is written to a
temporary name and renamed, so a save killed half-way leaves the previous epochs intact.
Loading never reads the model registry or a YAML file, so an artifact means what it meant
when it was written, whatever the config code or the files around it become since.
"""
import collections
import glob
import hashlib
import json
import os
import re
from dataclasses import dataclass

import mxnet as mx
import numpy as np
from mxnet.contrib.amp.amp import bfloat16

from zoo import atomicfile, predictor as deploy
from zoo.version import __version__
from zoo.errors import ConfigError
from zoo.config.loading import class_names
from zoo.process import running
from zoo.schema.checks import repeated
from zoo.model import DetectionModel, build_model

__all__ = ["Artifact", "ArtifactError", "FORMAT_VERSION", "OptimizerState", "PRECISIONS",
           "atomic_write", "best_epoch", "class_names", "clean_temporary_files", "default_epoch",
           "epoch_files", "epochs", "export", "fp32_only", "latest_epoch", "load",
           "load_optimizer_state", "names_sha256", "prune", "read_json", "read_meta",
           "read_params", "read_symbol", "save", "source_name"]

FORMAT_VERSION = 2
PRECISIONS = ("fp32", "int8", "bf16")
"""An artifact's ``precision["dtype"]``: as trained, or made from an fp32 artifact for
inference by ``zoo quantize`` (int8 calibrated, or bf16), whose graph runs as it is."""
_CHUNK = 1 << 20


class ArtifactError(ValueError):
    """An artifact file is missing, damaged or of another format; the message is one line
    naming the file."""


EpochFiles = collections.namedtuple("EpochFiles", "params meta states states_meta graph")


def epoch_files(prefix, epoch):
    """The file names of epoch ``epoch``: ``params``, ``meta``, ``states``, ``states_meta``
    and ``graph`` (an int8 or bf16 epoch's own graph)."""
    stem = "%s-%04d" % (prefix, epoch)
    return EpochFiles(stem + ".params", stem + ".json", stem + ".states", stem + ".states.json",
                      stem + "-symbol.json")


def symbol_path(prefix):
    return prefix + "-symbol.json"


@dataclass
class OptimizerState:
    """An optimizer's per-parameter arrays (name -> NDArray, for ``mx.nd.save``) and the
    JSON-able rest: optimizer class, settings, update counts and each state's structure."""
    arrays: dict
    info: dict


@dataclass(frozen=True)
class Artifact:
    """A loaded artifact: the model rebuilt from its stored config, the deployed graph
    (fp32, int8 or bf16) and its parameters, and the metadata. An int8 or bf16 artifact's
    parameters are its converted graph's (int8, or bfloat16 layer weights): run them with
    ``symbol``, not ``model.symbol()``."""
    prefix: str
    epoch: int
    model: DetectionModel
    symbol: mx.sym.Symbol
    arg_params: dict
    aux_params: dict
    meta: dict

    @property
    def class_names(self):
        return self.meta["class_names"]

    @property
    def category_ids(self):
        """The COCO category id of each class (a model trained on a COCO file records the
        file's), or None: COCO results then number the classes from 1."""
        return self.meta.get("category_ids")

    @property
    def preprocessing(self):
        """``{"mean", "std", "resize", "data_shape"}`` the graph expects its input made with."""
        return self.meta["preprocessing"]

    @property
    def precision(self):
        """``{"dtype": "fp32"}``, ``{"dtype": "int8", "calibration": {...}}`` or
        ``{"dtype": "bf16", "source": "PREFIX-NNNN", "order": ..., "bf16_layers": ...}``."""
        return self.meta["precision"]

    @property
    def tiles(self):
        """``{"size", "overlap"}`` of the tiles the model was trained on (``zoo train
        --tiles``), which ``zoo detect`` runs by default; None: whole photos (or an artifact
        from before tiles were recorded)."""
        return self.meta.get("tiles")

    @property
    def is_int8(self):
        return self.precision["dtype"] == "int8"

    @property
    def name(self):
        """``PREFIX-NNNN``, as messages name an epoch."""
        return "%s-%04d" % (self.prefix, self.epoch)


def source_name(precision):
    """``PREFIX-NNNN`` of the fp32 artifact an int8 or bf16 one was made from, or None (an
    fp32 one, or one that does not record it)."""
    if precision.get("dtype") == "int8":
        return (precision.get("calibration") or {}).get("source")
    return precision.get("source")


def fp32_only(name, precision, action):
    """The one-line refusal to ``action`` (e.g. "export") the int8 or bf16 artifact ``name``
    whose ``precision`` is given, naming the fp32 artifact to use instead; None for an fp32
    one. What trains or exports needs the fp32 graph and weights, which these no longer
    hold."""
    dtype = precision.get("dtype")
    if dtype == "fp32":
        return None
    return "%s is %s %s artifact, which runs on MXNet's MKL-DNN only: %s %s" % (
        name, "an" if dtype[0] in "aeiou" else "a", dtype, action, _made_from(precision))


def _made_from(precision):
    """How a refusal names the fp32 artifact to use instead of an int8 or bf16 one."""
    source = source_name(precision)
    return "the fp32 artifact it was made from" + (" (%s)" % source if source else "")


# Writing

def atomic_write(path, write):
    """:func:`zoo.atomicfile.atomic_write`, flushed to disk, whose refusals by the file
    system (disk full, no permission) are an :class:`ArtifactError` naming ``path``;
    ``path`` is then as it was and no temporary file is left."""
    try:
        atomicfile.atomic_write(path, write)
    except OSError as err:
        raise ArtifactError("%s: cannot be written (%s)" % (path, err.strerror or err)) from None
    except mx.base.MXNetError as err:
        # mx.nd.save reports a failed write as an MXNetError.
        raise ArtifactError("%s: cannot be written (%s)" % (path, _summary(err))) from None


def _write_json(value):
    return atomicfile.bytes_writer(json.dumps(value, indent=1, sort_keys=True).encode())


def _remove(*paths):
    for path in paths:
        if os.path.exists(path):
            os.remove(path)


def _sha256(path):
    digest = hashlib.sha256()
    with open(path, "rb") as stream:
        for chunk in iter(lambda: stream.read(_CHUNK), b""):
            digest.update(chunk)
    return digest.hexdigest()


def save(prefix, epoch, model, arg_params, aux_params, *, symbol=None, precision=None,
         best=None, training=None, optimizer_state=None, preprocessing=None, tiles=None):
    """Write epoch ``epoch`` of the artifact at ``prefix``; returns the metadata's path.

    ``symbol``: the graph to deploy (default: the model's inference graph fused for
    MKL-DNN). ``precision``: ``{"dtype": "fp32"}`` (default), ``{"dtype": "int8",
    "calibration": {...}}`` or ``{"dtype": "bf16", ...}`` (see :attr:`Artifact.precision`).
    ``best``: ``{"epoch", "metric", "value"}`` of the best validation so far, or None.
    ``training``: the JSON-able training options. ``optimizer_state``: a
    :class:`OptimizerState` or None. ``preprocessing``: how images become inputs, default
    the model's; an artifact derived from another (e.g. quantized) passes its source's, so a
    model trained on stretched images stays stretched. ``tiles``: ``{"size", "overlap"}`` of
    the tiles the model was trained on (:attr:`Artifact.tiles`), None for whole photos; a
    derived artifact passes its source's.
    """
    precision = precision or {"dtype": "fp32"}
    if precision.get("dtype") not in PRECISIONS:
        raise ValueError("precision %r: its dtype must be one of %s"
                         % (precision, ", ".join(PRECISIONS)))
    files = epoch_files(prefix, epoch)
    os.makedirs(os.path.dirname(os.path.abspath(prefix)), exist_ok=True)
    # Rewriting an epoch: it is incomplete until its new metadata is written.
    _remove(files.meta)
    symbol = deploy.fuse(model.symbol()) if symbol is None else symbol
    arrays = {"arg:" + k: v.as_in_context(mx.cpu()) for k, v in arg_params.items()}
    arrays.update({"aux:" + k: v.as_in_context(mx.cpu()) for k, v in aux_params.items()})
    config = model.config
    # A bf16 graph's casts are part of it (MXNet's tojson drops them by default).
    graph = symbol.tojson(remove_amp_cast=False).encode()
    own_graph = precision["dtype"] != "fp32"
    check_shared_graph(prefix, epoch, hashlib.sha256(graph).hexdigest())
    try:
        _save_graph(prefix, files, graph, own_graph)
        atomic_write(files.params, lambda path: mx.nd.save(path, arrays))
        _save_optimizer_state(files, optimizer_state)
        meta = {"format": FORMAT_VERSION, "zoo_version": __version__, "epoch": epoch,
                "config": config, "class_names": class_names(config),
                "category_ids": config.get("category_ids"),
                "preprocessing": preprocessing or model.preprocessing(), "precision": precision,
                "best": best, "params_sha256": _sha256(files.params),
                "class_names_sha256": names_sha256(class_names(config)),
                "graph": os.path.basename(files.graph if own_graph else symbol_path(prefix)),
                "graph_sha256": hashlib.sha256(graph).hexdigest(), "training": training,
                "tiles": tiles}
        atomic_write(files.meta, _write_json(meta))
    except ArtifactError:
        # An incomplete epoch is never loaded: give its space back (the disk may be full).
        _remove(files.params, files.states, files.states_meta, files.graph)
        raise
    return files.meta


def check_shared_graph(prefix, epoch, sha256):
    """Refuse to replace ``PREFIX-symbol.json`` by another graph while another epoch runs
    with it (its JSON records the graph's sha256): that epoch would change meaning."""
    shared = os.path.basename(symbol_path(prefix))
    for other in epochs(prefix):
        path = epoch_files(prefix, other).meta
        try:
            meta = read_json(path)
        except ArtifactError:
            continue  # a damaged epoch has no meaning to keep
        if other != epoch and meta.get("graph") == shared and \
                meta.get("graph_sha256") not in (None, sha256):
            raise ArtifactError("%s: epoch %d runs with another graph (%s records its sha256); "
                                "writing epoch %d there would change what it computes: choose "
                                "another prefix" % (prefix, other, path, epoch))


def _save_graph(prefix, files, graph, own_graph):
    """The shared graph (what ``mx.model.load_checkpoint`` reads) and, for an int8 or bf16
    epoch, its own copy, which the epoch's metadata names."""
    if own_graph:
        atomic_write(files.graph, atomicfile.bytes_writer(graph))
    else:
        _remove(files.graph)
    atomic_write(symbol_path(prefix), atomicfile.bytes_writer(graph))


def _save_optimizer_state(files, state):
    if state is None:
        # A state left by an earlier save of this epoch belongs to other parameters.
        _remove(files.states_meta, files.states)
        return
    atomic_write(files.states, lambda path: mx.nd.save(path, state.arrays))
    info = dict(state.info, format=FORMAT_VERSION, states_sha256=_sha256(files.states))
    atomic_write(files.states_meta, _write_json(info))


# Finding epochs

def epochs(prefix):
    """The complete epochs (metadata and parameters present), oldest first."""
    found = []
    for path in glob.glob(glob.escape(prefix) + "-[0-9][0-9][0-9][0-9].json"):
        epoch = int(path[-9:-5])
        if os.path.exists(epoch_files(prefix, epoch).params):
            found.append(epoch)
    return sorted(found)


def latest_epoch(prefix):
    """The newest complete epoch, or None."""
    complete = epochs(prefix)
    return complete[-1] if complete else None


def best_epoch(prefix):
    """The best validation epoch the newest complete epoch records, if it is still
    there; else None."""
    complete = epochs(prefix)
    if not complete:
        return None
    best = read_meta(prefix, complete[-1]).get("best")
    return best["epoch"] if best and best["epoch"] in complete else None


def default_epoch(prefix):
    """The epoch a reader of ``prefix`` gets unless it names one: the best validated, else
    the newest; :class:`ArtifactError` for no complete epoch."""
    epoch = best_epoch(prefix)
    if epoch is None:
        epoch = latest_epoch(prefix)
    if epoch is None:
        raise ArtifactError("no complete artifact %s-NNNN.params/.json" % prefix)
    return epoch


# Reading

def _summary(error):
    """MXNet's error text is a C++ traceback: its last line says what failed."""
    lines = str(error).strip().splitlines()
    return lines[-1].replace("MXNetError: ", "") if lines else type(error).__name__


def _read_bytes(path):
    try:
        with open(path, "rb") as stream:
            return stream.read()
    except FileNotFoundError:
        raise ArtifactError("%s: not found" % path) from None
    except OSError as err:
        raise ArtifactError("%s: cannot be read (%s)" % (path, err.strerror)) from None


def _parse_json(path, data):
    try:
        value = json.loads(data.decode("utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise ArtifactError("%s: not valid JSON (%s)" % (path, _summary(err))) from None
    if not isinstance(value, dict):
        raise ArtifactError("%s: not a JSON object" % path)
    return value


def read_json(path):
    return _parse_json(path, _read_bytes(path))


def _check_format(path, meta, prefix, fields):
    if "format" not in meta and "network" in meta:
        raise ArtifactError("%s is a format-1 checkpoint; convert it with: zoo convert "
                            "--checkpoint %s"
                            % (path, prefix))
    if meta.get("format") != FORMAT_VERSION:
        raise ArtifactError("%s: artifact format %r; zoo %s reads format %d"
                            % (path, meta.get("format"), __version__, FORMAT_VERSION))
    missing = [field for field in fields if field not in meta]
    if missing:
        raise ArtifactError("%s: no %r field" % (path, missing[0]))


def read_meta(prefix, epoch):
    """The metadata of epoch ``epoch`` (format and field types checked), without loading
    anything else."""
    path = epoch_files(prefix, epoch).meta
    if not os.path.exists(path):
        raise ArtifactError("%s: no epoch %d (complete epochs: %s)" % (
            prefix, epoch, ", ".join(map(str, epochs(prefix))) or "none"))
    meta = read_json(path)
    _check_format(path, meta, prefix, ("epoch", "config", "class_names", "preprocessing",
                                       "precision", "params_sha256"))
    _check_meta(path, meta, epoch)
    _check_names_sha256(path, meta)
    return meta


def names_sha256(names):
    """The sha256 of a class-name list as an artifact records it (its JSON, ASCII)."""
    return hashlib.sha256(json.dumps(list(names)).encode("ascii")).hexdigest()


def _check_names_sha256(path, meta):
    """Refuse class names changed since they were saved: they name the model's outputs and
    the files ``zoo detect`` writes, as the parameters are covered by theirs."""
    recorded = meta.get("class_names_sha256")
    if recorded is None:  # saved before class names had a sha256
        return
    if recorded != names_sha256(meta["class_names"]):
        raise ArtifactError("%s: class_names changed since it was saved (their sha256 differs "
                            "from the class_names_sha256 recorded there); restore the file, "
                            "or train onto other names with zoo train --init-from" % path)


def _is_names(value):
    return isinstance(value, list) and all(isinstance(name, str) for name in value)


def _is_category_ids(value, names):
    return value is None or (isinstance(value, list) and isinstance(names, list)
                             and len(value) == len(names) and all(type(v) is int for v in value))


def _check_meta(path, meta, epoch):
    """Refuse metadata whose fields have the wrong type (a hand-edited or damaged file)."""
    precision, best = meta["precision"], meta["best"] if "best" in meta else None
    checks = [
        ("epoch", meta["epoch"] == epoch and type(meta["epoch"]) is int, "%d" % epoch),
        ("config", isinstance(meta["config"], dict), "an object"),
        ("class_names", _is_names(meta["class_names"]) and len(meta["class_names"]) > 0
         and not repeated(meta["class_names"]), "a list of class names, none repeated"),
        ("category_ids", _is_category_ids(meta.get("category_ids"), meta["class_names"]),
         "null or one integer per class name"),
        ("preprocessing", isinstance(meta["preprocessing"], dict)
         and {"mean", "std", "data_shape"} <= set(meta["preprocessing"]),
         "an object with mean, std and data_shape"),
        ("precision", isinstance(precision, dict) and precision.get("dtype") in PRECISIONS,
         "an object whose dtype is 'fp32', 'int8' or 'bf16'"),
        ("params_sha256", isinstance(meta["params_sha256"], str)
         and re.fullmatch(r"[0-9a-f]{64}", meta["params_sha256"]) is not None,
         "64 hexadecimal digits"),
        ("best", best is None or (isinstance(best, dict) and type(best.get("epoch")) is int),
         "null or an object with an integer epoch")]
    for field, good, expected in checks:
        if not good:
            raise ArtifactError("%s: %s = %s: expected %s" % (
                path, field, _shorten(json.dumps(meta[field])), expected))


def _shorten(text, limit=60):
    return text if len(text) <= limit else text[:limit - 3] + "..."


def _read_arrays(path, sha256, record):
    """The named arrays of an MXNet array file whose bytes must hash to ``sha256`` (None:
    unchecked), as the JSON file ``record`` says."""
    data = _read_bytes(path)
    if sha256 is not None and hashlib.sha256(data).hexdigest() != sha256:
        raise ArtifactError("%s: damaged or changed since it was saved (its sha256 differs "
                            "from the one %s records)" % (path, record))
    try:
        arrays = mx.nd.load_frombuffer(data)
    except mx.base.MXNetError as err:
        raise ArtifactError("%s: not an MXNet array file (%s)" % (path, _summary(err))) from None
    if not isinstance(arrays, dict):
        raise ArtifactError("%s: holds unnamed arrays" % path)
    return arrays


def read_params(path, sha256=None, record=None):
    """``(arg_params, aux_params)`` of a parameter file (see :func:`_read_arrays`) whose
    floating-point arrays must be finite."""
    saved = _read_arrays(path, sha256, record)
    _check_finite(path, saved)
    arg_params = {k[4:]: v for k, v in saved.items() if k.startswith("arg:")}
    aux_params = {k[4:]: v for k, v in saved.items() if k.startswith("aux:")}
    return arg_params, aux_params


def _check_finite(path, arrays):
    for name, array in arrays.items():
        if array.dtype == bfloat16:  # a bf16 artifact's weights: numpy has no bfloat16
            array = array.astype(np.float32)
        if np.issubdtype(array.dtype, np.floating) and not np.isfinite(array.asnumpy()).all():
            raise ArtifactError("%s: %s holds NaN or infinite values" % (path, name))


def read_symbol(prefix, path=None, sha256=None, record=None):
    """The graph of the file ``path`` (default the shared ``PREFIX-symbol.json``), whose bytes
    must hash to ``sha256`` (None: unchecked), as the JSON file ``record`` says."""
    path = path or symbol_path(prefix)
    data = _read_bytes(path)
    # Parsed here first: MXNet's own error for a truncated graph is not even UTF-8.
    _parse_json(path, data)
    try:
        symbol = mx.sym.load_json(data.decode("utf-8"))
    except mx.base.MXNetError as err:
        raise ArtifactError("%s: not an MXNet graph (%s)" % (path, _summary(err))) from None
    # After parsing: a damaged file is named as damaged, a valid other graph as other.
    if sha256 is not None and hashlib.sha256(data).hexdigest() != sha256:
        raise ArtifactError("%s: not the graph %s was saved with (its sha256 differs from the "
                            "one recorded there)" % (path, record))
    return symbol


def load(prefix, epoch=None, ctx=None):
    """The :class:`Artifact` of epoch ``epoch`` (None: the best validation epoch recorded,
    else the newest complete one), its parameters on ``ctx`` (default CPU).

    Raises :class:`ArtifactError` (one line naming the file) for a missing, damaged,
    non-finite or format-1 file, and for a bf16 artifact where ``ctx`` has no native
    bfloat16 (:func:`zoo.predictor.bf16_unavailable`).
    """
    epoch = default_epoch(prefix) if epoch is None else epoch
    files = epoch_files(prefix, epoch)
    meta = read_meta(prefix, epoch)
    ctx = ctx or mx.cpu()
    _check_runs_here(prefix, epoch, meta["precision"], ctx)
    arg_params, aux_params = read_params(files.params, meta["params_sha256"], files.meta)
    symbol = read_symbol(prefix, _graph_path(prefix, files, meta), meta.get("graph_sha256"),
                         files.meta)
    arg_params = {k: v.as_in_context(ctx) for k, v in arg_params.items()}
    aux_params = {k: v.as_in_context(ctx) for k, v in aux_params.items()}
    model = _stored_model(files.meta, meta)
    if meta["precision"]["dtype"] != "int8":
        # An int8 graph's parameters are its own (quantized) ones, checked by binding it; a
        # bf16 one's keep the fp32 names and shapes.
        check_params_fit(files, model, arg_params, aux_params)
    model.arg_params, model.aux_params = arg_params, aux_params
    return Artifact(prefix=prefix, epoch=epoch, model=model, symbol=symbol,
                    arg_params=arg_params, aux_params=aux_params, meta=meta)


def _check_runs_here(prefix, epoch, precision, ctx):
    """Refuse a bf16 artifact where bfloat16 is not native: MXNet would emulate it, slower
    than the fp32 artifact it was made from."""
    if precision["dtype"] != "bf16":
        return
    reason = deploy.bf16_unavailable("cpu" if ctx.device_type == "cpu" else str(ctx))
    if reason:
        raise ArtifactError("%s-%04d is a bf16 artifact and %s: run %s"
                            % (prefix, epoch, reason, _made_from(precision)))


def _graph_path(prefix, files, meta):
    """The graph file the metadata names: its own epoch's, or the shared one (an artifact
    saved before graphs were recorded names none)."""
    name = meta.get("graph", os.path.basename(symbol_path(prefix)))
    choices = {os.path.basename(files.graph): files.graph,
               os.path.basename(symbol_path(prefix)): symbol_path(prefix)}
    if name not in choices:
        raise ArtifactError("%s: graph = %s: expected %s" % (
            files.meta, _shorten(json.dumps(name)), " or ".join(sorted(choices))))
    return choices[name]


def check_params_fit(files, model, arg_params, aux_params):
    """Raise unless the parameters are, by name and shape, those of the model the stored
    config builds (a config edited to another network would otherwise run the old graph
    under the new name, or fail deep in MXNet)."""
    wanted_args, wanted_aux = model.param_shapes()
    for kind, wanted, have in (("arg", wanted_args, arg_params), ("aux", wanted_aux, aux_params)):
        fault = _misfit(wanted, {name: tuple(v.shape) for name, v in have.items()})
        if fault:
            raise ArtifactError("%s: its stored config (network %s) does not fit %s: %s %s" % (
                files.meta, model.name, files.params, kind, fault))


def _misfit(wanted, have):
    """What differs between two ``{name: shape}``: missing, extra or reshaped names."""
    missing, extra = sorted(set(wanted) - set(have)), sorted(set(have) - set(wanted))
    if missing or extra:
        return "names differ (%d the config's graph needs are missing, e.g. %s; %d are extra, " \
               "e.g. %s)" % (len(missing), missing[0] if missing else "-", len(extra),
                             extra[0] if extra else "-")
    reshaped = sorted(name for name in wanted if tuple(wanted[name]) != have[name])
    if reshaped:
        return "%s has shape %s, the config's graph needs %s" % (
            reshaped[0], have[reshaped[0]], tuple(wanted[reshaped[0]]))
    return None


def _stored_model(path, meta):
    """The model of the config ``meta`` stores, whose classes must be its class names."""
    try:
        model = build_model(meta["config"])
    except ConfigError as err:
        raise ArtifactError("%s: its stored config is refused: %s" % (path, err)) from None
    if class_names(model.config) != meta["class_names"]:
        raise ArtifactError("%s: class_names %s are not its config's %s" % (
            path, _shorten(json.dumps(meta["class_names"])), class_names(model.config)))
    if model.config.get("category_ids") != meta.get("category_ids"):
        raise ArtifactError("%s: category_ids %s are not its config's %s" % (
            path, json.dumps(meta.get("category_ids")), model.config.get("category_ids")))
    return model


def load_optimizer_state(prefix, epoch):
    """The :class:`OptimizerState` saved with epoch ``epoch``,
    or None if it has none. Reads MXNet's binary NDArray format and JSON only: a pickled
    (format-1) ``.states`` file is refused, never unpickled."""
    files = epoch_files(prefix, epoch)
    if not os.path.exists(files.states_meta):
        if os.path.exists(files.states):
            raise ArtifactError("%s: an optimizer state without %s (a format-1 pickle, which "
                                "the zoo never unpickles)" % (files.states, files.states_meta))
        return None
    info = read_json(files.states_meta)
    _check_format(files.states_meta, info, prefix,
                  ("settings", "num_update", "parameters", "states_sha256"))
    arrays = _read_arrays(files.states, info["states_sha256"], files.states_meta)
    info = {k: v for k, v in info.items() if k not in ("format", "states_sha256")}
    return OptimizerState(arrays=arrays, info=info)


# Housekeeping

def prune(prefix, keep_last, keep=()):
    """Remove every complete epoch but the newest ``keep_last``, those in ``keep`` and the
    best validation epoch; returns the removed epochs."""
    if keep_last < 0:
        raise ValueError("keep_last must be >= 0, got %d" % keep_last)
    complete = epochs(prefix)
    kept = set(complete[max(len(complete) - keep_last, 0):]) | set(keep) | {best_epoch(prefix)}
    removed = [epoch for epoch in complete if epoch not in kept]
    for epoch in removed:
        files = epoch_files(prefix, epoch)
        # Metadata first: killed half-way, an epoch is incomplete rather than broken.
        _remove(files.meta, files.params, files.states_meta, files.states, files.graph)
    return removed


# ``.tmp-PID-N`` (:mod:`zoo.atomicfile`), or ``.tmp-PID``, the name before ``-N`` was added.
_TEMPORARY = re.compile(r"-(symbol\.json|\d{4}-symbol\.json|"
                        r"\d{4}\.(params|json|states|states\.json))\.tmp-(\d+)(-\d+)?$")


def clean_temporary_files(prefix):
    """Remove the temporary files a killed save left (``PREFIX-*.tmp-PID-N`` of a process
    that no longer runs); returns their paths."""
    removed = []
    for path in glob.glob(glob.escape(prefix) + "-*.tmp-*"):
        match = _TEMPORARY.fullmatch(path[len(prefix):])
        if match and not running(int(match.group(3))):
            os.remove(path)
            removed.append(path)
    return sorted(removed)


# Format 1


def export(model, prefix, epoch=0, fused=True):
    """Write epoch ``epoch`` of a complete artifact of ``model`` (initialising its parameters
    first if none are set), which :func:`load` reads. Returns the graph's and the
    parameters' paths.

    ``fused`` writes the graph with MKL-DNN's fused operators (see :mod:`zoo.predictor`),
    which loads only in MXNet builds with MKL-DNN; ``fused=False`` writes the portable
    graph (e.g. for GPUs)."""
    if model.arg_params is None:
        model.init_params()
    symbol = deploy.fuse(model.symbol()) if fused else model.symbol()
    save(prefix, epoch, model, model.arg_params, model.aux_params, symbol=symbol)
    return symbol_path(prefix), epoch_files(prefix, epoch).params
