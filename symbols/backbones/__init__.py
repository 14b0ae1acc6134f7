"""MXNet symbol builders: backbones with declared stages and detector factories."""
from symbols.backbones.base import Backbone, StageSpec
from symbols.backbones.inception_v3 import InceptionV3
from symbols.backbones.mobilenetv2 import MobileNetV2
from symbols.backbones.resnet import ResNetV1, ResNetV1b

BACKBONES = {
    "resnet50": lambda: ResNetV1b(50),
    "resnet101": lambda: ResNetV1b(101),
    "resnet50_v1": lambda: ResNetV1(50),
    "mobilenetv2": MobileNetV2,
    "inceptionv3": InceptionV3,
}

__all__ = ["BACKBONES", "Backbone", "InceptionV3", "MobileNetV2", "ResNetV1",
           "ResNetV1b", "StageSpec",
           "get_backbone"]


def get_backbone(name):
    """Instantiate a registered backbone by name."""
    try:
        return BACKBONES[name]()
    except KeyError:
        raise KeyError("unknown backbone %r; known backbones: %s"
                       % (name, ", ".join(sorted(BACKBONES)))) from None
