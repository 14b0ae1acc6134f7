"""How an image becomes a network input: the one definition of the pixel statistics and
of the resizing.

Every model is trained and run on RGB pixels normalised by ImageNet's mean and
standard deviation (GluonCV's values, which its pretrained backbones expect). SSD
stretches the image to a square ``data_shape`` side (:func:`stretch`); Faster R-CNN keeps
its aspect ratio, scaling the short side to ``data_shape`` with the long side at most
``max_size``, and a batch's images are padded onto one canvas (:func:`short_side`). Either
resize is by default one bilinear warp, the one the training augmentation makes; a config's
``interpolation`` may choose OpenCV's resize instead (:data:`INTERPOLATIONS`), as GluonCV's
transforms make theirs. The config defaults, the transforms, the detector and the stored
artifacts all read them from here or from a model's
:meth:`~zoo.DetectionModel.preprocessing`.
"""
import math

import numpy as np

from zoo.errors import OptionsError

__all__ = ["INTERPOLATIONS", "MEAN_PIXELS", "STD_PIXELS", "WARP", "canvas_im_info", "canvas_size",
           "input_size", "interpolation_of", "resampling", "resized_size", "scaled_size",
           "short_side", "statistics", "stretch", "with_input_size"]

MEAN_PIXELS = (123.68, 116.779, 103.939)
STD_PIXELS = (58.393, 57.12, 57.375)

WARP = "warp"
INTERPOLATIONS = (WARP, "bilinear", "bicubic", "auto")
"""How inference resizes an image: ``warp``, a bilinear ``cv2.warpAffine`` whose border is
the mean pixel (the default, as training warps); or ``cv2.resize``, ``bilinear``
(``INTER_LINEAR``, MXNet's ``imresize`` interp 1, GluonCV's ``FasterRCNNDefaultValTransform``),
``bicubic`` (``INTER_CUBIC``, MXNet's interp 2, which GluonCV's Faster R-CNN
``transform_test`` and ``load_test`` use through ``resize_short_within``) or ``auto`` (MXNet's
interp 9, GluonCV's SSD: ``INTER_AREA`` when both sides shrink, ``INTER_CUBIC`` when both
grow, else ``INTER_LINEAR``)."""


def statistics(spec):
    """``{"mean", "std"}`` of a resolved config as plain float lists."""
    return {"mean": [float(v) for v in spec["mean_pixels"]],
            "std": [float(v) for v in spec["std_pixels"]]}


def resampling(spec):
    """``{"interpolation": name}`` of a config that chooses other than :data:`WARP`, else
    ``{}``: the preprocessing of every warping model stays what it was before the field,
    which a zoo that predates it reads the same way (:func:`interpolation_of`)."""
    name = spec.get("interpolation", WARP)  # a hand-made spec need not name it
    return {} if name == WARP else {"interpolation": name}


def interpolation_of(preprocessing):
    """The :data:`INTERPOLATIONS` name of a preprocessing dict: :data:`WARP` when it names
    none (a warping model's, or an artifact older than the field)."""
    return preprocessing.get("interpolation", WARP)


def stretch(spec):
    """``{"mean", "std", "resize": "stretch", "data_shape": [S, S]}`` (and
    :func:`resampling`'s ``interpolation``): the image is resized to ``data_shape`` x
    ``data_shape`` whatever its aspect ratio."""
    side = spec["data_shape"]
    return dict(statistics(spec), resize="stretch", data_shape=[side, side], **resampling(spec))


def short_side(spec, size_divisor):
    """``{"mean", "std", "resize": "short_side", "data_shape": [S, M], "short_side": S,
    "max_size": M, "size_divisor": D}`` (and :func:`resampling`'s ``interpolation``): the
    image keeps its aspect ratio, its short side scaled to S unless the long side would pass
    M (:func:`scaled_size`); a batch is padded to a canvas whose sides are multiples of D
    (:func:`canvas_size`). ``data_shape`` is the reference input."""
    side, longest = spec["data_shape"], spec["max_size"]
    return dict(statistics(spec), resize="short_side", data_shape=[side, longest],
                short_side=side, max_size=longest, size_divisor=int(size_divisor),
                **resampling(spec))


def input_size(preprocessing):
    """``128x128``, or ``short side 600`` for a model that keeps the aspect ratio: the input
    size of a model's :meth:`~zoo.DetectionModel.preprocessing` as users read it."""
    if preprocessing.get("resize") == "short_side":
        return "short side %d" % preprocessing["short_side"]
    height, width = preprocessing["data_shape"]
    return "%dx%d" % (width, height)


def with_input_size(preprocessing, data_shape=None, max_size=None):
    """``preprocessing`` (a model's or an artifact's dict) running at another input size:
    ``data_shape`` the short side and ``max_size`` the long-side limit of a model that keeps
    the aspect ratio (None: the dict's own). A size the model cannot take is an
    :class:`~zoo.errors.OptionsError` in one line:

    - a stretched (SSD) model runs only at its own square side: its anchors' steps and the
      feature-map sizes its graph (and an ONNX or OpenVINO export of it) was built for
      follow from that side, so another side would misplace every anchor;
    - a short side over the long-side limit (training refuses the same config), or under
      ``size_divisor`` (the coarsest stride: the deepest feature map would have no whole
      cell of image)."""
    if data_shape is None and max_size is None:
        return preprocessing
    if preprocessing.get("resize") != "short_side":
        side = preprocessing["data_shape"][0]
        if max_size is not None:
            raise OptionsError("max_size %d: this model stretches images to its square input "
                               "%dx%d and has no long-side limit; leave max_size out"
                               % (max_size, side, side))
        if data_shape != side:
            raise OptionsError("data_shape %d: this model (SSD) runs only at the square input "
                               "it was built for, %d (its anchors are laid out for that size); "
                               "give %d or leave data_shape out, or build one at %d with "
                               "zoo export --network NAME --data-shape %d"
                               % (data_shape, side, side, data_shape, data_shape))
        return preprocessing
    short = preprocessing["short_side"] if data_shape is None else int(data_shape)
    longest = preprocessing["max_size"] if max_size is None else int(max_size)
    if longest < short:
        raise OptionsError("data_shape %d%s is over max_size %d%s, the long-side limit: give "
                           "max_size %d or more, or a smaller data_shape" % (
                               short, " (the checkpoint's)" if data_shape is None else "",
                               longest, " (the checkpoint's)" if max_size is None else "",
                               short))
    divisor = preprocessing["size_divisor"]
    if short < divisor:
        raise OptionsError("data_shape %d: under %d, this model's coarsest stride (its deepest "
                           "feature map would hold no whole cell); give %d or more"
                           % (short, divisor, divisor))
    return dict(preprocessing, data_shape=[short, longest], short_side=short,
                max_size=longest)


def resized_size(preprocessing, width, height):
    """``(width, height)`` a ``width`` x ``height`` image is resized to before it is
    normalised, as :func:`zoo.data.transforms.inference_transform` of ``preprocessing``
    resizes it: what decoding a photo at a reduced scale must still reach."""
    if preprocessing.get("resize") == "short_side":
        new_height, new_width, _ = scaled_size(height, width, preprocessing["short_side"],
                                               preprocessing["max_size"])
        return new_width, new_height
    height, width = preprocessing["data_shape"]
    return width, height


def scaled_size(height, width, short_side, max_size):
    """``(new_height, new_width, scale)`` of a ``height`` x ``width`` image whose short side
    is scaled to ``short_side``, or less so that the long side stays within ``max_size``."""
    scale = min(short_side / min(height, width), max_size / max(height, width))
    # a side never rounds to 0, however thin the image
    return max(1, round(height * scale)), max(1, round(width * scale)), scale


def canvas_size(sizes, size_divisor):
    """``(H, W)``: the largest height and width of ``sizes`` (``(height, width)`` pairs),
    each rounded up to a multiple of ``size_divisor``."""
    height = max(size[0] for size in sizes)
    width = max(size[1] for size in sizes)
    return (int(math.ceil(height / size_divisor)) * size_divisor,
            int(math.ceil(width / size_divisor)) * size_divisor)


def canvas_im_info(data):
    """``im_info`` rows ``[height, width, 1]`` of a batch ``data`` (B, 3, H, W) whose images
    fill the canvas at scale 1 (stretched ones): what a Faster R-CNN is given for them."""
    height, width = data.shape[2:]
    return np.tile(np.array([[height, width, 1.0]], np.float32), (data.shape[0], 1))
