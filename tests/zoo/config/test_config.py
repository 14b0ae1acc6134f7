"""Configs, registry, overrides and validation errors."""
import os
import textwrap

import pytest

import zoo
from zoo.cli import main as zoo_main

MODELS = {"ssd_resnet50", "ssd_resnet101", "ssd_mobilenetv2", "ssd_inceptionv3"}


def write_config(tmp_path, text, name="mine"):
    path = tmp_path / ("%s.yaml" % name)
    path.write_text(textwrap.dedent(text))
    return str(path)


def config_error(name="ssd_resnet50", **overrides):
    with pytest.raises(zoo.ConfigError) as err:
        zoo.get_model(name, **overrides)
    message = str(err.value)
    assert "\n" not in message
    assert message.startswith(name + ": ")
    return err.value


def test_registry_lists_models_and_rejects_unknown():
    assert MODELS <= set(zoo.list_models())
    with pytest.raises(KeyError, match="ssd_resnet50"):
        zoo.get_model("ssd_vgg16")


def test_overrides_reach_the_graph():
    model = zoo.get_model("ssd_resnet50", num_classes=3, data_shape=300)
    assert model.config["num_classes"] == 3
    assert model.config["steps"] == [16, 30, 60, 100, 150, 300]
    shapes = dict(zip(model.symbol().list_arguments(),
                      model.symbol().infer_shape(data=(1, 3, 300, 300))[0]))
    assert shapes["head0_cls_weight"][0] == 4 * (3 + 1)
    few = zoo.get_model("ssd_resnet50", from_layers=["res4", "res5", "", ""],
                        num_filters=[-1, -1, 256, 128], strides=[-1, -1, 2, 2],
                        pads=[-1, -1, 1, 1], normalizations=[-1] * 4,
                        sizes=[[0.1], [0.3], [0.5], [0.7]], ratios=[[1, 2]] * 4,
                        data_shape=256, steps=None)
    maps, anchors = few.describe()
    assert maps == "16x16/16 8x8/32 4x4/64 2x2/128"
    assert anchors == (16 * 16 + 8 * 8 + 4 * 4 + 2 * 2) * 2


def test_unknown_override_field():
    err = config_error(num_clases=3)
    assert str(err).endswith(": num_clases = 3: unknown config field; did you mean "
                             "num_classes?")


def test_user_yaml_with_base_and_build(tmp_path):
    write_config(tmp_path, """\
        arch: ssd
        backbone: mobilenetv2
        num_classes: 2
        data_shape: 300
        from_layers: [c4, c5, ""]
        num_filters: [-1, -1, 256]
        strides: [-1, -1, 2]
        pads: [-1, -1, 1]
        normalizations: [-1, -1, -1]
        sizes: [[0.2], [0.4], [0.7]]
        ratios: [[1], [1, 2], [1, 2]]
        """, name="base_model")
    child = write_config(tmp_path, "base: base_model\nnum_classes: 5\n", name="child")
    config = zoo.load_config(child)
    assert config["name"] == "child" and config["num_classes"] == 5
    model = zoo.build_model(config)
    assert model.name == "child"
    assert model.describe()[0] == "19x19/16 10x10/32 5x5/64"


def test_malformed_yaml_names_file_and_line(tmp_path):
    path = write_config(tmp_path, "arch: ssd\nfrom_layers: [res4, res5\nbackbone: x\n")
    with pytest.raises(zoo.ConfigError, match=r"mine\.yaml:\d"):
        zoo.load_config(path)


def test_yaml_is_loaded_safely(tmp_path):
    path = write_config(tmp_path, "arch: !!python/object/apply:os.system ['true']\n")
    with pytest.raises(zoo.ConfigError, match="valid YAML"):
        zoo.load_config(path)


def test_old_resnet101_bug_is_rejected():
    """PR #8998: ResNet-101 tapped at ResNet-50's depths, both inside stage 3."""
    err = config_error("ssd_resnet101",
                       from_layers=["stage3_unit6_relu", "stage3_unit9_relu", "", "", "", ""])
    assert err.field == "from_layers[0]" and err.value == "stage3_unit6_relu"
    assert "stage3_unit23_relu" in str(err) and "res4" in str(err)


def test_layer_inside_a_stage_is_rejected_even_at_the_end():
    err = config_error(from_layers=["res4", "stage4_unit2_relu", "", "", "", ""])
    assert err.field == "from_layers[1]" and "stage4_unit3_relu" in str(err)


def test_unknown_layer_suggests_names():
    err = config_error(from_layers=["res44", "res5", "", "", "", ""])
    assert "res4" in str(err) and "did you mean" in str(err)


def test_branch_inside_a_block_is_rejected():
    err = config_error("ssd_inceptionv3",
                       from_layers=["c3", "c4", "mixed7a_branch3x3_1", "", "", ""])
    assert err.field == "from_layers[2]"


def test_strides_must_grow_strictly():
    err = config_error(data_shape=256, steps=None)
    assert "strides must grow strictly" in str(err)
    err = config_error(from_layers=["res5", "res4", "", "", "", ""])
    assert err.field == "from_layers[1]"


@pytest.mark.parametrize("field,value,expected", [
    ("num_filters", [-1, -1, 512, 256], "6 entries"),
    ("sizes", [[0.1], [0.2], [0.3], [0.4], [0.5]], "6 entries"),
    ("normalizations", [-1, -1, -1, -1, -1, 0], "positive"),
    ("sizes", [[0.1], [0.2], [0.3], [0.4], [0.5], [2.5]], "anchor size in"),
    ("sizes", [[0.3], [0.2], [0.4], [0.5], [0.6], [0.7]], "do not shrink"),
    ("ratios", [[1, 2], [1, -2], [1], [1], [1], [1]], "aspect ratio in"),
    ("ratios", [[1, 1], [1], [1], [1], [1], [1]], "no repeated"),
    ("steps", [16, 32, 64, 128, 256, 100], "tiles"),
    ("strides", [2, -1, 2, 2, 2, 2], "-1 for a backbone layer"),
    ("pads", [-1, -1, 1, 1, 1, -3], "extra layer"),
    ("num_classes", 0, "positive integer"),
    ("backbone", "vgg16", "one of"),
    ("data_shape", 16, "integer image side"),
])
def test_bad_fields_raise_one_line_errors(field, value, expected):
    err = config_error(**{field: value})
    assert err.field.startswith(field)
    assert expected in str(err)


def test_checker_passes_registered_models(capsys):
    assert zoo_main(["check"]) == 0
    rows = [line.split()[0] for line in capsys.readouterr().out.splitlines()[2:-1]]
    for name in zoo.list_models():
        assert rows.count(name) == len(zoo.get_config(name)["shapes"]), name
    assert len(rows) == sum(len(zoo.get_config(n)["shapes"]) for n in zoo.list_models())


def test_checker_fails_on_broken_config(tmp_path, capsys):
    path = write_config(tmp_path, """\
        arch: ssd
        backbone: resnet101
        from_layers: [stage3_unit6_relu, stage3_unit9_relu]
        num_filters: [-1, -1]
        strides: [-1, -1]
        pads: [-1, -1]
        normalizations: [-1, -1]
        sizes: [[0.1], [0.2]]
        ratios: [[1], [1]]
        """, name="broken")
    assert zoo_main(["check", path]) == 1
    err = capsys.readouterr().err
    assert "FAIL broken: from_layers[0] = 'stage3_unit6_relu'" in err


@pytest.mark.parametrize("make, reason", [(lambda tmp: tmp / "missing.yaml",
                                           "No such file or directory"),
                                          (lambda tmp: tmp, "Is a directory")],
                         ids=["missing", "a-folder"])
def test_checker_fails_on_an_unreadable_path_in_one_line(tmp_path, capsys, make, reason):
    path = str(make(tmp_path))
    assert zoo_main(["check", path]) == 1
    captured = capsys.readouterr()
    name = os.path.splitext(os.path.basename(path))[0]
    assert captured.err == "FAIL %s: <file> = %r: a readable YAML file (%s)\n" % (
        name, path, reason)
    assert captured.out.splitlines()[-1] == "1 configs checked, 1 failed"
