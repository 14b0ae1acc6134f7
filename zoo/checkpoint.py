"""Checkpoints in MXNet's format, written atomically, with optimizer state.

A checkpoint of epoch N is ``PREFIX-symbol.json`` (the inference graph, so
``mx.model.load_checkpoint`` deploys it), ``PREFIX-NNNN.params``, the optimizer
state ``PREFIX-NNNN.states`` and ``PREFIX-NNNN.json`` (how to rebuild the model
and resume). A quantized checkpoint (``tools/quantize.py``) has the int8 graph
as its symbol, no optimizer state, and its calibration under ``quantization``
in the JSON. Each file is written to a temporary name and renamed; the JSON is
written last, so a checkpoint without it is incomplete and never loaded. A run
killed while saving leaves the previous checkpoint intact.
"""
import glob
import json
import os
import re

import mxnet as mx

from .config import load_config
from .model import build_model
from .registry import get_config


def atomic_write(path, write):
    """Call ``write(temporary_path)``, flush it to disk, then rename it to ``path``."""
    temporary = "%s.tmp-%d" % (path, os.getpid())
    try:
        write(temporary)
        with open(temporary, "rb") as stream:
            os.fsync(stream.fileno())
        os.replace(temporary, path)
    finally:
        if os.path.exists(temporary):
            os.remove(temporary)


def _write_bytes(data):
    def write(path):
        with open(path, "wb") as stream:
            stream.write(data)
    return write


def paths(prefix, epoch):
    """``(params, states, meta)`` file names of epoch ``epoch``."""
    stem = "%s-%04d" % (prefix, epoch)
    return stem + ".params", stem + ".states", stem + ".json"


def save(prefix, epoch, symbol, arg_params, aux_params, optimizer_states, meta):
    """Write a complete checkpoint; ``optimizer_states`` are bytes (or None)."""
    params_path, states_path, meta_path = paths(prefix, epoch)
    arrays = {"arg:" + k: v.as_in_context(mx.cpu()) for k, v in arg_params.items()}
    arrays.update({"aux:" + k: v.as_in_context(mx.cpu()) for k, v in aux_params.items()})
    atomic_write(prefix + "-symbol.json", _write_bytes(symbol.tojson().encode()))
    atomic_write(params_path, lambda path: mx.nd.save(path, arrays))
    if optimizer_states is not None:
        atomic_write(states_path, _write_bytes(optimizer_states))
    meta = dict(meta, epoch=epoch)
    atomic_write(meta_path, _write_bytes(json.dumps(meta, indent=1, sort_keys=True).encode()))


def latest_epoch(prefix):
    """The newest complete checkpoint's epoch, or None."""
    epochs = []
    for meta_path in glob.glob(glob.escape(prefix) + "-[0-9][0-9][0-9][0-9].json"):
        epoch = int(re.search(r"-(\d{4})\.json$", meta_path).group(1))
        if os.path.exists(paths(prefix, epoch)[0]):
            epochs.append(epoch)
    return max(epochs) if epochs else None


def load(prefix, epoch=None):
    """``(arg_params, aux_params, optimizer_states or None, meta)`` of a checkpoint
    (the newest complete one if ``epoch`` is None)."""
    if epoch is None:
        epoch = latest_epoch(prefix)
        if epoch is None:
            raise FileNotFoundError("no complete checkpoint %s-NNNN.params/.json" % prefix)
    params_path, states_path, meta_path = paths(prefix, epoch)
    with open(meta_path) as stream:
        meta = json.load(stream)
    arg_params, aux_params = load_params(params_path)
    states = None
    if os.path.exists(states_path):
        with open(states_path, "rb") as stream:
            states = stream.read()
    return arg_params, aux_params, states, meta


def load_params(path):
    """``(arg_params, aux_params)`` of an MXNet ``.params`` file."""
    saved = mx.nd.load(path)
    arg_params = {k[4:]: v for k, v in saved.items() if k.startswith("arg:")}
    aux_params = {k[4:]: v for k, v in saved.items() if k.startswith("aux:")}
    return arg_params, aux_params


def load_symbol(prefix):
    """The inference graph a checkpoint deploys (fp32, or int8 if quantized)."""
    path = prefix + "-symbol.json"
    if not os.path.exists(path):
        raise FileNotFoundError("no inference graph %s" % path)
    return mx.sym.load(path)


def load_model(prefix, epoch=None):
    """Rebuild a trained model from its checkpoint: ``(model, arg_params, aux_params, meta)``.

    The metadata names the network (a registered name or a YAML path) and the
    overrides it was trained with (classes, data shape, ...).
    """
    arg_params, aux_params, _, meta = load(prefix, epoch)
    network = meta["network"]
    config = load_config(network) if os.path.exists(network) else get_config(network)
    model = build_model(config, **meta.get("overrides", {}))
    model.arg_params, model.aux_params = arg_params, aux_params
    return model, arg_params, aux_params, meta
