"""GluonCV's SSDs imported as zoo artifacts detect what GluonCV's networks detect.

No weights can be downloaded here: GluonCV's networks get random weights (calm enough that
scores spread instead of saturating at 1, so the order of the detections means something),
saved to a file GluonCV's way and imported. Both run on the same images, ours through
``zoo.Detector`` on the artifact, GluonCV's after its own SSD resize
(``SSDDefaultValTransform``, which stretches to the input side with MXNet's interp 9): given
images GluonCV's resize already made, the networks are compared alone; given raw images,
ours resizes as the artifact's preprocessing says (``interpolation: auto``), and the whole
pipelines are. The unit tests use a GluonCV SSD of the same blocks at 128 pixels; the slow
ones the registered names at 512.
"""
import types

import mxnet as mx
import numpy as np
import pytest
from gluoncv import model_zoo
from gluoncv.data import VOCDetection
from gluoncv.data.transforms import image as gluon_image
from gluoncv.data.transforms.presets.ssd import SSDDefaultValTransform
from gluoncv.model_zoo.ssd.ssd import get_ssd

import zoo
from zoo.inference.runner import image_rows
from zoo.cli import main
from zoo.errors import OptionsError
from zoo.gluoncv import IMPORTERS, Importer, import_gluoncv
from zoo.gluoncv.common import (GluonArrays, GluonCVImportError, gluon_arrays, gluon_net,
                                import_net, our_params)
from zoo.gluoncv.ssd import map_ssd_resnet_v1
from zoo.inference.quantization import InputBatches, int8_layers, quantize

VOC = IMPORTERS["ssd_512_resnet50_v1_voc"]
SMALL = 128
# GluonCV's VOC anchor sizes and ratios, scaled to 128 pixels, on four maps (res4, res5 and
# two extra blocks): the smallest input whose maps still shrink at every step.
SMALL_SIZES = [s * SMALL / 512 for s in (51.2, 102.4, 189.4, 276.4, 363.52)]
SMALL_RATIOS = [[1, 2, 0.5], [1, 2, 0.5, 3, 1.0 / 3], [1, 2, 0.5, 3, 1.0 / 3], [1, 2, 0.5]]
SMALL_STEPS = [16, 32, 64, 128]
IMAGE_SIZES = [(300, 500), (480, 360), (200, 640), (512, 512), (375, 500)]  # (height, width)
# at 128 pixels: shrunk (area), enlarged (bicubic), one side each way and one kept (bilinear)
RAW_SIZES = [(300, 500), (480, 360), (96, 112), (64, 208), (176, 96), (128, 128)]
# at 512: shrunk, enlarged (twice), one side each way and one kept
FULL_SIZES = [(720, 960), (384, 448), (300, 500), (200, 640), (512, 512)]
GLUON_MEAN, GLUON_STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)


def small_overrides():
    """Our config's fields for the 128-pixel GluonCV SSD: its maps, anchors and steps."""
    sizes = [[a / SMALL, np.sqrt(a * b) / SMALL] for a, b in zip(SMALL_SIZES, SMALL_SIZES[1:])]
    return dict(data_shape=SMALL, from_layers=["res4", "res5", "", ""],
                num_filters=[-1, -1, 512, 256], strides=[-1, -1, 2, 2], pads=[-1, -1, 1, 1],
                normalizations=[-1] * 4, sizes=sizes, ratios=SMALL_RATIOS, steps=SMALL_STEPS)


def small_gluon_ssd():
    with mx.name.NameManager():
        return get_ssd("resnet50_v1", SMALL, features=["stage3_activation5", "stage4_activation2"],
                       filters=[512, 256], sizes=SMALL_SIZES, ratios=SMALL_RATIOS,
                       steps=SMALL_STEPS, classes=VOCDetection.CLASSES, dataset="voc",
                       pretrained=False, pretrained_base=False)


def randomise(net, side, seed=0):
    """Random weights whose scores spread: He-normal convolutions, batch norm with scales in
    [0.3, 0.8] and its statistics, shifts and biases random too (so that a swapped mean and
    variance, or a dropped bias, shows)."""
    net.initialize()
    net(mx.nd.zeros((1, 3, side, side)))  # GluonCV's shapes are inferred on a first pass
    rng = np.random.RandomState(seed)
    for name, param in net._collect_params_with_prefix().items():
        shape = param.shape
        if name.endswith("anchors"):
            continue
        if name.endswith("_var"):
            value = rng.uniform(0.5, 2.0, shape)
        elif name.endswith(("_mean", "beta")):
            value = rng.uniform(-0.2, 0.2, shape)
        elif name.endswith("gamma"):
            value = rng.uniform(0.3, 0.8, shape)
        elif name.endswith("bias"):
            value = rng.uniform(-0.5, 0.5, shape)
        else:
            value = rng.normal(0, np.sqrt(2.0 / np.prod(shape[1:])), shape)
        param.set_data(mx.nd.array(value))
    return net


def random_images(sizes=IMAGE_SIZES, seed=1):
    """Smooth random RGB images (blocks of 16 pixels, bilinearly enlarged) of the ``(height,
    width)`` sizes, uint8 NDArrays."""
    rng = np.random.RandomState(seed)
    images = []
    for height, width in sizes:
        coarse = mx.nd.array(rng.randint(0, 256, (height // 16, width // 16, 3)), dtype=np.uint8)
        images.append(gluon_image.imresize(coarse, width, height, interp=1))
    return images


def gluon_detections(net, image, side):
    """GluonCV's top 100 ``(classes, scores, boxes)`` of ``image`` after its SSD resize."""
    data, _ = SSDDefaultValTransform(side, side, GLUON_MEAN, GLUON_STD)(
        image, np.zeros((0, 4), np.float32))
    ids, scores, boxes = (out[0].asnumpy() for out in net(data.expand_dims(0)))
    kept = ids[:, 0] >= 0
    return ids[kept, 0].astype(np.int64), scores[kept, 0], boxes[kept]


def resized_images(side):
    """The test images after GluonCV's SSD resize to ``side`` x ``side``, which ours then
    leaves as they are."""
    return [gluon_image.imresize(image, side, side, interp=9) for image in random_images()]


def compare(detector, net, side, images, tie=0.0):
    """``(max score difference, max box difference in the images' pixels)`` over ``images``
    (uint8 NDArrays), ours given them as they are and GluonCV's after its SSD resize, after
    checking that both give the same classes in the same order: with ``tie``, two detections
    whose scores are within it may come in either order, and one within it of GluonCV's last
    may be in one list only (a network that amplifies MKL-DNN's rounding, as MobileNet v1's
    plain stack does, may swap them)."""
    worst_score, worst_box = 0.0, 0.0
    for index, image in enumerate(images):
        labels, scores, boxes = gluon_detections(net, image, side)
        height, width = image.shape[:2]
        assert len(labels) == 100 and len(set(labels)) > 1, "degenerate test: %s" % labels
        assert scores[0] - scores[-1] > 0.01, "scores do not spread: %s" % scores
        # GluonCV's boxes (in its resized input's pixels) as the zoo reports boxes: clipped
        # to the image, those under a pixel there dropped (GluonCV keeps them)
        reported = image_rows(np.column_stack([labels, scores, boxes / side]).astype(np.float32),
                              (width, height))
        labels, scores = reported[:, 0], reported[:, 1]
        boxes = reported[:, 2:] * np.array([width, height, width, height])
        ours = detector(image.asnumpy(), score_threshold=0.0, max_detections=len(labels))
        if tie:
            # those tied with GluonCV's last one may be in either list
            kept = ours.scores > scores[-1] + tie
            ours = types.SimpleNamespace(labels=ours.labels[kept], scores=ours.scores[kept],
                                         boxes=ours.boxes[kept])
            unmatched = [rank for rank, (label, score) in enumerate(zip(ours.labels, ours.scores))
                         if label not in labels[np.abs(scores - score) <= tie]]
            assert not unmatched, "image %d: our ranks %s have no class of GluonCV's within %g" \
                % (index, unmatched, tie)
        else:
            np.testing.assert_array_equal(ours.labels, labels, err_msg="image %d" % index)
        worst_score = max(worst_score,
                          float(np.abs(ours.scores - scores[:len(ours.scores)]).max()))
        worst_box = max(worst_box, tied_box_difference(ours, labels, scores, boxes))
    return worst_score, worst_box


def tied_box_difference(ours, labels, scores, boxes):
    """The largest difference between each of our boxes and GluonCV's box of the same class
    at its rank, or at a rank whose score ties with it within 1e-4: two such detections may
    come in either order (MKL-DNN's rounding differs from process to process by ~1e-7)."""
    worst = 0.0
    for box, label, score in zip(ours.boxes, ours.labels, ours.scores):
        twins = (labels == label) & (np.abs(scores - score) < 1e-4)
        worst = max(worst, float(np.abs(boxes[twins] - box).max(axis=1).min()))
    return worst


@pytest.fixture(scope="module")
def small_net():
    return randomise(small_gluon_ssd(), SMALL)


@pytest.fixture(scope="module")
def small_artifact(small_net, tmp_path_factory):
    prefix = str(tmp_path_factory.mktemp("small") / "ssd")
    import_net(VOC, small_net, prefix, "test weights", **small_overrides())
    return prefix


def test_small_ssd_detects_what_gluoncv_detects(small_net, small_artifact):
    worst_score, worst_box = compare(zoo.load_detector(small_artifact), small_net, SMALL,
                                     resized_images(SMALL))
    print("128 px: scores within %.2g, boxes within %.2g px" % (worst_score, worst_box))
    assert worst_score < 1e-4
    assert worst_box < 0.01


def test_small_ssd_on_raw_images_detects_what_gluoncvs_pipeline_detects(small_net,
                                                                        small_artifact):
    worst_score, worst_box = compare(zoo.load_detector(small_artifact), small_net, SMALL,
                                     random_images(RAW_SIZES))
    print("128 px, raw images: scores within %.2g, boxes within %.2g px"
          % (worst_score, worst_box))
    assert worst_score < 1e-4
    assert worst_box < 0.01


@pytest.mark.parametrize("size, method", [((300, 500), "area"), ((96, 112), "bicubic"),
                                          ((64, 208), "bilinear"), ((176, 96), "bilinear")])
def test_the_imported_resize_is_gluoncvs_value_for_value(size, method):
    """``interpolation: auto`` against MXNet's interp 9 (its own OpenCV 3.4): area and
    bilinear equal, bicubic one grey level apart on a few values (OpenCV 4 rounds its
    vertical pass otherwise)."""
    image = random_images([size])[0]
    ours = zoo.data.transforms.resize_image(image.asnumpy(), (SMALL, SMALL), "auto")
    gluon = gluon_image.imresize(image, SMALL, SMALL, interp=9).asnumpy()
    differences = np.abs(ours.astype(int) - gluon)
    if method == "bicubic":
        assert differences.max() <= 1 and np.count_nonzero(differences) < 1e-4 * ours.size
    else:
        np.testing.assert_array_equal(ours, gluon)


def test_artifact_carries_gluoncvs_classes_statistics_and_source(small_artifact):
    meta = zoo.artifact.read_meta(small_artifact, 0)
    assert meta["class_names"] == list(VOCDetection.CLASSES)
    assert meta["preprocessing"]["mean"] == [123.675, 116.28, 103.53]
    assert meta["preprocessing"]["std"] == [58.395, 57.12, 57.375]
    assert meta["preprocessing"]["resize"] == "stretch"
    assert meta["preprocessing"]["interpolation"] == "auto"
    assert meta["training"] == {"source": "gluoncv", "gluoncv_name": "ssd_512_resnet50_v1_voc",
                                "params": "test weights", "dataset": "voc"}


def test_imported_model_quantizes_to_int8(small_artifact):
    source = zoo.artifact.load(small_artifact)
    data = np.random.RandomState(0).uniform(-2, 2, (2, 3, SMALL, SMALL)).astype(np.float32)
    symbol, args, aux = quantize(source.model.symbol(), source.arg_params, source.aux_params,
                                 InputBatches([{"data": data}], 2))
    assert int8_layers(symbol)
    found = zoo.Detector(source.model, args, aux, symbol=symbol)(
        random_images()[0].asnumpy(), score_threshold=0.0)
    assert len(found.labels) == 100 and set(found.labels) <= set(range(20))


def small_model():
    return zoo.get_model(VOC.config, num_classes=20, **small_overrides())


def test_every_gluoncv_array_is_read_exactly_once(small_net):
    arrays = gluon_arrays(small_net)
    arrays["features.expand_unused_weight"] = np.zeros(3, np.float32)
    with pytest.raises(GluonCVImportError, match="expand_unused_weight is read 0 times"):
        our_params(VOC, small_model(), GluonArrays(arrays))

    def twice(gluon, model):
        gluon["class_predictors.0.predictor.bias"]
        return map_ssd_resnet_v1(gluon, model)

    with pytest.raises(GluonCVImportError, match="predictor.bias is read 2 times"):
        our_params(Importer("x", VOC.config, "voc", twice), small_model(),
                   GluonArrays(gluon_arrays(small_net)))


def test_every_array_of_ours_is_filled_with_its_shape(small_net):
    def dropping(gluon, model):
        mapped = map_ssd_resnet_v1(gluon, model)
        del mapped["extra3_conv2_bn_moving_var"]
        return mapped

    with pytest.raises(GluonCVImportError, match="1 arrays .* unfilled, e.g. extra3_conv2_bn_"):
        our_params(Importer("x", VOC.config, "voc", dropping), small_model(),
                   GluonArrays(gluon_arrays(small_net)))
    arrays = gluon_arrays(small_net)
    arrays["box_predictors.1.predictor.bias"] = np.zeros(25, np.float32)
    with pytest.raises(GluonCVImportError, match=r"box_predictors.1.predictor.bias of shape "
                                                 r"\(25,\) is mapped onto head1_loc_bias of "
                                                 r"shape \(24,\)"):
        our_params(VOC, small_model(), GluonArrays(arrays))


def test_other_anchors_are_refused(small_net):
    arrays = gluon_arrays(small_net)
    arrays["anchor_generators.2.anchors"] = arrays["anchor_generators.2.anchors"] * 1.01
    with pytest.raises(GluonCVImportError, match="anchor_generators.2.anchors differ from "
                                                 "ssd_resnet50_v1_gluoncv_voc's anchors of map 2"):
        our_params(VOC, small_model(), GluonArrays(arrays))


def test_unknown_names_list_the_importable_ones(tmp_path):
    with pytest.raises(OptionsError, match="ssd_300_vgg16_atrous_voc.*importable: .*"
                                           "ssd_512_resnet50_v1_coco, ssd_512_resnet50_v1_voc"):
        import_gluoncv("ssd_300_vgg16_atrous_voc", output=str(tmp_path / "x"))


def test_the_wrong_parameter_file_is_one_line_naming_it(small_net, tmp_path, capsys):
    path = str(tmp_path / "small.params")
    small_net.save_parameters(path)
    assert main(["import-gluoncv", "ssd_512_resnet50_v1_voc", "--params", path,
                 "--output", str(tmp_path / "x")]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert err.startswith("zoo import-gluoncv: error: %s: not a parameter file of GluonCV's "
                          "ssd_512_resnet50_v1_voc" % path)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["ssd_512_resnet50_v1_voc", "ssd_512_resnet50_v1_coco"])
def test_full_size_import_detects_what_gluoncv_detects(name, tmp_path):
    with mx.name.NameManager():
        net = randomise(model_zoo.get_model(name, pretrained=False, pretrained_base=False), 512)
    params = str(tmp_path / (name + ".params"))
    net.save_parameters(params)
    prefix = str(tmp_path / name)
    assert main(["import-gluoncv", name, "--params", params, "--output", prefix]) == 0
    assert zoo.artifact.read_meta(prefix, 0)["config"]["name"] == IMPORTERS[name].config
    worst_score, worst_box = compare(zoo.load_detector(prefix), gluon_net(name, params), 512,
                                     random_images(FULL_SIZES))
    print("%s at 512 px, raw images: scores within %.2g, boxes within %.2g px"
          % (name, worst_score, worst_box))
    assert worst_score < 1e-4
    assert worst_box < 0.01
