"""SSD models: stable names, forward and backward."""
import json

import mxnet as mx
import numpy as np
import pytest

import zoo

from conftest import forward, graph_runs
from factories import smooth_image, spread_ssd_model


def small_input_overrides(name):
    """Three feature maps at 128x128: two backbone stages and one extra block."""
    taps = [layer for layer in zoo.get_config(name)["from_layers"] if layer][-2:]
    return dict(from_layers=taps + [""], num_filters=[-1, -1, 128],
                strides=[-1, -1, 2], pads=[-1, -1, 1], normalizations=[-1] * 3,
                sizes=[[0.2, 0.3], [0.4, 0.5], [0.7, 0.8]], ratios=[[1, 2, 0.5]] * 3,
                steps=None, data_shape=128)


SSD_MODELS = sorted(name for name in zoo.list_models() if name.startswith("ssd_"))


def test_symbols_have_same_names_every_time():
    names = ["ssd_resnet50", "ssd_mobilenetv2", "ssd_inceptionv3", "faster_rcnn_resnet50",
             "faster_rcnn_inceptionv3"]

    def build_all():
        graphs = {}
        for name in names:
            model = zoo.get_model(name)
            graphs[name] = (model.symbol().tojson(), model.train_symbol().tojson())
        return graphs

    first = build_all()
    second = build_all()
    assert first == second
    for inference, train in first.values():
        ops = [n["name"] for n in json.loads(train)["nodes"]]
        assert not [op for op in ops if op.startswith("_plus") or op[-1:].isdigit()
                    and op.rstrip("0123456789") in ("convolution", "activation")]


@pytest.mark.parametrize("name", graph_runs(SSD_MODELS))
def test_inference_forward(name, models):
    model = models[name]
    args, aux = model.init_params(seed=0)
    side = model.config["data_shape"]
    image = np.random.RandomState(0).uniform(-1, 1, (2, 3, side, side)).astype("float32")
    det = forward(model.symbol(), args, aux, data=image)[0]
    multibox = model.config["post_processing"] == "multibox"
    # MultiBoxDetection keeps a row per anchor; per-class NMS the nms_topk best rows
    assert det.shape == (2, model.describe()[1] if multibox else model.config["nms_topk"], 6)
    kept = det[det[:, :, 0] >= 0]
    assert len(kept) > 0
    assert set(np.unique(det[:, :, 0])) <= set(range(-1, model.config["num_classes"]))
    assert ((kept[:, 1] >= 0) & (kept[:, 1] <= 1)).all()
    if multibox:  # GluonCV's per-class post-processing leaves boxes unclipped
        assert ((kept[:, 2:] >= 0) & (kept[:, 2:] <= 1)).all()


@pytest.mark.parametrize("post_processing", ["multibox", "per_class"])
def test_the_score_threshold_field_sets_the_candidates_the_graph_keeps(post_processing):
    """A config's ``score_threshold`` drops the candidates under it before NMS, and only
    them: whether NMS keeps a box depends on the boxes scoring above it alone."""
    image = smooth_image(97, 143, 0)[:, :, ::-1].copy()

    def kept(**overrides):
        model = spread_ssd_model(post_processing=post_processing, **overrides)
        return zoo.Detector.from_model(model)(image, score_threshold=0.0,
                                              max_detections=100000)

    default, raised = kept(), kept(score_threshold=0.6)
    above = default.scores > 0.6
    assert 0 < above.sum() < len(default)
    np.testing.assert_array_equal(raised.scores, default.scores[above])
    np.testing.assert_array_equal(raised.boxes, default.boxes[above])
    np.testing.assert_array_equal(raised.labels, default.labels[above])


@pytest.mark.parametrize("name,learning_rate", [("ssd_mobilenetv2", 0.0025),
                                                ("ssd_resnet50", 0.0005)])
def test_training_step_learns_a_fixed_batch(name, learning_rate):
    """From random weights a ResNet with batch norm over two images needs a smaller step.
    (0.01 and 0.002 before the loss was normalised per positive anchor: 4x the gradient.)"""
    model = zoo.get_model(name, num_classes=2, **small_input_overrides(name))
    args, aux = model.init_params(seed=0)
    rng = np.random.RandomState(0)
    data = rng.uniform(-1, 1, (2, 3, 128, 128)).astype("float32")
    label = np.full((2, 3, 6), -1, dtype="float32")
    label[0, 0] = [0, 0.1, 0.1, 0.5, 0.6, 0]
    label[1, :2] = [[1, 0.4, 0.3, 0.9, 0.9, 0], [0, 0.05, 0.5, 0.3, 0.95, 1]]
    sym = model.train_symbol()
    arrays = dict(args, data=mx.nd.array(data), label=mx.nd.array(label))
    grads = {k: mx.nd.zeros_like(v) for k, v in args.items()}
    executor = sym.bind(mx.cpu(), arrays, args_grad=grads, aux_states=aux)
    optimizer = mx.optimizer.SGD(learning_rate=learning_rate, momentum=0.9, rescale_grad=0.5)
    updater = mx.optimizer.get_updater(optimizer)
    losses = []
    for _ in range(20):
        outputs = executor.forward(is_train=True)
        losses.append(sum(model.training_losses(outputs).values()))
        executor.backward()
        for i, key in enumerate(sorted(grads)):
            updater(i, grads[key], args[key])
    target = dict(zip(sym.list_outputs(), outputs))["cls_label_output"].asnumpy()
    assert all(np.isfinite(losses))
    assert np.mean(losses[-3:]) < 0.7 * losses[0], losses
    assert (target > 0).sum() > 0
