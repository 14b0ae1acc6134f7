"""Faster R-CNN with FPN: taps proven from the graph, the pyramid's shapes, one RPN head for
every level, ROIs pooled from the level of their size."""
import json
import math

import mxnet as mx
import numpy as np
import pytest

import zoo
from symbols import fpn
from symbols.layers import StrictNameManager

FPN_MODELS = sorted(name for name in zoo.list_models() if name.startswith("faster_rcnn_fpn_"))
SMALL = dict(data_shape=160, max_size=224, num_classes=3)


def test_every_backbone_has_an_fpn_model():
    ours = [name for name in FPN_MODELS if "gluoncv" not in name]  # GluonCV's are imports
    assert [name[len("faster_rcnn_fpn_"):] for name in ours] == sorted(
        ["resnet50", "resnet101", "mobilenetv2", "inceptionv3"])


@pytest.mark.parametrize("name", FPN_MODELS)
def test_taps_are_the_last_layer_of_their_stage(name):
    """Each derived tap is the layer the backbone declares as the end of a stage."""
    model = zoo.get_model(name, **SMALL)
    stage_ends = {stage.layer: stage.stride for stage in model.backbone.stages()}
    layers, strides = model.config["fpn_layers"], model.config["fpn_strides"]
    assert [stage_ends[layer] for layer in layers] == strides


@pytest.mark.parametrize("features,field,expected", [
    (["res2", "stage2_unit2_relu", "res4", "res5"], "fpn_features[1]", "stage 'res3'"),
    (["res2", "res3", "stage3_unit3_relu", "res5"], "fpn_features[2]", "stage 'res4'"),
    (["res2", "res3", "res4", "res6"], "fpn_features[3]", "a stage (res2, res3, res4, res5)"),
])
def test_mid_stage_tap_fails_naming_the_stage(features, field, expected):
    with pytest.raises(zoo.ConfigError) as err:
        zoo.get_model("faster_rcnn_fpn_resnet101", fpn_features=features)
    assert err.value.field == field and expected in str(err.value)
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("overrides,field,expected", [
    ({"fpn_strides": [4, 8, 16, 16]}, "fpn_strides[3]", "twice the previous level's stride"),
    ({"fpn_strides": [8, 16, 32, 64]}, "fpn_strides[0]", "the stride of res2, 4"),
    ({"fpn_strides": [4, 8, 16]}, "fpn_strides", "4"),
    ({"anchor_sizes": [32, 64, 128, 256]}, "anchor_sizes", "one size per RPN level: 5"),
    ({"rpn_extra_levels": 0}, "anchor_sizes", "one size per RPN level: 4"),
    ({"rpn_post_nms_top_n_test": 6000}, "rpn_post_nms_top_n_test", "x 5 levels = 5000"),
])
def test_bad_pyramid_configs_raise(overrides, field, expected):
    with pytest.raises(zoo.ConfigError) as err:
        zoo.get_model("faster_rcnn_fpn_resnet50", **overrides)
    assert err.value.field == field and expected in str(err.value)


def test_inception_has_no_stride_4_level():
    with pytest.raises(zoo.ConfigError) as err:
        zoo.get_model("faster_rcnn_fpn_inceptionv3", fpn_features=["c2", "c3", "c4", "c5"],
                      fpn_strides=[4, 8, 16, 32], rpn_extra_levels=1)
    assert "a stage (c3, c4, c5)" in str(err.value)


@pytest.mark.parametrize("name", FPN_MODELS)
@pytest.mark.parametrize("height,width", [(160, 224), (203, 317)])
def test_pyramid_levels_halve(name, height, width):
    """Every level, also on odd input sizes (Inception-v3's unpadded convolutions), is about
    half the size of the one below, and the anchors follow the configured sizes."""
    model = zoo.get_model(name, **SMALL)
    with StrictNameManager():
        features = fpn.pyramid_features(model.backbone, zoo.architectures.faster_rcnn_fpn.pyramid(
            model.spec))
    levels = zoo.architectures.faster_rcnn_fpn.anchors(model.spec)
    shapes = [features[level.tag].infer_shape(data=(1, 3, height, width))[1][0]
              for level in levels]
    assert all(shape[1] == 256 for shape in shapes)
    for finer, coarser in zip(shapes, shapes[1:]):
        assert abs(finer[2] / coarser[2] - 2) <= 1 and abs(finer[3] / coarser[3] - 2) <= 1
    assert [level.stride * level.scales[0] for level in levels] == model.config["anchor_sizes"]


def test_one_rpn_head_serves_every_level():
    model = zoo.get_model("faster_rcnn_fpn_resnet50", **SMALL)
    nodes = json.loads(model.symbol().tojson())["nodes"]
    names = [node["name"] for node in nodes]
    for weight in ("rpn_conv_3x3_weight", "rpn_cls_score_weight", "rpn_bbox_pred_weight"):
        users = [node["name"] for node in nodes if node["op"] == "Convolution"
                 and any(names[i] == weight for i, _, _ in node["inputs"])]
        assert names.count(weight) == 1
        assert sorted(user.rsplit("_", 1)[1] for user in users) == ["p2", "p3", "p4", "p5", "p6"]


def expected_level(box, low, high):
    size = math.sqrt((box[2] - box[0]) * (box[3] - box[1]))
    return min(max(math.floor(4 + math.log2(size / 224 + 1e-12)), low), high)


HEAD = fpn.PyramidBoxHead(roi_size=(2, 2), num_classes=3, box_stds=(0.1, 0.1, 0.2, 0.2),
                          units=8, canonical_size=224, canonical_level=4)


def test_rois_pool_from_the_level_of_their_size():
    """Boxes of 20 to 900 pixels go to levels 2-5 as the paper's formula says, and each
    pooled ROI equals ROIAlign on its own level alone."""
    strides = (4, 8, 16, 32)
    rng = np.random.RandomState(0)
    sides = [20, 100, 111, 113, 224, 230, 447, 460, 900]
    rois = np.array([[i % 2, 5, 7, 5 + side, 7 + side * 0.9] for i, side in enumerate(sides)],
                    "float32")
    maps = {fpn.level_tag(s): rng.normal(size=(2, 3, 1024 // s, 1024 // s)).astype("float32")
            for s in strides}
    with StrictNameManager():
        rois_var = mx.sym.Variable("rois")
        graph = mx.sym.Group([fpn.roi_levels(rois_var, HEAD, strides), fpn.pooled_rois(
            {tag: mx.sym.Variable(tag) for tag in maps}, rois_var, HEAD, strides)])
    arrays = dict({k: mx.nd.array(v) for k, v in maps.items()}, rois=mx.nd.array(rois))
    levels, pooled = (o.asnumpy() for o in graph.bind(mx.cpu(), arrays).forward())
    expected = [expected_level(roi[1:], 2, 5) for roi in rois]
    assert levels[:, 0].tolist() == expected and sorted(set(expected)) == [2, 3, 4, 5]
    for roi, level, out in zip(rois, expected, pooled):
        alone = mx.nd.contrib.ROIAlign(mx.nd.array(maps["p%d" % level]), mx.nd.array(roi[None]),
                                       pooled_size=(2, 2), spatial_scale=1.0 / 2 ** level,
                                       sample_ratio=2).asnumpy()[0]
        np.testing.assert_allclose(out, alone, rtol=1e-5, atol=1e-6)
