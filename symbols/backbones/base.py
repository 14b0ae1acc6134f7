"""The interface every backbone implements.

A backbone declares its stage outputs by name with stride and channels, the
way Detectron2's ``Backbone.output_shape()`` does; detector configs refer to
those names (or to any explicitly named internal layer), never to generated
ones.
"""
import abc
from dataclasses import dataclass

import mxnet as mx

from symbols.layers import StrictNameManager, classifier_head

__all__ = ["Backbone", "StageSpec"]


@dataclass(frozen=True)
class StageSpec:
    """One declared backbone output: ``layer`` is the operator that produces it."""
    name: str
    layer: str
    stride: int
    channels: int


class Backbone(abc.ABC):
    """Base class: subclasses set ``name``, ``classifier_size``
    and implement the abstract methods below."""

    name = None
    classifier_size = 224

    @abc.abstractmethod
    def stages(self):
        """Declared stage outputs, shallowest first, as a list of :class:`StageSpec`."""

    @abc.abstractmethod
    def build_stage(self, data, stage_name):
        """The layers from the previous stage's output to ``stage_name``'s output, applied to
        any input ``data`` (e.g. pooled ROI features) with the names they have in the body,
        so their weights are shared with it. Raises KeyError for an unknown stage."""

    @abc.abstractmethod
    def _body(self, data):
        """Build the convolutional body on ``data`` and return the deepest stage output."""

    def output_shape(self):
        """Declared stage outputs by name."""
        return {spec.name: spec for spec in self.stages()}

    def body(self, data=None):
        """The convolutional body (no classifier) as a symbol ending at the deepest stage."""
        with StrictNameManager():
            if data is None:
                data = mx.sym.Variable("data")
            return self._body(data)

    def classifier(self, num_classes=1000):
        """The ImageNet classifier: body, global pooling and a fully connected layer."""
        with StrictNameManager():
            return classifier_head(self._body(mx.sym.Variable("data")), "fc", num_classes)



