"""Plain helpers that more than one test file uses: what the tests build (images, random
parameters, small artifacts, tiny configs, worker programs) and how they read back what a run
left (its files, a failed command's one error line). Fixtures that build these once a session
live in conftest.py and call these."""
import builtins
import errno
import hashlib
import json
import os
import re
import textwrap

import cv2
import mxnet as mx
import numpy as np
import yaml

import zoo
from symbols.backbones.mobilenet import MobileNet
from zoo import artifact

# The repository's root: tests/ stands in it.
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# -- Images ------------------------------------------------------------------------------------


def smooth_image(height, width, seed, block=8, interpolation=cv2.INTER_LINEAR):
    """Random ``block``-pixel blocks, enlarged: a BGR image with structure at several scales
    (detections on it are not all near-ties, unlike on pixel noise)."""
    rng = np.random.RandomState(seed)
    small = rng.randint(0, 256, (max(2, height // block), max(2, width // block), 3),
                        dtype=np.uint8)
    return cv2.resize(small, (width, height), interpolation=interpolation)


def random_image(height, width, seed=0):
    """A random HxWx3 uint8 RGB image."""
    return np.random.RandomState(seed).randint(0, 256, (height, width, 3), dtype=np.uint8)


# -- Parameters and artifacts ------------------------------------------------------------------

DETECT_CLASSES = ["circle", "square", "triangle", "star"]
"""The classes of :func:`spread_ssd_artifact`'s default (conftest's ``detect_prefix``)."""


def spread_ssd_model(class_names=DETECT_CLASSES, seed=0, **overrides):
    """A small SSD (``ssd_mobilenetv2_stride8`` at 128 pixels, config ``overrides``) holding
    parameters whose class scores spread and clear a 0.3 threshold: the class logits scaled up
    and each class its own random bias, so that classes differ and boxes survive (an untrained
    model's scores sit within rounding of each other)."""
    settings = dict(data_shape=128, num_classes=len(class_names), class_names=list(class_names))
    settings.update(overrides)
    model = zoo.get_model("ssd_mobilenetv2_stride8", **settings)
    arg_params, _ = model.init_params(seed=seed)
    rng = np.random.RandomState(seed)
    for name, value in arg_params.items():
        if name.endswith("_cls_weight"):
            value[:] = value * 20
        if name.endswith("_cls_bias"):
            value[:] = rng.uniform(-1, 3, value.shape)
    return model


def spread_ssd_artifact(prefix, class_names=DETECT_CLASSES, seed=0):
    """Write :func:`spread_ssd_model`'s artifact at ``prefix``; returns ``prefix``."""
    artifact.export(spread_ssd_model(class_names, seed), prefix)
    return prefix


def initialised_artifact(prefix, name, class_names, seed=0, **overrides):
    """Write registered model ``name`` for ``class_names`` (config ``overrides``), its
    parameters initialised with ``seed``, as an artifact at ``prefix``; returns ``prefix``."""
    model = zoo.get_model(name, num_classes=len(class_names), class_names=list(class_names),
                          **overrides)
    model.init_params(seed=seed)
    artifact.export(model, prefix)
    return prefix


def residual_gammas(symbol):
    """The scale parameters of the batch norms whose output is added to a residual sum."""
    nodes = json.loads(symbol.tojson())["nodes"]
    sums = [n for n in nodes if n["op"] in ("elemwise_add", "_Plus", "add_n")]
    norms = [nodes[i[0]] for n in sums for i in n["inputs"]
             if nodes[i[0]]["op"] == "BatchNorm"]
    return {nodes[n["inputs"][1][0]]["name"] for n in norms}


def plain_stack_gammas(model):
    """The scale parameters of MobileNet v1's batch norms, each before a ReLU in a stack of 27
    convolutions without a shortcut: at scale 1 the ReLUs halve the features' variance 27
    times, leaving detections the same for every image and tied across anchors."""
    if not isinstance(model.backbone, MobileNet):
        return set()
    return {name for name in model.symbol().list_arguments()
            if re.match(r"^(conv1|block\d+_(dwise|pwise))_bn_gamma$", name)}


def unit_variance_params(model, seed, class_scale=4.0, damp_residuals=True):
    """``(arg_params, aux_params)``: random parameters that keep activations near unit
    variance (He-normal weights, batch norms near identity, small random biases), the class
    logits ``class_scale`` times larger so that scores spread over (0, 1), and (with
    ``damp_residuals``) residual branches scaled down so that deep sums stay near unit variance
    too, and (:func:`plain_stack_gammas`) MobileNet v1's ReLU'd batch norms scaled up by
    sqrt(2). The zoo's training initialisation leaves an untrained detector's scores within float
    rounding of each other, so that any two runtimes or batchings may rank them differently."""
    arg_shapes, aux_shapes = model.param_shapes()
    damped = residual_gammas(model.symbol()) if damp_residuals else set()
    plain = plain_stack_gammas(model)
    rng = np.random.RandomState(seed)

    def draw(name, shape):
        if name.endswith("weight") and len(shape) >= 2:
            spread = class_scale if "_cls" in name else 1.0
            return spread * rng.randn(*shape) * np.sqrt(1.0 / np.prod(shape[1:]))
        if name in plain:
            return np.sqrt(2.0) + 0.1 * rng.randn(*shape)
        if name.endswith("gamma"):
            return (0.3 if name in damped else 1.0) + 0.1 * np.abs(rng.randn(*shape))
        if name.endswith("moving_var"):
            return 1.0 + 0.1 * np.abs(rng.randn(*shape))
        return 0.1 * rng.randn(*shape)
    return tuple({name: mx.nd.array(draw(name, shape).astype(np.float32))
                  for name, shape in sorted(shapes.items())}
                 for shapes in (arg_shapes, aux_shapes))


# -- Configs -----------------------------------------------------------------------------------

TINY_SSD = dict(data_shape=64, from_layers=["c3", ""], num_filters=[-1, 64], strides=[-1, 2],
                pads=[-1, 1], normalizations=[-1, -1], sizes=[[0.2, 0.3], [0.5, 0.7]],
                ratios=[[1, 2, 0.5], [1, 2, 0.5]], steps=None)
"""A two-map SSD on ``ssd_mobilenetv2_stride8``'s stride-8 stage at 64 pixels (150 k
parameters, 20 ms a training step, an export in a second): the fields that make it, as
``zoo.get_model`` overrides."""


def tiny_ssd_yaml(**fields):
    """The YAML config of :data:`TINY_SSD` (and ``fields``), as a user writes one: on
    ``base: ssd_mobilenetv2_stride8``, whose shape sections (steps for its five maps) it
    empties."""
    config = dict(base="ssd_mobilenetv2_stride8", **TINY_SSD, shapes={})
    config.update(fields)
    return yaml.safe_dump(config, sort_keys=False, default_flow_style=None)


# -- Worker programs ---------------------------------------------------------------------------

_PUSHPULL_LOOP = textwrap.dedent("""
    import mxnet as mx
    {join}
    kv.init("w", mx.nd.zeros((1000,)))
    gradient = mx.nd.ones((1000,))
    for step in range(10 ** 6):
        kv.pushpull("w", gradient, out=gradient)
        gradient.wait_to_read()
        if step == 10:
            print("summing", flush=True)
""")


def pushpull_loop(zoo_worker=True):
    """A ``python -c`` worker program that keeps summing gradients through the parameter
    servers until it is stopped, printing ``summing`` once it has summed a few times. It joins
    the cluster through zoo's ``create_dist_kvstore`` (``zoo_worker``: the launcher then names
    its rank, and the wait for the cluster is bounded) or through plain ``mx.kv.create``, as
    a user's own MXNet script does."""
    join = ("from zoo.distributed.cluster import create_dist_kvstore; "
            "kv = create_dist_kvstore('dist_sync')" if zoo_worker
            else "kv = mx.kv.create('dist_sync')")
    return _PUSHPULL_LOOP.format(join=join)


# -- Reading back ------------------------------------------------------------------------------

def one_error_line(capsys, command):
    """The one error line ``zoo COMMAND`` printed, checked to be alone on stderr and to come
    without a traceback."""
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    assert err.startswith("zoo %s: error: " % command), err
    return err.strip()


def tree_bytes(root):
    """Every file under ``root`` (relative path -> bytes)."""
    files = {}
    for folder, _, names in os.walk(str(root)):
        for name in names:
            path = os.path.join(folder, name)
            with open(path, "rb") as stream:
                files[os.path.relpath(path, str(root))] = stream.read()
    return files


def tree_hashes(root):
    """``{relative path: sha256}`` of every file under ``root``: compare two to tell that a
    run left a folder as it was."""
    return {path: hashlib.sha256(data).hexdigest() for path, data in tree_bytes(root).items()}


# -- Writes that fail --------------------------------------------------------------------------

FULL_DISK = OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


class FailingFile:
    """A file opened for writing that takes half of the first write, then raises ``error``:
    a disk that fills up (``FULL_DISK``), or Ctrl-C (``KeyboardInterrupt``) mid-write."""

    def __init__(self, stream, error):
        self.stream, self.error = stream, error

    def write(self, data):
        self.stream.write(data[:len(data) // 2])
        self.stream.flush()
        raise self.error

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        self.stream.close()

    def __getattr__(self, name):
        return getattr(self.stream, name)


def failing_writes(monkeypatch, error, part=""):
    """Make each file the zoo writes under a temporary name (``NAME.tmp-...``, as
    :mod:`zoo.atomicfile` and the writers before it did) whose path holds ``part`` a
    :class:`FailingFile` raising ``error``; returns the paths so opened."""
    real, opened = builtins.open, []

    def failing_open(path, mode="r", *args, **kwargs):
        stream = real(path, mode, *args, **kwargs)
        if "w" in mode and ".tmp-" in str(path) and part in str(path):
            opened.append(str(path))
            return FailingFile(stream, error)
        return stream
    monkeypatch.setattr(builtins, "open", failing_open)
    return opened
