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
import mxnet as mx
import numpy as np
import pytest

from conftest import forward
from zoo import artifact
from zoo.architectures import faster_rcnn as c4
from zoo.gluoncv import common, import_gluoncv, rcnn
from zoo.config.registry import network_config
from zoo.model import build_model
from symbols.rpn import gluoncv_base_anchors

gluoncv = pytest.importorskip("gluoncv")
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


@pytest.mark.parametrize("name, proposals", [("faster_rcnn_resnet50_v1b_voc", 50),
                                            ("faster_rcnn_resnet50_v1b_coco", 50),
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
