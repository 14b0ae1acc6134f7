"""Fine-tuning: a new training run whose parameters start from another artifact's, a trained
one or one imported from GluonCV, for the new run's own classes.

Every array whose name and shape match is copied. The class-dependent arrays (SSD's class
heads, Faster R-CNN's class scores and its per-class box deltas) are taken class by class,
as GluonCV's ``reset_class(classes, reuse_weights=shared names)`` takes them: the
background rows, and the rows of every class whose name both class lists share, come from
the source; the rows of a new class start from the model's own initialiser. The source
must be of the same architecture on the same backbone, in fp32; anything else is refused
in one line. :func:`init_from` returns the parameters and an :class:`InitSummary` whose
:meth:`~InitSummary.line` says what was copied, mapped and reset.
"""
import re
from dataclasses import dataclass
from typing import Tuple

import mxnet as mx

from zoo import artifact
from zoo.errors import OptionsError

__all__ = ["InitSummary", "backbone_from", "init_from", "source_config"]


@dataclass(frozen=True)
class InitSummary:
    """What :func:`init_from` took from ``source`` (``PREFIX-NNNN``)."""
    source: str
    copied: int                          # arrays copied whole
    mapped: int                          # class-dependent arrays taken class by class
    reset: Tuple[str, ...]               # other arrays that start afresh (no match)
    shared: Tuple[str, ...]              # class names both lists share
    new: Tuple[str, ...]                 # this run's classes the source lacks

    def line(self):
        """The one-line summary a run logs."""
        text = ("init from %s: %d arrays copied, %d mapped class by class (background and "
                "%d shared of %d classes%s), %d reset"
                % (self.source, self.copied, self.mapped, len(self.shared),
                   len(self.shared) + len(self.new),
                   "; new: " + ", ".join(self.new) if self.new else "", len(self.reset)))
        return text + (" (%s)" % ", ".join(self.reset[:3]) if self.reset else "")


def _source(prefix, epoch):
    """``(meta, "PREFIX-NNNN")`` of the artifact to start from (``epoch`` None: its best
    validated, else newest epoch)."""
    epoch = artifact.default_epoch(prefix) if epoch is None else epoch
    return artifact.read_meta(prefix, epoch), "%s-%04d" % (prefix, epoch)


def source_config(prefix, epoch=None):
    """The config the artifact at ``prefix`` stores: a fine-tuning run builds its model from
    it when it names no other."""
    return _source(prefix, epoch)[0]["config"]


def _check_source(meta, name, model):
    """Refuse an int8 or bf16 source or one of another architecture or backbone, in one
    line."""
    refusal = artifact.fp32_only(name, meta["precision"], "fine-tune from")
    if refusal:
        raise OptionsError("init_from " + refusal)
    theirs = meta["config"].get("arch"), meta["config"].get("backbone")
    ours = model.spec["arch"], model.spec["backbone"]
    if theirs != ours:
        raise OptionsError("init_from %s is %s on %s, this run's %s is %s on %s: fine-tuning "
                           "needs the same architecture and backbone"
                           % (name, theirs[0], theirs[1], model.name, ours[0], ours[1]))


def _rows_per_class(arch, param):
    """Rows per class of a class-dependent array ``param`` of the architecture ``arch``
    (its :attr:`~zoo.architectures.base.Architecture.class_layers`), or None for any other."""
    for pattern, rows in arch.class_layers:
        if re.fullmatch(pattern, param):
            return rows
    return None


def _by_class(array, classes, rows):
    """``array`` (numpy) as ``(groups, classes + 1, rows, ...)``, or None when its axis 0
    does not split so."""
    per_group = (classes + 1) * rows
    if array.shape[0] % per_group:
        return None
    return array.reshape((array.shape[0] // per_group, classes + 1, rows) + array.shape[1:])


def _map_classes(fresh, old, rows, pairs):
    """``fresh`` with the background rows and the rows of each ``(new, old)`` class index
    pair taken from ``old``; None when the two arrays do not split into the same groups."""
    new_classes, old_classes = len(pairs.new_names), len(pairs.old_names)
    ours, theirs = _by_class(fresh, new_classes, rows), _by_class(old, old_classes, rows)
    if ours is None or theirs is None or ours.shape[0] != theirs.shape[0] \
            or ours.shape[3:] != theirs.shape[3:]:
        return None
    ours[:, 0] = theirs[:, 0]
    for new, source in pairs.indices:
        ours[:, new + 1] = theirs[:, source + 1]
    return ours.reshape(fresh.shape)


@dataclass(frozen=True)
class _ClassPairs:
    new_names: tuple
    old_names: tuple

    @property
    def indices(self):
        """``(new index, source index)`` of every shared class name."""
        return [(i, self.old_names.index(name)) for i, name in enumerate(self.new_names)
                if name in self.old_names]


def _take(name, fresh, saved, arch, pairs):
    """``(array, how)`` of one parameter: ``how`` is "copied", "mapped" or "reset"."""
    rows = _rows_per_class(arch, name)
    if rows is not None and pairs.new_names != pairs.old_names and name in saved:
        mapped = _map_classes(fresh.asnumpy(), saved[name].asnumpy(), rows, pairs)
        if mapped is not None:
            return mx.nd.array(mapped, dtype=fresh.dtype), "mapped"
    if name in saved and saved[name].shape == fresh.shape:
        return saved[name], "copied"
    return fresh, "reset"


def init_from(model, prefix, epoch=None, seed=None):
    """``(arg_params, aux_params, summary)``: ``model``'s parameters started from the
    artifact at ``prefix`` (epoch ``epoch``, None: its best validated, else newest), the
    rest from ``model.init_params(seed=seed)``; ``summary`` an :class:`InitSummary`.
    Raises :class:`zoo.errors.OptionsError` for an int8 or bf16 source or another
    architecture or backbone, :class:`zoo.artifact.ArtifactError` for a missing or damaged
    one."""
    meta, name = _source(prefix, epoch)
    _check_source(meta, name, model)
    files = artifact.epoch_files(prefix, meta["epoch"])
    saved_args, saved_aux = artifact.read_params(files.params, meta["params_sha256"], files.meta)
    saved = {**saved_args, **saved_aux}
    pairs = _ClassPairs(tuple(artifact.class_names(model.config)), tuple(meta["class_names"]))
    args, aux = model.init_params(seed=seed)
    taken, counts = {}, {"copied": [], "mapped": [], "reset": []}
    for param, fresh in {**args, **aux}.items():
        taken[param], how = _take(param, fresh, saved, model.arch, pairs)
        counts[how].append(param)
    shared = tuple(n for n in pairs.new_names if n in pairs.old_names)
    summary = InitSummary(name, len(counts["copied"]), len(counts["mapped"]),
                          tuple(sorted(counts["reset"])), shared,
                          tuple(n for n in pairs.new_names if n not in shared))
    return ({k: taken[k] for k in args}, {k: taken[k] for k in aux}, summary)


def backbone_from(model, prefix, epoch=None):
    """``(arrays, "PREFIX-NNNN")``: the arrays of ``model``'s backbone that the artifact at
    ``prefix`` (its best validated, else newest epoch) holds under the same names and shapes,
    e.g. the stride-8 trunk of an SSD for a Faster R-CNN on the same backbone: a trained start
    for the backbone alone, as an ImageNet classifier's is. Refused in one line for an int8 or
    bf16 source, another backbone, or one that holds none of them."""
    from zoo.pretrained.maps import param_map
    meta, name = _source(prefix, epoch)
    refusal = artifact.fp32_only(name, meta["precision"], "take a backbone from")
    if refusal:
        raise OptionsError(refusal)
    theirs, ours = meta["config"].get("backbone"), model.spec["backbone"]
    if theirs != ours:
        raise OptionsError("%s has a %s backbone, %s's is %s" % (name, theirs, model.name, ours))
    files = artifact.epoch_files(prefix, meta["epoch"])
    saved_args, saved_aux = artifact.read_params(files.params, meta["params_sha256"], files.meta)
    saved = {**saved_args, **saved_aux}
    arg_shapes, aux_shapes = model.param_shapes()
    shapes = {**arg_shapes, **aux_shapes}
    arrays = {param: saved[param] for param in param_map(model.backbone)
              if param in saved and param in shapes and saved[param].shape == shapes[param]}
    if not arrays:
        raise OptionsError("%s holds none of %s's backbone arrays" % (name, model.name))
    return arrays, name
