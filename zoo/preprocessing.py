"""How an image becomes a network input: the one definition of the pixel statistics.

Every model is trained and run on RGB pixels normalised by ImageNet's mean and
standard deviation (GluonCV's values, which its pretrained backbones expect),
after stretching the image to a square ``data_shape`` side. The config defaults,
the transforms, the detector and the stored artifacts all read them from here
or from a model's :meth:`~zoo.DetectionModel.preprocessing`.
"""
MEAN_PIXELS = (123.68, 116.779, 103.939)
STD_PIXELS = (58.393, 57.12, 57.375)
RESIZE = "stretch"
"""The image is resized to ``data_shape`` x ``data_shape`` whatever its aspect ratio."""


def preprocessing(spec):
    """``{"mean", "std", "resize", "data_shape": [H, W]}`` of a resolved config: what the
    transforms do to an image before the graph sees it."""
    side = spec["data_shape"]
    return {"mean": [float(v) for v in spec["mean_pixels"]],
            "std": [float(v) for v in spec["std_pixels"]],
            "resize": RESIZE, "data_shape": [side, side]}
