"""The generic steps of importing a GluonCV detector: build GluonCV's network, read its
parameters, map every array onto our model by an explicit map, check it, write an artifact.

An :class:`~zoo.gluoncv.Importer` names the GluonCV model, the zoo config that equals it and
the map from GluonCV's parameter names (the Gluon block paths of its ``save_parameters``
files, ``class_predictors.0.predictor.weight``) to ours. The map reads GluonCV's arrays from a
:class:`GluonArrays`, which counts the reads: every GluonCV array must be read exactly once
and every array of ours filled with the shape our graph infers, or the import fails naming
the array.
"""
import collections.abc
import warnings
from dataclasses import dataclass

import mxnet as mx
import numpy as np

from zoo import artifact
from zoo.errors import OptionsError
from zoo.model import build_model
from zoo.config.registry import get_config

__all__ = ["GluonArrays", "GluonCVImportError", "ImportResult", "gluon_arrays", "gluon_net",
           "import_net", "our_params", "run_import", "take_backbone"]


@dataclass(frozen=True)
class ImportResult:
    prefix: str                          # the artifact written, epoch 0
    meta_path: str
    gluoncv_name: str
    config: str                          # the zoo config it was built from
    arrays: int                          # GluonCV arrays imported


class GluonCVImportError(ValueError):
    """GluonCV's network or file does not map onto the zoo model; the message is one line
    naming the GluonCV model and the arrays."""


class GluonArrays(collections.abc.Mapping):
    """GluonCV's arrays (numpy) by parameter name that count how often each is read, so
    that an import can prove it used every one exactly once. Reading a name GluonCV's
    network lacks is a :class:`GluonCVImportError` naming it."""

    def __init__(self, arrays):
        self._arrays = dict(arrays)
        self._reads = collections.Counter()
        self._names = {}

    def __getitem__(self, name):
        if name not in self._arrays:
            raise GluonCVImportError("GluonCV's network has no array %s (it has e.g. %s)"
                                     % (name, min(self._arrays)))
        array = self._arrays[name]
        self._reads[name] += 1
        self._names[id(array)] = name
        return array

    def __contains__(self, name):
        return name in self._arrays

    def __iter__(self):
        return iter(self._arrays)

    def __len__(self):
        return len(self._arrays)

    def name_of(self, array):
        """GluonCV's name of ``array`` if it is one read unchanged, else None."""
        return self._names.get(id(array))

    def misused(self):
        """``(name, reads)`` of the first array (sorted by name) not read exactly once,
        or None."""
        for name in sorted(self._arrays):
            if self._reads[name] != 1:
                return name, self._reads[name]
        return None


def gluon_net(gluoncv_name, params=None):
    """GluonCV's network ``gluoncv_name`` with the parameters of the file ``params``, or,
    without one, its trained parameters from GluonCV's own model store (downloaded on first
    use to ``~/.mxnet/models``)."""
    from gluoncv import model_zoo
    # A fresh name manager names the blocks as in a fresh process (``resnetv10_...``), the
    # names GluonCV's files were saved with, however many networks this process built.
    # GluonCV's SymbolBlocks warn that they cannot infer their input's type: it is float32.
    with mx.name.NameManager(), warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        # The backbone's ImageNet weights are never needed: every array is the detector's.
        net = model_zoo.get_model(gluoncv_name, pretrained=params is None,
                                  pretrained_base=False)
    if params is not None:
        check_parameter_file(params, gluoncv_name, net)
        try:
            net.load_parameters(params, ctx=mx.cpu())
        except (AssertionError, ValueError, mx.base.MXNetError) as err:
            raise artifact.ArtifactError("%s: not a parameter file of GluonCV's %s (%s)" % (
                params, gluoncv_name, artifact._summary(err))) from None
    return net


def check_parameter_file(params, gluoncv_name, net):
    """Refuse, before anything is written, a GluonCV parameter file whose arrays are not the
    network's (extra or missing names, each counted and one named) or hold NaN or
    infinite values (an artifact of them would be refused by every loader)."""
    try:
        arrays = mx.nd.load(params)
    except mx.base.MXNetError as err:
        raise artifact.ArtifactError("%s: not a parameter file of GluonCV's %s (%s)" % (
            params, gluoncv_name, artifact._summary(err))) from None
    if not isinstance(arrays, dict):
        raise artifact.ArtifactError("%s: holds unnamed arrays, not GluonCV's %s parameters"
                                     % (params, gluoncv_name))
    if any("." in name for name in arrays):  # save_parameters' names (not a legacy file's)
        _check_names(params, gluoncv_name, set(arrays), set(net._collect_params_with_prefix()))
    for name in sorted(arrays):
        array = arrays[name]
        if np.issubdtype(array.dtype, np.floating) and not np.isfinite(array.asnumpy()).all():
            raise GluonCVImportError("%s: %s holds NaN or infinite values; nothing was imported"
                                     % (params, name))


def _check_names(params, gluoncv_name, found, wanted):
    extra, missing = sorted(found - wanted), sorted(wanted - found)
    if extra or missing:
        raise GluonCVImportError(
            "%s: not a parameter file of GluonCV's %s: %d extra arrays (%s), %d missing "
            "(%s); nothing was imported" % (params, gluoncv_name, len(extra),
                                            ", ".join(extra[:3]) or "none", len(missing),
                                            ", ".join(missing[:3]) or "none"))


def gluon_arrays(net):
    """``{parameter name: numpy array}`` of a Gluon block, named as its
    ``save_parameters`` file names them."""
    return {name: param.data().asnumpy()
            for name, param in net._collect_params_with_prefix().items()}


def our_params(importer, model, gluon):
    """``(arg_params, aux_params)`` of ``model`` made by ``importer``'s map from ``gluon`` (a
    :class:`GluonArrays`), checked: every GluonCV array read once, every array of ours
    filled with its shape."""
    mapped = importer.map_params(gluon, model)
    arg_shapes, aux_shapes = model.param_shapes()
    wanted = dict(arg_shapes, **aux_shapes)
    misused = gluon.misused()  # checked first: an array left unread names the gap best
    if misused is not None:
        raise GluonCVImportError("%s: GluonCV's %s is read %d times by the map; every array "
                                 "must be read once"
                                 % (importer.gluoncv_name, misused[0], misused[1]))
    for name, array in mapped.items():
        if name not in wanted:
            raise GluonCVImportError("%s: the map fills %s, which %s does not have"
                                     % (importer.gluoncv_name, name, model.name))
        if tuple(array.shape) != tuple(wanted[name]):
            source = gluon.name_of(array) or "an array converted from GluonCV's"
            raise GluonCVImportError("%s: %s of shape %s is mapped onto %s of shape %s" % (
                importer.gluoncv_name, source, tuple(array.shape), name, tuple(wanted[name])))
    unfilled = sorted(set(wanted) - set(mapped))
    if unfilled:
        raise GluonCVImportError("%s: the map leaves %d arrays of %s unfilled, e.g. %s"
                                 % (importer.gluoncv_name, len(unfilled), model.name,
                                    unfilled[0]))
    arrays = {name: mx.nd.array(np.asarray(array, np.float32)) for name, array in mapped.items()}
    return ({name: arrays[name] for name in arg_shapes},
            {name: arrays[name] for name in aux_shapes})


def take_backbone(importer, net, prefix, **overrides):
    """Write into GluonCV's ``net`` the backbone arrays of the zoo artifact at ``prefix``
    (:func:`zoo.engine.finetune.backbone_from`: a trained trunk, e.g. ``make demo``'s), where
    ``importer``'s map (its config with ``overrides``) reads them from, unchanged; the import
    of ``net`` then holds them too, so that both sides of a comparison start from them.
    Returns ``(source "PREFIX-NNNN", arrays written)``."""
    from zoo.engine.finetune import backbone_from
    model = build_for(importer, net.classes, **overrides)
    arrays, source = backbone_from(model, prefix)
    gluon = GluonArrays(gluon_arrays(net))
    mapped = importer.map_params(gluon, model)
    params = net._collect_params_with_prefix()
    for ours, array in arrays.items():
        theirs = gluon.name_of(mapped.get(ours))
        if theirs is None:
            raise GluonCVImportError("%s: %s is not one of GluonCV's arrays read unchanged"
                                     % (importer.gluoncv_name, ours))
        params[theirs].set_data(array.astype(np.float32))
    return source, len(arrays)


def build_for(importer, class_names, **overrides):
    """Our model of ``importer``'s config (with ``overrides``) for GluonCV's classes
    ``class_names``."""
    return build_model(get_config(importer.config), num_classes=len(class_names),
                       class_names=list(class_names), **overrides)


def run_import(importer, output, params=None):
    """Import GluonCV's ``importer.gluoncv_name`` (the file ``params``, else GluonCV's
    trained parameters) as the artifact ``output``, epoch 0; returns an
    :class:`ImportResult`."""
    if not output:
        raise OptionsError("import-gluoncv needs an output prefix")
    net = gluon_net(importer.gluoncv_name, params)
    return import_net(importer, net, output, params or "GluonCV model store")


def import_net(importer, net, output, source, **overrides):
    """Write GluonCV's network ``net`` (built and loaded, e.g. one of another size than the
    registered one) as the artifact ``output`` of ``importer``'s config with ``overrides``;
    ``source`` says where its parameters came from (recorded in the artifact)."""
    model = build_for(importer, net.classes, **overrides)
    gluon = GluonArrays(gluon_arrays(net))
    arg_params, aux_params = our_params(importer, model, gluon)
    record = {"source": "gluoncv", "gluoncv_name": importer.gluoncv_name, "params": source,
              "dataset": importer.classes}
    meta_path = artifact.save(output, 0, model, arg_params, aux_params, training=record)
    return ImportResult(prefix=output, meta_path=meta_path, gluoncv_name=importer.gluoncv_name,
                        config=importer.config, arrays=len(gluon))
