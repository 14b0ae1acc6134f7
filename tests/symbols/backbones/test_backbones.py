"""Backbones: published parameter counts, declared stages, explicit names."""
import json
import re

import mxnet as mx
import numpy as np
import pytest

from symbols.backbones import BACKBONES, get_backbone
from symbols.layers import StrictNameManager
from zoo.schema.graph import BackboneGraph

BACKBONE_NAMES = sorted(BACKBONES)


def trainable_params(sym, size):
    shapes, _, _ = sym.infer_shape(data=(1, 3, size, size))
    return sum(int(np.prod(s)) for n, s in zip(sym.list_arguments(), shapes) if n != "data")


def test_every_backbone_builds_under_its_registered_name():
    assert all(get_backbone(name).name == name for name in BACKBONE_NAMES)
    with pytest.raises(KeyError, match="known backbones"):
        get_backbone("vgg16")


@pytest.mark.parametrize("name", BACKBONE_NAMES)
def test_classifier_params_equal_published(name):
    backbone = get_backbone(name)
    sym = backbone.classifier()
    # the count the papers (and GluonCV's classifiers) publish, registered with the backbone
    assert trainable_params(sym, backbone.classifier_size) == BACKBONES[name].published_params
    _, out_shapes, _ = sym.infer_shape(data=(2, 3, backbone.classifier_size,
                                             backbone.classifier_size))
    assert out_shapes == [(2, 1000)]


@pytest.mark.parametrize("name", BACKBONE_NAMES)
@pytest.mark.parametrize("size", [300, 512])
def test_declared_stages_match_graph(name, size):
    backbone = get_backbone(name)
    graph = BackboneGraph(backbone.body(), size)
    strides = []
    for stage in backbone.stages():
        assert graph.channels(stage.layer) == stage.channels, stage
        assert graph.stride(stage.layer) == stage.stride, stage
        assert stage.layer in graph.trunk, stage
        assert graph.deeper_at_same_resolution(stage.layer) is None, stage
        strides.append(stage.stride)
    assert strides == sorted(set(strides))
    assert graph.output == backbone.stages()[-1].layer


@pytest.mark.parametrize("name", BACKBONE_NAMES)
def test_names_are_explicit_and_stable(name):
    first = get_backbone(name).classifier().tojson()
    for other in BACKBONE_NAMES:
        get_backbone(other).body()
    assert get_backbone(name).classifier().tojson() == first
    ops = [n["name"] for n in json.loads(first)["nodes"] if n["op"] != "null"]
    assert len(ops) == len(set(ops))
    generated = re.compile(r"^_?(plus|minus|mul|div|convolution|batchnorm|activation|pooling"
                           r"|fullyconnected|concat|elemwise_add|flatten)\d+$")
    assert not [op for op in ops if generated.match(op)]


def test_strict_names_reject_unnamed_operator():
    with StrictNameManager():
        data = mx.sym.Variable("data")
        with pytest.raises(ValueError, match="no explicit name"):
            _ = data + data


@pytest.mark.parametrize("name", BACKBONE_NAMES)
def test_last_stage_rebuilt_on_other_input_shares_weights(name):
    backbone = get_backbone(name)
    last, previous = backbone.stages()[-1], backbone.stages()[-2]
    with StrictNameManager():
        head = backbone.build_stage(mx.sym.Variable("roi_feat"), last.name)
    body_args = set(backbone.body().list_arguments())
    head_args = set(head.list_arguments()) - {"roi_feat"}
    assert head_args and head_args <= body_args
    _, out_shapes, _ = head.infer_shape(roi_feat=(1, previous.channels, 14, 14))
    assert out_shapes[0][1] == last.channels
