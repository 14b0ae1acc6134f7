"""MXNet symbol factories of the zoo's detectors: layers, backbones with named stages, the
SSD, Faster R-CNN (C4) and FPN graph builders, box coding, anchors and proposals, and the
training-target operators.

This package depends only on MXNet and numpy, never on ``zoo``: ``zoo`` reads configs,
proves them against these graphs and trains, evaluates and deploys them, one way. Like the
MXNet SSD example's ``symbol/`` folder it replaces, it can be read (and reused) on its own.

- :mod:`symbols.layers`: named layer helpers (``StrictNameManager``);
- :mod:`symbols.backbones`: ``Backbone`` and its stages, the backbone registry
  (:data:`~symbols.backbones.BACKBONES`, :func:`~symbols.backbones.get_backbone`,
  :func:`~symbols.backbones.register_backbone`, each backbone's module registering it);
- :mod:`symbols.ssd`; :mod:`symbols.rpn` (RPN head, anchors, proposals);
  :mod:`symbols.faster_rcnn` (ROI heads, the C4 graphs); :mod:`symbols.fpn`;
- :mod:`symbols.box_coder`, :mod:`symbols.boxes` (IoU, numpy only), :mod:`symbols.rcnn_targets`.

``import symbols`` loads nothing; each submodule is imported when first used.
"""
import importlib

FACTORIES = {
    # config ``arch``: the module building its graphs
    "ssd": "symbols.ssd",
    "faster_rcnn": "symbols.faster_rcnn",
    "faster_rcnn_fpn": "symbols.fpn",
}
"""The registry of detector symbol factories, by architecture: the one list of
architectures (``zoo.architectures.ARCHITECTURES`` holds an implementation of each)."""

__all__ = ["FACTORIES", "factory"]


def factory(arch):
    """The module that builds ``arch``'s graphs (a key of :data:`FACTORIES`)."""
    try:
        return importlib.import_module(FACTORIES[arch])
    except KeyError:
        raise KeyError("unknown architecture %r; known: %s"
                       % (arch, ", ".join(sorted(FACTORIES)))) from None
