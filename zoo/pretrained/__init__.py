"""Import GluonCV's ImageNet classifier parameters into our backbones.

GluonCV's ``save_parameters`` files key arrays by the Gluon block path
(``layer3.5.conv2.weight``); each backbone supplies an explicit map from our
layer names to those keys, and every mapped array is shape-checked.
"""
import glob
import os

import mxnet as mx

from zoo.errors import PretrainedNotFound
from zoo.pretrained import maps

__all__ = ["PretrainedNotFound", "find_gluoncv_file", "import_gluoncv_params", "maps"]


def model_store_dir():
    """Where GluonCV keeps downloaded weights: ``$MXNET_HOME/models`` or ``~/.mxnet/models``."""
    root = os.environ.get("MXNET_HOME", os.path.join(os.path.expanduser("~"), ".mxnet"))
    return os.path.join(root, "models")


def find_gluoncv_file(gluoncv_name, root=None):
    """Path of GluonCV's file for ``gluoncv_name`` (``NAME.params`` or ``NAME-HASH.params``)."""
    root = root or model_store_dir()
    candidates = sorted(glob.glob(os.path.join(root, gluoncv_name + ".params"))
                        + glob.glob(os.path.join(root, gluoncv_name + "-*.params")))
    if not candidates:
        raise PretrainedNotFound(
            "no pretrained weights for %s: put GluonCV's %s-<hash>.params (from "
            "gluoncv.model_zoo.get_model(%r, pretrained=True) on a machine with internet) in %s"
            % (gluoncv_name, gluoncv_name, gluoncv_name, root))
    return candidates[-1]


def import_gluoncv_params(backbone, path, arg_shapes=None, aux_shapes=None,
                          include_classifier=False):
    """Read a GluonCV parameter file and return ``(arg_params, aux_params)`` in our names.

    ``arg_shapes``/``aux_shapes`` (our name -> shape) restrict the result to the
    parameters a symbol uses and check every shape; without them every mapped
    parameter is returned. The classifier's ``fc`` layer is dropped unless
    ``include_classifier``.
    """
    saved = mx.nd.load(path)
    mapping = maps.param_map(backbone)
    missing = sorted(set(mapping.values()) - set(saved))
    if missing:
        raise ValueError("%s is not a %s parameter file: %d expected keys missing, e.g. %s"
                         % (path, maps.gluoncv_name(backbone), len(missing), missing[0]))
    arg_params, aux_params = {}, {}
    for ours, theirs in mapping.items():
        if ours.startswith("fc_") and not include_classifier:
            continue
        is_aux = ours.endswith("_moving_mean") or ours.endswith("_moving_var")
        wanted = aux_shapes if is_aux else arg_shapes
        if wanted is not None:
            if ours not in wanted:
                continue
            if tuple(wanted[ours]) != saved[theirs].shape:
                raise ValueError("%s: %s has shape %s in %s but %s in the model"
                                 % (backbone.name, theirs, saved[theirs].shape, path,
                                    tuple(wanted[ours])))
        (aux_params if is_aux else arg_params)[ours] = saved[theirs]
    return arg_params, aux_params
