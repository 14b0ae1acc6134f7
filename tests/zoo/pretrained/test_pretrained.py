"""Import of GluonCV classifier parameter files into our backbones."""
import os

import mxnet as mx
import numpy as np
import pytest
from gluoncv.model_zoo import get_model as gluoncv_model

import zoo
from symbols.backbones import get_backbone
from zoo.pretrained import find_gluoncv_file, import_gluoncv_params
from zoo.pretrained.maps import GLUONCV, gluoncv_name, param_map

from conftest import forward


def save_random_gluoncv(backbone, folder, seed=0):
    """A GluonCV classifier with random weights and non-trivial BN statistics, saved."""
    mx.random.seed(seed)
    net = gluoncv_model(gluoncv_name(backbone), pretrained=False)
    net.initialize(mx.init.Xavier())
    size = backbone.classifier_size
    net(mx.nd.zeros((1, 3, size, size)))
    for key, param in net.collect_params().items():
        if key.endswith(("running_var", "gamma")):
            param.set_data(mx.nd.random.uniform(0.5, 1.5, shape=param.shape))
        elif key.endswith(("running_mean", "beta")):
            param.set_data(mx.nd.random.normal(0, 0.1, shape=param.shape))
    path = os.path.join(str(folder), gluoncv_name(backbone) + "-0123abcd.params")
    net.save_parameters(path)
    return net, path


@pytest.mark.parametrize("name", sorted(GLUONCV))
def test_imported_classifier_matches_gluoncv_logits(name, tmp_path):
    backbone = get_backbone(name)
    net, path = save_random_gluoncv(backbone, tmp_path)
    size = backbone.classifier_size
    image = np.random.RandomState(1).uniform(-1, 1, (2, 3, size, size)).astype("float32")
    expected = net(mx.nd.array(image)).asnumpy()
    args, aux = import_gluoncv_params(backbone, path, include_classifier=True)
    ours = forward(backbone.classifier(), args, aux, data=image)[0]
    assert ours.shape == expected.shape
    assert np.abs(ours - expected).max() < 1e-4


def test_import_rejects_file_of_another_backbone(tmp_path):
    _, path = save_random_gluoncv(get_backbone("mobilenetv2"), tmp_path)
    with pytest.raises(ValueError, match="not a resnet50_v1b parameter file"):
        import_gluoncv_params(get_backbone("resnet50"), path)


def test_missing_weights_say_where_to_put_them(tmp_path, monkeypatch):
    monkeypatch.setenv("MXNET_HOME", str(tmp_path))
    with pytest.raises(zoo.PretrainedNotFound) as err:
        zoo.get_model("ssd_mobilenetv2", pretrained_backbone=True)
    message = str(err.value)
    assert os.path.join(str(tmp_path), "models") in message
    assert "mobilenetv2_1.0" in message
    with pytest.raises(zoo.PretrainedNotFound):
        find_gluoncv_file("resnet50_v1b", str(tmp_path))


def test_pretrained_backbone_loads_gluoncv_weights(tmp_path, monkeypatch):
    monkeypatch.setenv("MXNET_HOME", str(tmp_path))
    store = tmp_path / "models"
    store.mkdir()
    backbone = get_backbone("mobilenetv2")
    _, path = save_random_gluoncv(backbone, store)
    model = zoo.get_model("ssd_mobilenetv2", pretrained_backbone=True, data_shape=300)
    args, aux = model.init_params(seed=3)
    saved = mx.nd.load(path)
    mapping = param_map(backbone)
    for ours in ("conv1_weight", "block14_expand_bn_gamma"):
        np.testing.assert_array_equal(args[ours].asnumpy(), saved[mapping[ours]].asnumpy())
    np.testing.assert_array_equal(aux["conv_last_bn_moving_var"].asnumpy(),
                                  saved[mapping["conv_last_bn_moving_var"]].asnumpy())
    assert "fc_weight" not in args
    plain = zoo.get_model("ssd_mobilenetv2", data_shape=300).init_params(seed=3)[0]
    assert not np.array_equal(plain["conv1_weight"].asnumpy(), args["conv1_weight"].asnumpy())
