"""GluonCV's SSDs on MobileNet v1 (widths 1.0 and 0.25) imported as zoo artifacts detect what
GluonCV's networks detect, as test_gluoncv_ssd.py proves for ResNet-50 v1 and with its
helpers: random weights whose scores spread, the same images through both.

MobileNet v1 has no shortcut: test_gluoncv_ssd's random batch norm (scales in [0.3, 0.8],
statistics unrelated to the features) shrinks the image's part of the features by about
half a layer, to nothing after 27 layers, and every image then gets the same detections
(the backbone's first layers would go unchecked). :func:`calibrated` sets each batch norm's
statistics from the features it normalises on the test images instead, its variance times
:data:`VARIANCE_SCALE`: enough to keep the features the image's, little enough that the
network does not amplify MKL-DNN's float rounding (1e-7) past a few 1e-6 in the scores.
Detections whose scores tie within :data:`TIE` may come in either order.

The unit tests build GluonCV SSDs of the registered blocks at small inputs with
``get_ssd`` and import them with the config fields :func:`zoo.gluoncv.ssd.overrides_for`
derives from the network; the slow ones the registered names at their full sizes, through
``zoo import-gluoncv``.
"""
import json

import mxnet as mx
import numpy as np
import pytest
from gluoncv import model_zoo
from gluoncv.data import VOCDetection
from gluoncv.data.transforms import image as gluon_image
from gluoncv.data.transforms.presets.ssd import SSDDefaultValTransform
from gluoncv.model_zoo.ssd.ssd import get_ssd

import zoo
from symbols.backbones import get_backbone
from zoo.cli import main
from zoo.gluoncv import IMPORTERS
from zoo.gluoncv.common import (GluonArrays, GluonCVImportError, gluon_arrays, gluon_net,
                                import_net, our_params)
from zoo.gluoncv.ssd import GLUONCV_TAPS, overrides_for

from test_gluoncv_ssd import (GLUON_MEAN, GLUON_STD, compare, gluon_detections, random_images,
                              randomise, resized_images)

TAPS = ["relu22_fwd", "relu26_fwd"]
RATIOS = [[1, 2, 0.5]] + [[1, 2, 0.5, 3, 1.0 / 3]] * 3 + [[1, 2, 0.5]] * 2
VOC_SIZES_512 = (51.2, 102.4, 189.4, 276.4, 363.52, 450.6, 492)
# Small variants: GluonCV's VOC networks' blocks on fewer pixels. At 128, four maps (c4, c5
# and two extra blocks: 8, 4, 2, 1) with the 512-pixel anchors scaled; at 256 the lead's
# parity case, six maps of which the last two stay 1x1 (16, 8, 4, 2, 1, 1), steps GluonCV's.
SMALL = {
    "mobilenet1.0": dict(side=128, filters=[512, 256], ratios=RATIOS[:4],
                         sizes=[s * 128 / 512 for s in VOC_SIZES_512[:5]],
                         steps=[16, 32, 64, 128], importer="ssd_512_mobilenet1.0_voc"),
    "mobilenet0.25": dict(side=256, filters=[256, 256, 128, 128], ratios=RATIOS,
                          sizes=[s * 0.5 for s in VOC_SIZES_512],
                          steps=[16, 32, 64, 128, 256, 256],
                          importer="ssd_300_mobilenet0.25_voc"),
}
FULL = {"ssd_512_mobilenet1.0_voc": 512, "ssd_512_mobilenet1.0_coco": 512,
        "ssd_300_mobilenet0.25_voc": 300, "ssd_300_mobilenet0.25_coco": 300}
# larger class weights where the scores of COCO's 81 classes do not spread otherwise
FULL_CLASS_SCALES = {"ssd_300_mobilenet0.25_coco": 3.0}
VARIANCE_SCALE = 32.0
CLASS_SCALE = 2.0
TIE = 1e-4
# Raw images GluonCV's resize shrinks (area, as ours, value for value), and images it enlarges
# given as it resizes them: its bicubic is OpenCV 3.4's, a grey level from ours on a few
# pixels (test_gluoncv_ssd.test_the_imported_resize_is_gluoncvs_value_for_value), which these
# random networks, unlike ResNet's, amplify past the tolerances.
SHRUNK = {300: [(480, 640), (360, 600), (640, 400), (300, 300)],
          512: [(720, 960), (600, 1000), (1024, 640), (512, 512)]}
ENLARGED = {300: [(200, 240), (240, 400), (360, 200)],
            512: [(384, 448), (300, 500), (200, 640)]}


def calibrated(net, side, class_scale=CLASS_SCALE):
    """``net`` (randomised) with the statistics of every batch norm of its features (backbone
    and extra blocks), layer after layer, the mean and :data:`VARIANCE_SCALE` times the
    variance of its input on the test images (GluonCV's SSD resize to ``side``), plus 1e-3;
    the class predictors' weights ``class_scale`` times larger (the features are smaller than
    randomise's)."""
    symbol = net.features._cached_graph[1]
    params = net.features.collect_params()
    nodes = json.loads(symbol.tojson())["nodes"]
    internals = symbol.get_internals()
    transform = SSDDefaultValTransform(side, side, GLUON_MEAN, GLUON_STD)
    data = mx.nd.stack(*[transform(image, np.zeros((0, 4), np.float32))[0]
                         for image in random_images()])
    for node in nodes:
        if node["op"] != "BatchNorm":
            continue
        source = internals[nodes[node["inputs"][0][0]]["name"] + "_output"]
        args = {name: data if name == "data" else params[name].data()
                for name in source.list_arguments()}
        aux = {name: params[name].data() for name in source.list_auxiliary_states()}
        out = source.bind(mx.cpu(), args=args, aux_states=aux).forward()[0]
        mean = out.mean(axis=(0, 2, 3))
        variance = ((out - mean.reshape((1, -1, 1, 1))) ** 2).mean(axis=(0, 2, 3))
        mean_name, variance_name = (nodes[node["inputs"][i][0]]["name"] for i in (3, 4))
        params[mean_name].set_data(mean)
        params[variance_name].set_data(variance * VARIANCE_SCALE + 1e-3)
    for name, param in net.class_predictors.collect_params().items():
        if name.endswith("weight"):
            param.set_data(param.data() * class_scale)
    return net


def small_gluon_ssd(backbone):
    small = SMALL[backbone]
    with mx.name.NameManager():
        return get_ssd(backbone, small["side"], features=TAPS, filters=small["filters"],
                       sizes=small["sizes"], ratios=small["ratios"], steps=small["steps"],
                       classes=VOCDetection.CLASSES, dataset="voc", pretrained=False,
                       pretrained_base=False)


@pytest.fixture(scope="module", params=sorted(SMALL))
def small(request, tmp_path_factory):
    """``(backbone, side, GluonCV's network, our artifact's prefix)`` of a small variant."""
    backbone = request.param
    side = SMALL[backbone]["side"]
    net = calibrated(randomise(small_gluon_ssd(backbone), side), side)
    prefix = str(tmp_path_factory.mktemp(backbone) / "ssd")
    import_net(IMPORTERS[SMALL[backbone]["importer"]], net, prefix, "test weights",
               **overrides_for(net, side))
    return backbone, side, net, prefix


def test_small_ssd_detects_what_gluoncv_detects(small):
    backbone, side, net, prefix = small
    images = resized_images(side)
    # the calibrated network sees the image: its best scores differ from image to image
    best = [gluon_detections(net, image, side)[1][0] for image in images]
    assert max(best) - min(best) > 0.01, best
    worst_score, worst_box = compare(zoo.load_detector(prefix), net, side, images, tie=TIE)
    print("%s at %d px: scores within %.2g, boxes within %.2g px"
          % (backbone, side, worst_score, worst_box))
    assert worst_score < 1e-4
    assert worst_box < 0.01


def test_small_ssd_on_raw_images_detects_what_gluoncvs_pipeline_detects(small):
    backbone, side, net, prefix = small
    worst_score, worst_box = compare(zoo.load_detector(prefix), net, side, random_images(),
                                     tie=TIE)
    print("%s at %d px, raw images: scores within %.2g, boxes within %.2g px"
          % (backbone, side, worst_score, worst_box))
    assert worst_score < 1e-4
    assert worst_box < 0.01


def test_overrides_are_gluoncvs_network():
    """What overrides_for reads off GluonCV's 0.25 network at 256: its taps as our stages,
    its extra blocks' widths, anchors in fractions of the side, its steps; and that the
    maps (16, 8, 4, 2, 1, 1) need the checks of the maps off."""
    net = small_gluon_ssd("mobilenet0.25")
    net.initialize()
    overrides = overrides_for(net, 256)
    assert overrides["from_layers"] == ["c4", "c5", "", "", "", ""]
    assert overrides["num_filters"] == [-1, -1, 256, 256, 128, 128]
    assert overrides["steps"] == [16, 32, 64, 128, 256, 256]
    assert overrides["sizes"][0] == pytest.approx([0.1, 0.1 * 2 ** 0.5])
    assert overrides["ratios"] == RATIOS
    assert overrides["check_maps"] is False
    assert zoo.get_model("ssd_mobilenet0.25_gluoncv_voc", **overrides).describe()[0] == \
        "16x16/16 8x8/32 4x4/64 2x2/128 1x1/256 1x1/256"
    with pytest.raises(zoo.ConfigError, match="strides must grow strictly"):
        zoo.get_model("ssd_mobilenet0.25_gluoncv_voc", **dict(overrides, check_maps=True))


def test_taps_are_the_declared_stages():
    """GluonCV's relu22_fwd and relu26_fwd are c4 (stride 16) and c5 (stride 32) of both
    widths: their shapes on GluonCV's classifier, layer by layer, are our stages'."""
    for width in ("mobilenet1.0", "mobilenet0.25"):
        backbone = get_backbone(width)
        with mx.name.NameManager():
            classifier = model_zoo.get_model(width, pretrained=False)
        internals = classifier(mx.sym.var("data")).get_internals()
        stages = backbone.output_shape()
        for theirs in TAPS:
            layer = [name for name in internals.list_outputs()
                     if name.endswith(theirs + "_output")][0]
            shape = internals[layer].infer_shape(data=(1, 3, 512, 512))[1][0]
            spec = stages[GLUONCV_TAPS[theirs]]
            assert (shape[1], 512 // shape[2]) == (spec.channels, spec.stride), (width, theirs)


def test_the_registered_anchors_are_gluoncvs_published_ones():
    """The configs' anchors are those GluonCV's registered networks store (the import's
    check, on GluonCV's networks at their registered sizes; 0.25's steps of half the maps'
    strides included)."""
    for name in ("ssd_512_mobilenet1.0_voc", "ssd_300_mobilenet0.25_voc"):
        with mx.name.NameManager():
            net = model_zoo.get_model(name, pretrained=False, pretrained_base=False)
        net.initialize()
        net(mx.nd.zeros((1, 3, FULL[name], FULL[name])))
        importer = IMPORTERS[name]
        model = zoo.get_model(importer.config)
        our_params(importer, model, GluonArrays(gluon_arrays(net)))  # raises on a mismatch


def test_a_tap_the_zoo_has_no_stage_of_is_refused():
    with mx.name.NameManager():
        net = get_ssd("mobilenet0.25", 128, features=["relu20_fwd", "relu26_fwd"],
                      filters=[128, 128], sizes=[10, 20, 40, 60, 80], ratios=RATIOS[:4],
                      steps=[16, 32, 64, 128], classes=["a", "b"], dataset="",
                      pretrained_base=False)
    net.initialize()
    with pytest.raises(GluonCVImportError, match="taps .*relu20_fwd, which the zoo knows no "
                                                 "stage of"):
        overrides_for(net, 128)


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(FULL))
def test_full_size_import_detects_what_gluoncv_detects(name, tmp_path):
    side = FULL[name]
    with mx.name.NameManager():
        net = randomise(model_zoo.get_model(name, pretrained=False, pretrained_base=False),
                        side)
    calibrated(net, side, FULL_CLASS_SCALES.get(name, CLASS_SCALE))
    params = str(tmp_path / (name + ".params"))
    net.save_parameters(params)
    prefix = str(tmp_path / name)
    assert main(["import-gluoncv", name, "--params", params, "--output", prefix]) == 0
    assert zoo.artifact.read_meta(prefix, 0)["config"]["name"] == IMPORTERS[name].config
    images = random_images(SHRUNK[side]) + [gluon_image.imresize(image, side, side, interp=9)
                                            for image in random_images(ENLARGED[side])]
    worst_score, worst_box = compare(zoo.load_detector(prefix), gluon_net(name, params), side,
                                     images, tie=TIE)
    print("%s at %d px: scores within %.2g, boxes within %.2g px"
          % (name, side, worst_score, worst_box))
    assert worst_score < 1e-4
    assert worst_box < 0.01
