"""GluonCV's Faster R-CNN detectors, imported, detect what GluonCV detects.

Each test gives a GluonCV network random parameters (batch-norm statistics included, so a
wrong map of them shows), saves them to a file, imports the file with
``zoo.gluoncv.import_gluoncv`` and runs both networks on images of different aspect ratios
resized by GluonCV's own ``transform_test``: the top 100 detections must have the same
classes in the same order, scores within 1e-4 and boxes within 0.01 pixel. Unit tests keep
fewer proposals on small images (both networks alike); the ``slow`` ones run GluonCV's
settings at full size.

Both run without MXNet's MKLDNN subgraph fusion (``MXNET_SUBGRAPH_BACKEND=NONE``), as
GluonCV's networks run: the fusion our executors otherwise apply folds batch norms into
convolutions, which moves features by about 4e-6 of their size (scores by up to 3e-6,
boxes by up to 6e-3 pixels at 800x1333) and can swap two detections whose scores tie to
1e-7. GluonCV's FPN runs its
unmasked ROIAlign branch: the masked one gives ROIAlign batch index -1, on which MXNet's
CPU kernel leaves output rows unwritten (GluonCV then adds uninitialised memory).
"""
import json

import mxnet as mx
import numpy as np
import pytest

import zoo
from zoo.inference.runner import image_rows
from conftest import forward
from test_gluoncv_ssd import random_images
from zoo import artifact
from zoo.data.transforms import resize_image
from zoo.architectures import faster_rcnn as c4
from zoo.architectures import faster_rcnn_fpn as fpn
from zoo.gluoncv import IMPORTERS, common, import_gluoncv, rcnn
from zoo.config.registry import network_config
from zoo.model import build_model
from symbols.rpn import gluoncv_base_anchors
from symbols.rcnn_targets import RPNTargetProp
from zoo.schema.preprocessing import scaled_size

gluoncv = pytest.importorskip("gluoncv")
from gluoncv.data.transforms.image import resize_short_within  # noqa: E402
from gluoncv.data.transforms.presets.rcnn import transform_test  # noqa: E402
from gluoncv.model_zoo.rcnn.rpn.anchor import generate_base_anchors  # noqa: E402

# GluonCV's FPN builds a SymbolBlock, which warns that it cannot type its input.
pytestmark = pytest.mark.filterwarnings("ignore:Cannot decide type")

IMAGE_SIZES = [(300, 400), (400, 300), (240, 480), (520, 260), (350, 350)]
"""Original ``(height, width)`` of the test images: landscape, portrait, 2:1, 1:2, square."""
MEAN, STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)
TOP = 100


def random_gluon_net(name, proposals, seed=0):
    """GluonCV's ``name`` keeping ``proposals`` RPN proposals, with random parameters."""
    mx.random.seed(seed)
    rng = np.random.RandomState(seed)
    net = gluoncv.model_zoo.get_model(name, pretrained=False, pretrained_base=False)
    net.rpn._test_post_nms = net._rpn_test_post_nms = proposals
    net.initialize()
    net(mx.nd.zeros((1, 3, 256, 256)))  # shapes are inferred on the first forward
    for param_name, param in net.collect_params().items():
        if param_name.endswith(("running_mean", "beta")):
            param.set_data(rng.normal(0, 0.05, param.shape))
        elif param_name.endswith(("running_var", "gamma")):
            param.set_data(rng.uniform(0.8, 1.2, param.shape))
    return net


def imported(name, net, tmp_path, proposals):
    """Our model and parameters of GluonCV's ``net``, through a saved file, the import and
    its artifact, rebuilt to keep ``proposals`` RPN proposals."""
    params = str(tmp_path / (name + ".params"))
    net.save_parameters(params)
    result = import_gluoncv(name, params=params, output=str(tmp_path / name))
    stored = artifact.load(result.prefix, 0)
    model = build_model(stored.model.config, rpn_post_nms_top_n_test=proposals)
    return model, stored.arg_params, stored.aux_params


def gluon_rows(net, x):
    """GluonCV's detections ``(N, 6)`` ``[class, score, x1, y1, x2, y2]``, best first (its
    output is per class), at most :data:`TOP`."""
    ids, scores, boxes = (a.asnumpy()[0] for a in net(x))
    rows = np.concatenate([ids, scores, boxes], axis=1)
    rows = rows[rows[:, 0] >= 0]
    return rows[np.argsort(-rows[:, 1], kind="stable")][:TOP]


def our_rows(model, arg_params, aux_params, x):
    """Our detections of the same input, in its pixels."""
    height, width = x.shape[2:]
    rows, = forward(model.symbol(), arg_params, aux_params, data=x.asnumpy(),
                    im_info=np.array([[height, width, 1.0]], np.float32))
    rows = rows[0][rows[0][:, 0] >= 0]
    return rows * np.array([1, 1, width, height, width, height], np.float32)


def differences(ours, theirs):
    """``(rows in order with equal classes, largest score difference, largest box
    difference in pixels)`` of two detection lists."""
    count = min(len(ours), len(theirs))
    equal = np.append(ours[:count, 0] == theirs[:count, 0], False)
    return (int(np.argmin(equal)), float(np.abs(ours[:count, 1] - theirs[:count, 1]).max()),
            float(np.abs(ours[:count, 2:] - theirs[:count, 2:]).max()))


@pytest.fixture
def as_gluoncv_runs(monkeypatch):
    """No subgraph fusion in our executors, and GluonCV's FPN on its unmasked ROIAlign
    branch (it takes the masked one when MXNet has ``box_encode``)."""
    monkeypatch.setenv("MXNET_SUBGRAPH_BACKEND", "NONE")
    monkeypatch.delattr(mx.nd.contrib, "box_encode")


def check_equal(name, tmp_path, proposals, short, max_size):
    """GluonCV's ``name`` and its import keeping ``proposals`` RPN proposals detect the same
    on every test image resized to ``short`` (long side at most ``max_size``)."""
    net = random_gluon_net(name, proposals)
    model, arg_params, aux_params = imported(name, net, tmp_path, proposals)
    rng = np.random.RandomState(1)
    for height, width in IMAGE_SIZES:
        image = mx.nd.array(rng.randint(0, 256, (height, width, 3)), dtype="uint8")
        x, _ = transform_test(image, short=short, max_size=max_size, mean=MEAN, std=STD)
        theirs = gluon_rows(net, x)
        ours = our_rows(model, arg_params, aux_params, x)
        same, score, box = differences(ours, theirs)
        where = "%s on a %dx%d input" % (name, x.shape[2], x.shape[3])
        assert len(theirs) == TOP, "%s: GluonCV found only %d detections" % (where, len(theirs))
        assert len(ours) == len(theirs), where
        assert same == len(ours), "%s: the classes differ from detection %d" % (where, same)
        assert score < 1e-4, "%s: scores differ by %g" % (where, score)
        assert box < 0.01, "%s: boxes differ by %g pixels" % (where, box)


@pytest.mark.parametrize("name, proposals", [
    # C4 (20 s) runs in `make test-slow`: `make test` keeps C4's parity through
    # test_raw_images_detect_what_gluoncvs_whole_pipeline_detects, the FPN's here
    pytest.param("faster_rcnn_resnet50_v1b_voc", 50, marks=pytest.mark.slow),
    # COCO's C4 is the VOC one renumbered (conftest.SETTINGS_VARIANTS): `make test-slow`
    pytest.param("faster_rcnn_resnet50_v1b_coco", 50, marks=pytest.mark.slow),
    ("faster_rcnn_fpn_resnet50_v1b_coco", 200)])
def test_detections_equal_gluoncvs(name, proposals, tmp_path, as_gluoncv_runs):
    check_equal(name, tmp_path, proposals, short=160, max_size=256)


@pytest.mark.slow
@pytest.mark.parametrize("name, proposals, short, max_size", [
    ("faster_rcnn_resnet50_v1b_voc", 300, 600, 1000),
    ("faster_rcnn_resnet50_v1b_coco", 1000, 800, 1333),
    ("faster_rcnn_fpn_resnet50_v1b_coco", 1000, 800, 1333)])
def test_detections_equal_gluoncvs_at_full_size(name, proposals, short, max_size, tmp_path,
                                                as_gluoncv_runs):
    check_equal(name, tmp_path, proposals, short, max_size)


@pytest.mark.parametrize("stride, sizes", [(16, (32, 64, 128, 256, 512)), (4, (32,)),
                                           (64, (512,))])
def test_anchors_are_gluoncvs(stride, sizes):
    scales = [size / stride for size in sizes]
    expected = generate_base_anchors(stride, sizes, (0.5, 1, 2)).astype(np.float32)
    np.testing.assert_array_equal(gluoncv_base_anchors(stride, scales, (0.5, 1, 2)), expected)


def test_anchors_that_differ_fail_the_import():
    model = build_model(network_config("faster_rcnn_resnet50_gluoncv_voc"), num_classes=20)
    anchors = gluoncv_base_anchors(16, (4, 8, 16, 32, 64), (0.5, 1, 2)).reshape(1, 1, 1, 1, -1)
    gluon = common.GluonArrays({"rpn.anchor_generator.anchors": anchors})
    with pytest.raises(ValueError, match="rpn.anchor_generator.anchors are not the anchors"):
        rcnn.check_anchors(gluon, "rpn.anchor_generator.anchors",
                           c4.rpn(model.spec, "test").anchors, model)


def test_fitted_fractional_anchors_pass_the_import():
    # --fit-anchors gives scales such as 1.4275: GluonCV's generator shifts them in float64,
    # ours in float32, a last-bit difference that must not refuse the import.
    from gluoncv.model_zoo.rcnn.rpn.anchor import RPNAnchorGenerator
    scales = (1.0, 1.4275, 2.0378, 2.909, 4.1526)
    model = build_model(network_config("faster_rcnn_resnet50_gluoncv_voc"), num_classes=20,
                        anchor_scales=list(scales))
    generator = RPNAnchorGenerator(16, 16, (0.5, 1, 2), scales, (64, 64))
    generator.initialize()
    theirs = generator.anchors.data().asnumpy()
    level = c4.rpn(model.spec, "test").anchors
    rcnn.check_anchors(common.GluonArrays({"anchors": theirs}), "anchors", level, model)
    nudged = theirs.copy()
    nudged[..., 0] += 0.01
    with pytest.raises(ValueError, match="are not the anchors"):
        rcnn.check_anchors(common.GluonArrays({"anchors": nudged}), "anchors", level, model)


def target_op_anchors(model, score_shapes):
    """The anchors ``(N, 4)`` the ``zoo_rpn_target`` operator of ``model``'s training graph
    matches against, for RPN score maps of ``score_shapes``, in (anchor, row, column) order."""
    nodes = json.loads(model.train_symbol().tojson())["nodes"]
    attrs = next(node["attrs"] for node in nodes if node["name"] == "rpn_target")
    prop = RPNTargetProp(**{k: v for k, v in attrs.items() if k != "op_type"})
    op = prop.create_operator(mx.cpu(), None, None)
    return op.anchors([np.zeros(shape, np.float32) for shape in score_shapes])


def inference_anchors(model, height, width):
    """Per RPN level of ``model``'s inference graph on a ``height x width`` input: the anchors
    its proposals decode against, ``(A, H, W, 4)`` (the graph's anchor map, built from the
    feature map's shape)."""
    levels = (fpn.anchors(model.spec) if model.spec["arch"] == "faster_rcnn_fpn"
              else [c4.rpn(model.spec, "test").anchors])
    internals = model.symbol().get_internals()
    anchors = []
    for level in levels:
        executor = internals["rpn_anchor_corners_%s_output" % level.tag].simple_bind(
            mx.cpu(), data=(1, 3, height, width), im_info=(1, 3), grad_req="null")
        anchors.append(executor.forward(is_train=False)[0].asnumpy()[0])
    return anchors


@pytest.mark.parametrize("config", ["faster_rcnn_resnet50_gluoncv_voc",
                                    "faster_rcnn_fpn_resnet50_gluoncv_coco",
                                    "faster_rcnn_mobilenetv2", "faster_rcnn_fpn_mobilenetv2"])
def test_the_rpn_trains_against_the_anchors_inference_decodes(config):
    """In either ``rcnn_convention`` the RPN target operator matches ground truth against the
    very anchors the proposals decode (GluonCV's rounded pixel windows for an imported
    model, the zoo's continuous ones otherwise)."""
    model = build_model(network_config(config), data_shape=128, max_size=192)
    decoded = inference_anchors(model, 128, 192)
    shapes = [(1, 2 * a.shape[0]) + a.shape[1:3] for a in decoded]
    trained = target_op_anchors(model, shapes)
    np.testing.assert_array_equal(trained, np.concatenate([a.reshape(-1, 4) for a in decoded]))
    gluoncv_anchors = model.spec["rcnn_convention"] == "gluoncv"
    # a box of the zoo's convention is centred on its cell; GluonCV's on its pixel window
    first = decoded[0][:, 0, 0]
    centre = (first[:, 0] + first[:, 2]) / 2
    stride = model.spec.get("fpn_strides", [16])[0]
    np.testing.assert_allclose(centre, (stride - 1) / 2 if gluoncv_anchors else stride / 2)


def test_an_imported_rcnn_trains_its_rpn_against_gluoncvs_anchors():
    """The anchors of an imported C4 model's RPN targets are GluonCV's stored constant (the
    anchors GluonCV's network decodes against), cell by cell."""
    with mx.name.NameManager():
        net = gluoncv.model_zoo.get_model("faster_rcnn_resnet50_v1b_voc", pretrained=False,
                                          pretrained_base=False)
    net.rpn.anchor_generator.initialize()
    stored = net.rpn.anchor_generator.anchors.data().asnumpy()  # (1, 1, rows, cols, 4A)
    model = build_model(network_config("faster_rcnn_resnet50_gluoncv_voc"),
                        data_shape=128, max_size=192)
    height, width = 8, 12  # the stride-16 map of a 128 x 192 input
    count = stored.shape[-1] // 4
    trained = target_op_anchors(model, [(1, 2 * count, height, width)])
    theirs = stored[0, 0, :height, :width].reshape(height, width, count, 4)
    np.testing.assert_array_equal(trained.reshape(count, height, width, 4),
                                  theirs.transpose(2, 0, 1, 3))


RAW_SIZES = [(301, 403), (131, 97), (240, 481), (175, 175)]
"""Raw ``(height, width)`` of the end-to-end images, odd sides: a landscape one shrunk, a
portrait one enlarged (bicubic overshoots), one capped by ``max_size``, a square."""


def imported_artifact(name, net, tmp_path, proposals, short, max_size):
    """GluonCV's ``net`` imported as an artifact resized to ``short`` (long side at most
    ``max_size``) that keeps ``proposals`` RPN proposals."""
    prefix = str(tmp_path / name)
    common.import_net(IMPORTERS[name], net, prefix, "test weights", data_shape=short,
                      max_size=max_size, rpn_post_nms_top_n_test=proposals)
    return prefix


SCORE_TOLERANCE, BOX_TOLERANCE = 1e-4, 0.01


def unmatched(ours, theirs):
    """The first of ``ours`` rows that has no row of ``theirs`` of its class, score within
    :data:`SCORE_TOLERANCE`, box within :data:`BOX_TOLERANCE` pixels and rank equal up to
    ties (their scores at the two ranks within the tolerance), each used once; None when
    every row has one. A row at the cut-off (its score within the tolerance of GluonCV's
    last) may have none: its twin ranks 101st there."""
    free = np.ones(len(theirs), bool)
    for rank, row in enumerate(ours):
        fits = (free & (theirs[:, 0] == row[0])
                & (np.abs(theirs[:, 1] - row[1]) < SCORE_TOLERANCE)
                & (np.abs(theirs[:, 1] - theirs[min(rank, len(theirs) - 1), 1])
                   < SCORE_TOLERANCE)
                & (np.abs(theirs[:, 2:] - row[2:]).max(axis=1) < BOX_TOLERANCE))
        if fits.any():
            free[np.argmax(fits)] = False
        elif row[1] - theirs[-1, 1] >= SCORE_TOLERANCE:
            return rank
    return None


def check_pipelines_equal(name, tmp_path, proposals, short, max_size, sizes=RAW_SIZES):
    """``zoo.load_detector`` on raw images detects what GluonCV's ``transform_test`` and
    network detect: the same top 100 classes in order, scores within 1e-4, boxes (GluonCV's
    mapped back to the image, axis by axis, as ours are) within 0.01 pixel. Two detections
    whose scores tie within 1e-4 may come in either order: the resized pixels may differ by
    a grey level (OpenCV 4 against MXNet's 3.4), which moves scores by about 1e-5."""
    net = random_gluon_net(name, proposals)
    # larger class logits spread the scores, so that their order means something
    predictor = net.class_predictor.weight
    predictor.set_data(predictor.data() * 2)
    detector = zoo.load_detector(imported_artifact(name, net, tmp_path, proposals, short,
                                                   max_size))
    for image in random_images(sizes):
        x, _ = transform_test(image, short=short, max_size=max_size, mean=MEAN, std=STD)
        theirs = gluon_rows(net, x)
        height, width = image.shape[:2]
        where = "%s on a raw %dx%d image" % (name, height, width)
        assert len(theirs) == TOP and theirs[0, 1] - theirs[-1, 1] > 0.01, \
            "%s: degenerate test, GluonCV's scores %s" % (where, theirs[[0, -1], 1])
        # GluonCV's boxes as the zoo reports boxes: clipped to the image, those under a
        # pixel there dropped (GluonCV keeps them, past the image's edge)
        theirs[:, 2:] /= np.array([x.shape[3], x.shape[2]] * 2, np.float32)
        theirs = image_rows(theirs, (width, height))
        theirs[:, 2:] *= np.array([width, height] * 2, np.float32)
        found = detector(image.asnumpy(), score_threshold=0.0, max_detections=len(theirs))
        ours = np.column_stack([found.labels, found.scores, found.boxes])
        assert len(ours) == len(theirs), where
        rank = unmatched(ours, theirs)
        assert rank is None, "%s: detection %d %s is not GluonCV's %s" % (
            where, rank, ours[rank], theirs[rank])


@pytest.mark.parametrize("name, proposals", [
    ("faster_rcnn_resnet50_v1b_voc", 50),
    # the same pipeline (GluonCV's presets, resize and im_info) as C4's: `make test-slow`
    pytest.param("faster_rcnn_fpn_resnet50_v1b_coco", 200, marks=pytest.mark.slow)])
def test_raw_images_detect_what_gluoncvs_whole_pipeline_detects(name, proposals, tmp_path,
                                                                as_gluoncv_runs):
    check_pipelines_equal(name, tmp_path, proposals, short=160, max_size=256)


@pytest.mark.slow
@pytest.mark.parametrize("name, proposals, short, max_size", [
    ("faster_rcnn_resnet50_v1b_voc", 300, 600, 1000),
    ("faster_rcnn_fpn_resnet50_v1b_coco", 1000, 800, 1333)])
def test_raw_images_at_full_size_detect_what_gluoncvs_pipeline_detects(
        name, proposals, short, max_size, tmp_path, as_gluoncv_runs):
    check_pipelines_equal(name, tmp_path, proposals, short, max_size,
                          sizes=[(480, 640), (640, 427), (333, 500), (1200, 801)])


@pytest.mark.parametrize("size", [(301, 403), (97, 131), (3, 5), (1199, 1999), (240, 481)])
def test_the_imported_resize_is_gluoncvs(size):
    """The short-side size rule and the bicubic resize of the imported configs against
    GluonCV's ``resize_short_within`` (MXNet's interp 2): the same size, pixels at most one
    grey level apart in a few values (OpenCV 4 against MXNet's OpenCV 3.4)."""
    image = random_images([size])[0] if min(size) >= 16 else mx.nd.array(
        np.random.RandomState(0).randint(0, 256, size + (3,)), dtype="uint8")
    for short, max_size in ((160, 256), (600, 1000), (800, 1333)):
        theirs = resize_short_within(image, short, max_size).asnumpy()
        height, width, _ = scaled_size(size[0], size[1], short, max_size)
        assert (height, width) == theirs.shape[:2], (size, short, max_size)
        ours = resize_image(image.asnumpy(), (height, width), "bicubic")
        differ = np.abs(ours.astype(int) - theirs)
        assert differ.max() <= 1 and np.count_nonzero(differ) <= max(1, 1e-3 * ours.size)
