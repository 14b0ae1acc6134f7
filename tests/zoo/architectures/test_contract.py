"""The architecture contract: an abstract base every detector implements, a frozen config
spec that never writes into the user's dict, models rebuilt from their own config, losses
picked by output name, and one IoU, one mean/std and one number check."""
import copy
import json
import types

import mxnet as mx
import numpy as np
import pytest

import zoo
from symbols import boxes
from zoo.schema import preprocessing
from zoo.schema import checks as validate
from zoo.config.loading import ModelSpec, resolve
from zoo.architectures import ARCHITECTURES, Architecture
from zoo.architectures.base import output_name, outputs_by_name
from zoo.schema.graph import BackboneGraph
from symbols.backbones import Backbone, get_backbone

SSD_SMALL = dict(from_layers=["c4", "c5", ""], num_filters=[-1, -1, 128], strides=[-1, -1, 2],
                 pads=[-1, -1, 1], normalizations=[-1] * 3, sizes=[[0.2], [0.4], [0.7]],
                 ratios=[[1, 2]] * 3, steps=None, data_shape=128, num_classes=2)
RCNN_SMALL = dict(data_shape=160, max_size=224, num_classes=3, rpn_pre_nms_top_n_test=400,
                  rpn_post_nms_top_n_test=50, rpn_pre_nms_top_n_train=1000,
                  rpn_post_nms_top_n_train=200, rcnn_batch_rois=16, rpn_batch_size=64,
                  roi_size=[8, 8])


def graphs(model):
    return model.symbol().tojson(), model.train_symbol().tojson()


# The base classes are abstract.

def test_architecture_is_abstract():
    with pytest.raises(TypeError):
        Architecture()
    complete = type(ARCHITECTURES["ssd"])
    members = {name: getattr(complete, name) for name in Architecture.__abstractmethods__}
    for missing in sorted(Architecture.__abstractmethods__):
        partial = type("Partial", (Architecture,),
                       {k: v for k, v in members.items() if k != missing})
        with pytest.raises(TypeError, match=missing):
            partial()


def test_backbone_declares_build_stage():
    assert "build_stage" in Backbone.__abstractmethods__
    complete = type(get_backbone("mobilenetv2"))
    partial = type("NoStage", (Backbone,), {name: getattr(complete, name) for name in
                                            ("stages", "_body")})
    with pytest.raises(TypeError, match="build_stage"):
        partial()


@pytest.mark.parametrize("name", sorted(ARCHITECTURES))
def test_registered_architectures_implement_the_contract(name):
    arch = ARCHITECTURES[name]
    assert isinstance(arch, Architecture) and arch.name == name
    assert not type(arch).__abstractmethods__
    assert isinstance(arch.required, tuple) and isinstance(arch.loss_names, tuple)
    with pytest.raises(TypeError):
        arch.defaults["num_classes"] = 3
    assert arch.defaults["mean_pixels"] == list(preprocessing.MEAN_PIXELS)
    assert arch.defaults["std_pixels"] == list(preprocessing.STD_PIXELS)


# Resolution returns a frozen spec and writes into nothing it is given.

def test_resolve_returns_a_read_only_spec_and_leaves_its_input_alone():
    raw = zoo.get_config("ssd_mobilenetv2")
    overrides = {"sizes": [[0.1, 0.141], [0.2, 0.272], [0.37, 0.447], [0.54, 0.619],
                           [0.71, 0.79]], "num_classes": 3, "data_shape": 256}
    raw_before, overrides_before = copy.deepcopy(raw), copy.deepcopy(overrides)
    spec = resolve(raw, overrides)
    assert raw == raw_before and overrides == overrides_before
    assert isinstance(spec, ModelSpec) and spec["num_classes"] == 3
    before = spec.to_dict()
    with pytest.raises(TypeError):
        spec["num_classes"] = 5
    with pytest.raises(TypeError):
        del spec["num_classes"]
    with pytest.raises(AttributeError):
        spec._fields = {}
    spec["sizes"].append([0.9])
    spec["sizes"][0][0] = 0.5
    spec.to_dict()["ratios"].clear()
    overrides["sizes"][0][0] = 0.6
    raw["from_layers"].append("c6")
    assert spec.to_dict() == before and spec == before


def test_merged_gives_a_new_spec():
    spec = resolve(zoo.get_config("ssd_resnet50"))
    derived = {"feature_layers": ["stage3_unit6_relu"]}
    merged = spec.merged(derived)
    derived["feature_layers"].append("x")
    assert "feature_layers" not in spec
    assert merged["feature_layers"] == ["stage3_unit6_relu"]
    assert copy.deepcopy(merged) is merged


@pytest.mark.parametrize("name,overrides", [("ssd_mobilenetv2", SSD_SMALL),
                                            ("faster_rcnn_mobilenetv2", RCNN_SMALL)])
def test_derive_returns_new_fields_and_build_model_keeps_the_users_dict(name, overrides):
    raw = zoo.get_config(name)
    raw.update(copy.deepcopy(overrides))
    raw_before = copy.deepcopy(raw)
    spec = resolve(raw)
    arch, backbone = ARCHITECTURES[spec["arch"]], get_backbone(spec["backbone"])
    height, width = arch.input_shapes(spec)["data"][2:]
    derived = arch.derive(spec, backbone, BackboneGraph(backbone.body(), height, width))
    assert isinstance(derived, dict) and derived
    assert spec == resolve(raw)
    model = zoo.build_model(raw)
    assert raw == raw_before
    assert {k: model.config[k] for k in derived} == derived
    before = model.config
    model.config.clear()
    model.config["num_classes"] = 99
    assert model.config == before == model.spec


# A model's own config rebuilds it: how an artifact loads without the registry.

@pytest.mark.parametrize("name", zoo.list_models())
def test_model_config_rebuilds_the_same_model(models, name):
    model = models[name]
    stored = json.loads(json.dumps(model.config))  # what an artifact's metadata holds
    rebuilt = zoo.build_model(stored)
    assert rebuilt.config == model.config
    assert graphs(rebuilt) == graphs(model)
    assert rebuilt.preprocessing() == model.preprocessing()


def test_rebuilt_model_ignores_a_changed_default(models, monkeypatch):
    model = models["ssd_mobilenetv2"]
    arch = ARCHITECTURES["ssd"]
    monkeypatch.setattr(type(arch), "defaults",
                        types.MappingProxyType(dict(arch.defaults, nms_threshold=0.9)))
    assert zoo.get_model("ssd_mobilenetv2", data_shape=192).config["nms_threshold"] == 0.9
    rebuilt = zoo.build_model(model.config)
    assert rebuilt.config == model.config and graphs(rebuilt) == graphs(model)


# Training outputs are named and losses picked by name.

@pytest.mark.parametrize("name", zoo.list_models())
def test_training_outputs_are_named(models, name):
    model = models[name]
    names = [output_name(o) for o in model.train_symbol().list_outputs()]
    assert names == list(model.arch.output_names)
    assert len(set(names)) == len(names)


def training_outputs(model):
    args, aux = model.init_params(seed=0)
    shapes = model.train_input_shapes(1, 3)
    data = np.random.RandomState(0).uniform(-1, 1, shapes["data"]).astype("float32")
    label = np.full(shapes["label"], -1, "float32")
    label[0, :2] = [[0, 0.1, 0.1, 0.5, 0.6, 0], [1, 0.4, 0.3, 0.95, 0.9, 0]]
    arrays = {k: mx.nd.array(v) for k, v in model.input_arrays(data).items()}
    # With gradient buffers, as training binds it: MXNet's synchronous engine, the zoo's,
    # fails on a training graph bound without them (an MKL-DNN reorder error).
    executor = model.train_symbol().bind(mx.cpu(), dict(args, label=mx.nd.array(label),
                                                         **arrays),
                                         args_grad={k: mx.nd.zeros_like(v)
                                                    for k, v in args.items()},
                                         aux_states=aux)
    np.random.seed(0)
    return [out.asnumpy() for out in executor.forward(is_train=True)]


@pytest.mark.parametrize("name,overrides", [("ssd_mobilenetv2", SSD_SMALL),
                                            ("faster_rcnn_mobilenetv2", RCNN_SMALL)])
def test_losses_are_picked_by_name(name, overrides):
    model = zoo.get_model(name, **overrides)
    outputs = training_outputs(model)
    losses = model.training_losses(outputs)
    assert tuple(losses) == model.loss_names
    assert all(np.isfinite(v) for v in losses.values())
    names = model.train_symbol().list_outputs()
    for order in (np.arange(len(names))[::-1], np.random.RandomState(0).permutation(len(names))):
        shuffled = outputs_by_name([names[i] for i in order], [outputs[i] for i in order])
        assert list(shuffled) == [output_name(names[i]) for i in order]
        assert model.arch.training_losses(shuffled) == losses
    with pytest.raises(ValueError, match="outputs"):
        model.training_losses(outputs[:-1])


# One IoU, one mean/std source, one number check.

def reference_iou(a, b, offset):
    """The formula the three old functions shared, one pair at a time."""
    out = np.zeros((len(a), len(b)))
    for i, p in enumerate(a):
        for j, q in enumerate(b):
            w = max(min(p[2], q[2]) - max(p[0], q[0]) + offset, 0)
            h = max(min(p[3], q[3]) - max(p[1], q[1]) + offset, 0)
            union = ((p[2] - p[0] + offset) * (p[3] - p[1] + offset)
                     + (q[2] - q[0] + offset) * (q[3] - q[1] + offset) - w * h)
            out[i, j] = w * h / union if union > 0 else 0.0
    return out


@pytest.mark.parametrize("offset", [0, 1])
def test_one_iou_agrees_with_the_old_behaviours(offset):
    rng = np.random.RandomState(offset)
    corners = rng.uniform(0, 100, (40, 2))
    a = np.hstack([corners, corners + rng.uniform(0, 50, (40, 2))])
    b = np.vstack([a[:5], np.hstack([corners[:20], corners[:20] + 30])])
    np.testing.assert_allclose(boxes.iou(a, b, offset), reference_iou(a, b, offset), rtol=1e-12)
    assert boxes.iou(a.astype(np.float32), b.astype(np.float32), offset).dtype == np.float32
    # VOC rows carry more columns than the corners.
    wide = np.hstack([a, np.ones((len(a), 2))])
    np.testing.assert_array_equal(boxes.iou(wide, b, offset), boxes.iou(a, b, offset))


def test_iou_known_values_and_empty_union():
    a, b = np.array([[0.0, 0, 9, 9]]), np.array([[5.0, 5, 14, 14], [20, 20, 20, 20]])
    np.testing.assert_allclose(boxes.iou(a, b, 1), [[25 / 175, 0]])
    np.testing.assert_allclose(boxes.iou(a, b), [[16 / 146, 0]])
    assert boxes.iou(b[1:], b[1:])[0, 0] == 0  # a point: empty union, no NaN


def test_every_caller_uses_the_one_iou():
    from zoo.data import transforms
    from zoo.metrics import voc
    from symbols import rcnn_targets
    assert voc.box_iou is boxes.iou
    assert transforms.iou is boxes.iou
    assert rcnn_targets.box_iou is boxes.iou


def test_one_source_of_mean_and_std(models):
    from zoo import data
    assert data.MEAN_PIXELS is preprocessing.MEAN_PIXELS
    assert data.STD_PIXELS is preprocessing.STD_PIXELS
    assert models["faster_rcnn_resnet50"].preprocessing() == {
        "mean": list(preprocessing.MEAN_PIXELS), "std": list(preprocessing.STD_PIXELS),
        "resize": "short_side", "data_shape": [600, 1000], "short_side": 600, "max_size": 1000,
        "size_divisor": 16}
    assert models["faster_rcnn_fpn_resnet50"].preprocessing()["size_divisor"] == 32
    model = zoo.get_model("ssd_mobilenetv2", data_shape=192, mean_pixels=[1, 2, 3])
    assert model.preprocessing()["mean"] == [1.0, 2.0, 3.0]
    assert model.preprocessing()["data_shape"] == [192, 192]


def test_one_number_check():
    from zoo.data import coco
    assert coco.is_number is validate.is_number
    assert all(map(validate.is_number, (0, 1.5, -3, np.float32(2))))
    assert not any(map(validate.is_number, (True, float("nan"), float("inf"), "1", None)))
