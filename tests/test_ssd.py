"""SSD models: parameter sizes, exported files, stable names, forward and backward."""
import json
import os

import mxnet as mx
import numpy as np
import pytest

import zoo

from conftest import forward

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


def small_input_overrides(name):
    """Three feature maps at 128x128: two backbone stages and one extra block."""
    taps = [layer for layer in zoo.get_config(name)["from_layers"] if layer][-2:]
    return dict(from_layers=taps + [""], num_filters=[-1, -1, 128],
                strides=[-1, -1, 2], pads=[-1, -1, 1], normalizations=[-1] * 3,
                sizes=[[0.2, 0.3], [0.4, 0.5], [0.7, 0.8]], ratios=[[1, 2, 0.5]] * 3,
                steps=None, data_shape=128)


def test_resnet101_adds_exactly_17_stage3_units():
    r50 = zoo.get_model("ssd_resnet50", num_classes=20, data_shape=512)
    r101 = zoo.get_model("ssd_resnet101", num_classes=20, data_shape=512)
    assert r101.num_params() - r50.num_params() == 17 * stage3_unit_params()


@pytest.mark.parametrize("name", sorted(zoo.list_models()))
def test_num_params_matches_arrays_and_exported_file(name, models, tmp_path):
    model = models[name]
    args, aux = model.init_params(seed=0)
    assert model.num_params() == sum(a.size for a in args.values())
    assert not set(args) & {"data", "label"}
    assert all(k.endswith(("moving_mean", "moving_var")) for k in aux)
    symbol_file, params_file = model.export(str(tmp_path / name))
    assert os.path.getsize(params_file) == expected_params_file_size(args, aux)
    loaded_sym, loaded_args, loaded_aux = mx.model.load_checkpoint(str(tmp_path / name), 0)
    assert loaded_sym.tojson() == model.symbol().tojson()
    assert sum(a.size for a in loaded_args.values()) == model.num_params()


def test_symbols_have_same_names_every_time():
    names = ["ssd_resnet50", "ssd_mobilenetv2", "ssd_inceptionv3"]

    def build_all():
        graphs = {}
        for name in names:
            model = zoo.get_model(name, data_shape=300)
            graphs[name] = (model.symbol().tojson(), model.train_symbol().tojson())
        return graphs

    first = build_all()
    second = build_all()
    assert first == second
    for inference, train in first.values():
        ops = [n["name"] for n in json.loads(train)["nodes"]]
        assert not [op for op in ops if op.startswith("_plus") or op[-1:].isdigit()
                    and op.rstrip("0123456789") in ("convolution", "activation")]


@pytest.mark.parametrize("name", sorted(zoo.list_models()))
def test_inference_forward(name, models):
    model = models[name]
    args, aux = model.init_params(seed=0)
    side = model.config["data_shape"]
    image = np.random.RandomState(0).uniform(-1, 1, (2, 3, side, side)).astype("float32")
    det = forward(model.symbol(), args, aux, data=image)[0]
    assert det.shape == (2, model.num_anchors(), 6)
    kept = det[det[:, :, 0] >= 0]
    assert len(kept) > 0
    assert set(np.unique(det[:, :, 0])) <= set(range(-1, model.config["num_classes"]))
    assert ((kept[:, 1] >= 0) & (kept[:, 1] <= 1)).all()
    assert ((kept[:, 2:] >= 0) & (kept[:, 2:] <= 1)).all()


@pytest.mark.parametrize("name", ["ssd_mobilenetv2", "ssd_resnet50"])
def test_training_step_learns_a_fixed_batch(name):
    model = zoo.get_model(name, num_classes=2, **small_input_overrides(name))
    args, aux = model.init_params(seed=0)
    rng = np.random.RandomState(0)
    data = rng.uniform(-1, 1, (2, 3, 128, 128)).astype("float32")
    label = np.full((2, 3, 5), -1, dtype="float32")
    label[0, 0] = [0, 0.1, 0.1, 0.5, 0.6]
    label[1, :2] = [[1, 0.4, 0.3, 0.9, 0.9], [0, 0.05, 0.5, 0.3, 0.95]]
    sym = model.train_symbol()
    arrays = dict(args, data=mx.nd.array(data), label=mx.nd.array(label))
    grads = {k: mx.nd.zeros_like(v) for k, v in args.items()}
    executor = sym.bind(mx.cpu(), arrays, args_grad=grads, aux_states=aux)
    optimizer = mx.optimizer.SGD(learning_rate=0.01, momentum=0.9, rescale_grad=0.5)
    updater = mx.optimizer.get_updater(optimizer)
    losses = []
    for _ in range(20):
        cls_prob, loc_loss, cls_target, _ = executor.forward(is_train=True)
        target = cls_target.asnumpy()
        prob = cls_prob.asnumpy()
        valid = target >= 0
        picked = np.take_along_axis(prob, np.maximum(target, 0)[:, None, :].astype(int), 1)[:, 0]
        positives = max((target > 0).sum(), 1)
        losses.append(-np.log(picked[valid] + 1e-8).mean()
                      + loc_loss.asnumpy().sum() / (4 * positives))
        executor.backward()
        for i, key in enumerate(sorted(grads)):
            updater(i, grads[key], args[key])
    assert all(np.isfinite(losses))
    assert losses[-1] < 0.7 * losses[0]
    assert (target > 0).sum() > 0
