"""Bad-input corpus, files against what they claim: an ONNX export's metadata against its
graph (class count, input and output names, ranks, dtypes; an empty file), an artifact's
stored config against its parameters, and a GluonCV parameter file against the network
before anything is imported."""
import json
import os

import mxnet as mx
import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import zoo
from test_onnx_runtime import NAMES, write_export
from zoo import artifact
from zoo.cli import main
from zoo.onnx.runtime import OnnxDetector, OnnxModelError, load_onnx_detector

IMAGE = np.full((40, 50, 3), 100, np.uint8)


def one_line_refusal(path, expected):
    with pytest.raises(OnnxModelError) as caught:
        OnnxDetector(path)(IMAGE)
    message = str(caught.value)
    assert message.startswith(str(path) + ": ") and "\n" not in message, message
    assert expected in message, message
    return message


def retyped(path, name, elem_type=None, shape=None):
    """Rewrite the input or output ``name`` of an export to ``elem_type`` / ``shape``."""
    model = onnx.load(str(path))
    for value in list(model.graph.input) + list(model.graph.output):
        if value.name == name:
            replacement = helper.make_tensor_value_info(
                name, elem_type or value.type.tensor_type.elem_type,
                shape if shape is not None else [d.dim_param or d.dim_value
                                                 for d in value.type.tensor_type.shape.dim])
            value.CopyFrom(replacement)
    onnx.save(model, str(path))
    return str(path)


@pytest.mark.parametrize("names", [NAMES[:2], NAMES[:1]])
def test_fewer_class_names_than_the_graph_detects_are_refused(tmp_path, names):
    # An export of an earlier version has no zoo.num_classes: the rows give it away.
    path = write_export(tmp_path / "toy.onnx", metadata={"zoo.class_names": json.dumps(names)})
    one_line_refusal(path, "detects class %d, but zoo.class_names lists %d classes"
                     % (len(names), len(names)))


def test_class_names_that_disagree_with_num_classes_are_refused_on_loading(tmp_path):
    path = write_export(tmp_path / "toy.onnx", metadata={"zoo.class_names": '["a", "b"]',
                                                         "zoo.num_classes": "3"})
    with pytest.raises(OnnxModelError, match="zoo.class_names lists 2 names, "
                                             "zoo.num_classes = 3"):
        OnnxDetector(path)


def rewired(path, last=None, cast_input=False):
    """An export whose graph really computes another output: ``last`` (``"flatten"`` or
    ``"double"``) is applied to the toy rows, or the ``data`` input is taken as double."""
    model = onnx.load(str(path))
    graph = model.graph
    for node in graph.node:
        node.input[:] = ["rows" if n == "detections" else
                         "data_float" if cast_input and n == "data" else n for n in node.input]
        node.output[:] = ["rows" if n == "detections" else n for n in node.output]
    if last == "flatten":
        graph.node.append(helper.make_node("Flatten", ["rows"], ["detections"], axis=1))
        output = helper.make_tensor_value_info("detections", TensorProto.FLOAT, ["batch", 24])
    else:
        to = TensorProto.DOUBLE if last == "double" else TensorProto.FLOAT
        graph.node.append(helper.make_node("Cast", ["rows"], ["detections"], to=to))
        output = helper.make_tensor_value_info("detections", to, ["batch", 4, 6])
    graph.output[0].CopyFrom(output)
    if cast_input:
        graph.node.insert(0, helper.make_node("Cast", ["data"], ["data_float"],
                                              to=TensorProto.FLOAT))
        graph.input[0].CopyFrom(helper.make_tensor_value_info(
            "data", TensorProto.DOUBLE, ["batch", 3, "height", "width"]))
    onnx.checker.check_model(model)
    onnx.save(model, str(path))
    return str(path)


@pytest.mark.parametrize("change, expected", [
    (dict(last="flatten"), "detections is tensor(float) of shape ['batch', 24]: expected "
                           "tensor(float) of rank 3, last axis 6"),
    (dict(last="double"), "detections is tensor(double) of shape ['batch', 4, 6]"),
    (dict(cast_input=True), "data is tensor(double) of shape ['batch', 3, 'height', 'width']: "
                            "expected tensor(float) of rank 4"),
])
def test_inputs_and_outputs_of_another_rank_or_dtype_are_refused(tmp_path, change, expected):
    path = rewired(write_export(tmp_path / "toy.onnx"), **change)
    one_line_refusal(path, expected)


# (An output declared (batch, 24) over rows the graph computes as (batch, 4, 6) is no
# longer a contradiction ONNX Runtime keeps: it merges the shapes to the computed one, which
# the zoo then reads correctly. A graph that really outputs (batch, 24) is refused above.)
@pytest.mark.parametrize("name, elem_type, shape", [
    ("data", None, ["batch", 3, 32]),
    ("data", TensorProto.FLOAT16, None),
    ("im_info", None, ["batch", 3, 1]),
])
def test_a_graph_that_contradicts_itself_is_the_zoos_error(tmp_path, name, elem_type, shape):
    path = retyped(write_export(tmp_path / "toy.onnx", im_info=True), name, elem_type, shape)
    one_line_refusal(path, "")


@pytest.mark.parametrize("content", [b"", b"\x08\x07", b"\n\x00"])
def test_an_empty_or_graphless_file_is_the_zoos_error(tmp_path, content):
    path = tmp_path / "bad.onnx"
    path.write_bytes(content)
    with pytest.raises(OnnxModelError) as caught:
        OnnxDetector(path)
    assert str(caught.value).startswith(str(path) + ": ") and "\n" not in str(caught.value)


def test_an_empty_file_is_named_as_such(tmp_path):
    path = tmp_path / "empty.onnx"
    path.write_bytes(b"")
    with pytest.raises(OnnxModelError, match="empty.onnx: an empty file .0 bytes., not an ONNX "
                                             "model$"):
        load_onnx_detector(str(path))


def test_an_export_records_its_class_count(tmp_path):
    from zoo.onnx.export import export_model
    model = zoo.get_model("ssd_mobilenetv2_stride8", data_shape=128, num_classes=3)
    path = export_model(model, *model.init_params(seed=0), str(tmp_path / "m.onnx"))
    props = {p.key: p.value for p in onnx.load(path).metadata_props}
    assert props["zoo.num_classes"] == "3" and len(json.loads(props["zoo.class_names"])) == 3
    assert OnnxDetector(path).class_names == ["0", "1", "2"]


# -- An artifact's stored config against its parameters ---------------------------------------

@pytest.fixture
def saved(tmp_path):
    model = zoo.get_model("ssd_mobilenetv2_stride8", data_shape=128, num_classes=2)
    prefix = str(tmp_path / "ssd")
    artifact.export(model, prefix)
    return prefix


def edit_config(prefix, **fields):
    path = artifact.epoch_files(prefix, 0).meta
    with open(path) as stream:
        meta = json.load(stream)
    meta["config"].update(fields)
    with open(path, "w") as stream:
        json.dump(meta, stream)
    return meta


@pytest.mark.parametrize("other, expected", [
    ("ssd_mobilenetv2", "names differ"),
    ("ssd_resnet50", "names differ"),
])
def test_a_config_edited_to_another_network_is_refused_before_binding(saved, other,
                                                                     expected, capsys):
    config = zoo.get_model(other, num_classes=2).config
    edit_config(saved, **{k: v for k, v in config.items() if k not in ("class_names",)})
    with pytest.raises(artifact.ArtifactError) as caught:
        artifact.load(saved)
    message = str(caught.value)
    assert "its stored config (network %s) does not fit" % other in message
    assert expected in message and "\n" not in message
    # The export that ended in a KeyError traceback is now that line.
    assert main(["export", "--checkpoint", saved, "--format", "onnx", "--output",
                 saved + "-x"]) == 1
    err = capsys.readouterr().err
    assert "does not fit" in err and "Traceback" not in err and err.count("\n") == 1


def test_a_config_edited_to_other_shapes_names_the_reshaped_parameter(saved):
    edit_config(saved, num_filters=[-1, 128, 256, 256, 128])
    with pytest.raises(artifact.ArtifactError, match="does not fit .*: arg .* has shape "
                                                     ".*, the config's graph needs"):
        artifact.load(saved)


# -- GluonCV parameter files against the network ---------------------------------------------

@pytest.fixture(scope="module")
def gluon_params(tmp_path_factory):
    """A file with an array, all zeros, for every parameter name of GluonCV's
    ssd_512_resnet50_v1_voc: what the import checks before loading, without GluonCV's
    full-size weights."""
    from gluoncv import model_zoo
    with mx.name.NameManager():
        net = model_zoo.get_model("ssd_512_resnet50_v1_voc", pretrained=False,
                                  pretrained_base=False)
    path = str(tmp_path_factory.mktemp("gluon") / "ssd.params")
    mx.nd.save(path, {name: mx.nd.zeros((2,)) for name in net._collect_params_with_prefix()})
    return path


def rewritten(source, path, change):
    arrays = mx.nd.load(source)
    change(arrays)
    mx.nd.save(str(path), arrays)
    return str(path)


def poison(value):
    def change(arrays):
        name = sorted(arrays)[len(arrays) // 2]
        array = arrays[name].asnumpy()
        array.flat[0] = value
        arrays[name] = mx.nd.array(array)
    return change


@pytest.mark.parametrize("change, expected", [
    (poison(np.nan), "holds NaN or infinite values; nothing was imported"),
    (poison(np.inf), "holds NaN or infinite values; nothing was imported"),
    (lambda a: a.update({"extra_head.weight": mx.nd.ones((2, 2))}),
     "not a parameter file of GluonCV's ssd_512_resnet50_v1_voc: 1 extra arrays "
     "(extra_head.weight), 0 missing (none); nothing was imported"),
    (lambda a: a.pop(sorted(a)[0]), "0 extra arrays (none), 1 missing ("),
])
def test_a_bad_gluoncv_file_is_refused_before_anything_is_written(gluon_params, tmp_path,
                                                                  capsys, change, expected):
    path = rewritten(gluon_params, tmp_path / "bad.params", change)
    out = tmp_path / "out"
    status = main(["import-gluoncv", "ssd_512_resnet50_v1_voc", "--params", path,
                   "--output", str(out / "ssd")])
    err = capsys.readouterr().err
    assert status == 1 and err.count("\n") == 1 and "Traceback" not in err, err
    assert expected in err and path in err
    assert not out.exists() or os.listdir(out) == []
