"""The backbone registry: one registration per backbone, in the module that defines it.

A registration (:func:`register_backbone`) names the backbone and carries every fact the
zoo keeps about it, so that no other table lists backbones: the builder, the trainable
parameter count of its ImageNet classifier as published (the tests compare the graph's with
it), GluonCV's name of the same classifier and the map of our parameter names to its file's
keys (optional: a backbone without one trains from scratch only), and the limits of a
healthy first loss where the backbone starts differently from the architecture's (optional).

:data:`BACKBONES` holds the registrations by name; each is called to build its backbone
(``BACKBONES["resnet50"]()``), as the builders of the former plain mapping were. Like
Detectron2's ``BACKBONE_REGISTRY`` and torchvision's ``@register_model``.
"""
import types
from dataclasses import dataclass, field
from typing import Callable, Mapping, Optional

__all__ = ["BACKBONES", "BackboneEntry", "GLUON_BN_PARAMS", "GluonCVBackbone", "map_conv_bn",
           "register_backbone", "unregister_backbone"]

GLUON_BN_PARAMS = (("gamma", "gamma"), ("beta", "beta"),
                   ("moving_mean", "running_mean"), ("moving_var", "running_var"))


def map_conv_bn(mapping, ours, theirs_conv, theirs_bn):
    """Add the entries for one of our ``conv_bn`` layers (conv ``ours``, norm ``ours_bn``)
    given the Gluon paths of the matching convolution and batch norm."""
    mapping[ours + "_weight"] = theirs_conv + ".weight"
    for ours_suffix, theirs_suffix in GLUON_BN_PARAMS:
        mapping[ours + "_bn_" + ours_suffix] = theirs_bn + "." + theirs_suffix


@dataclass(frozen=True)
class GluonCVBackbone:
    """What GluonCV knows of one of our backbones: the name of its ImageNet classifier of
    the same network, and the function mapping our parameter names (of the backbone it is
    given) to the keys of that classifier's ``save_parameters`` file."""
    name: str
    param_map: Callable


@dataclass(frozen=True)
class BackboneEntry:
    """One registered backbone; calling it builds the backbone."""
    name: str
    build: Callable
    published_params: int
    """Trainable parameters of the ImageNet classifier (``backbone.classifier()``) as the
    papers or GluonCV count them."""
    gluoncv: Optional[GluonCVBackbone] = None
    """GluonCV's classifier of the same network, None where there is none."""
    initial_loss_limits: Mapping[str, float] = field(default_factory=dict)
    """By architecture, the limit of a healthy first loss over the trivial predictor's
    where this backbone starts above the architecture's own limit
    (:func:`zoo.engine.health.loss.initial_loss_limit`)."""

    def __call__(self):
        return self.build()


_REGISTERED = {}
BACKBONES = types.MappingProxyType(_REGISTERED)
"""The registered backbones by name (read-only; :func:`register_backbone` adds to it)."""


def register_backbone(name, build=None, *, published_params, gluoncv=None,
                      initial_loss_limits=None):
    """Register the backbone ``name`` built by ``build()``. Without ``build``, a decorator
    registering the class it decorates (built without arguments). Returns ``build``.
    Raises ValueError for a name already registered."""
    def register(builder):
        if name in _REGISTERED:
            raise ValueError("backbone %r is already registered" % name)
        _REGISTERED[name] = BackboneEntry(name, builder, published_params, gluoncv,
                                          types.MappingProxyType(dict(initial_loss_limits
                                                                      or {})))
        return builder
    return register if build is None else register(build)


def unregister_backbone(name):
    """Remove the registration of ``name`` (a test's toy backbone); KeyError if none."""
    del _REGISTERED[name]
