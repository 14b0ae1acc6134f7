"""Every registered model: parameter counts, exported files, checkpoint round trip."""
import os

import mxnet as mx
import pytest

import zoo
from zoo import artifact
from zoo.predictor import fuse

BOTTLENECK_WIDTH = 256


def stage3_unit_params(width=BOTTLENECK_WIDTH):
    """Trainable parameters of one ResNet stage-3 (res4) bottleneck: three convs and BNs."""
    convs = width * 4 * width + width * width * 9 + width * width * 4
    norms = 2 * (width + width + width * 4)
    return convs + norms


def expected_params_file_size(arg_params, aux_params):
    """Bytes of MXNet's NDArray list format holding ``arg:``/``aux:`` arrays of float32."""
    size = 8 + 8 + 8 + 8  # list magic, reserved, array count, name count
    for prefix, params in (("arg:", arg_params), ("aux:", aux_params)):
        for name, array in params.items():
            size += 4 + 4 + 4 + 8 * array.ndim + 4 + 4 + 4 + 4 * array.size
            size += 8 + len(prefix + name)
    return size


@pytest.mark.parametrize("arch,shape", [("ssd", 512), ("faster_rcnn", 600)])
def test_resnet101_adds_exactly_17_stage3_units(arch, shape):
    r50 = zoo.get_model(arch + "_resnet50", num_classes=20, data_shape=shape)
    r101 = zoo.get_model(arch + "_resnet101", num_classes=20, data_shape=shape)
    assert r101.num_params() - r50.num_params() == 17 * stage3_unit_params()


@pytest.mark.parametrize("name", sorted(zoo.list_models()))
def test_num_params_matches_arrays_and_exported_file(name, models, tmp_path):
    model = models[name]
    args, aux = model.init_params(seed=0)
    assert model.num_params() == sum(a.size for a in args.values())
    assert not set(args) & {"data", "label"}
    assert all(k.endswith(("moving_mean", "moving_var")) for k in aux)
    symbol_file, params_file = artifact.export(model, str(tmp_path / name))
    assert os.path.getsize(params_file) == expected_params_file_size(args, aux)
    loaded_sym, loaded_args, loaded_aux = mx.model.load_checkpoint(str(tmp_path / name), 0)
    assert loaded_sym.tojson() == fuse(model.symbol()).tojson()
    assert sum(a.size for a in loaded_args.values()) == model.num_params()


def test_a_model_prints_as_a_one_line_summary(monkeypatch):
    """``print(zoo.get_model(...))``: name, classes, input size and parameters, the count
    worked out once (it infers the graph's shapes), not at every repr."""
    model = zoo.get_model("ssd_mobilenetv2", num_classes=3, data_shape=256)
    inferred = []
    param_shapes = model.param_shapes
    monkeypatch.setattr(model, "param_shapes", lambda: inferred.append(1) or param_shapes())
    assert repr(model) == ("<DetectionModel ssd_mobilenetv2: 3 classes, input 256x256, "
                           "{:,} parameters>".format(model.num_params()))
    assert str(model) == repr(model) and len(inferred) == 1
    assert repr(zoo.get_model("faster_rcnn_resnet50")).startswith(
        "<DetectionModel faster_rcnn_resnet50: 20 classes, input short side 600, ")
