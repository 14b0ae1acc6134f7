"""The config schema: every field declared once, defaults from it, every kind of violation
caught before a graph is built, unknown fields with a suggestion, ``base:`` from the
registry, and base loops in one line."""
import os
import textwrap

import pytest

import zoo
from zoo.config import loading as config
from zoo.schema import fields as schema
from zoo.architectures import ARCHITECTURES
from symbols.backbones import BACKBONES
from zoo.schema.preprocessing import MEAN_PIXELS, STD_PIXELS


def write(folder, name, text):
    path = folder / ("%s.yaml" % name)
    path.write_text(textwrap.dedent(text))
    return str(path)


def error_of(call, *args, **kwargs):
    with pytest.raises(zoo.ConfigError) as caught:
        call(*args, **kwargs)
    assert "\n" not in str(caught.value)
    return caught.value


# Every field is declared once, with a default or required, and a description.

@pytest.mark.parametrize("name", zoo.list_models())
def test_every_registered_config_validates_at_every_shape(name, no_graph):
    raw = zoo.get_config(name)
    specs = config.validate(raw)
    assert [spec["data_shape"] for spec in specs] == sorted(raw["shapes"])
    assert all(spec["name"] == name for spec in specs)


@pytest.mark.parametrize("arch", sorted(ARCHITECTURES))
def test_every_field_has_a_default_or_is_required_and_a_description(arch):
    fields = ARCHITECTURES[arch].schema.fields
    for field in fields.values():
        assert field.default is not schema.PER_ARCH, field.name
        assert field.description and "\n" not in field.description, field.name
    kinds = {name: (f.default is schema.REQUIRED, f.default is schema.DERIVED,
                    name in ARCHITECTURES[arch].defaults) for name, f in fields.items()}
    assert all(sum(kind) == 1 for kind in kinds.values()), kinds
    assert set(ARCHITECTURES[arch].required) == {"arch", "backbone"} | {
        name for name, f in fields.items()
        if f.default is schema.REQUIRED and name not in schema.COMMON}


def test_common_fields_are_declared_once_and_shared():
    ssd, rcnn = (ARCHITECTURES[a].schema.fields for a in ("ssd", "faster_rcnn"))
    assert list(ssd)[:len(schema.COMMON)] == list(rcnn)[:len(schema.COMMON)] == list(
        schema.COMMON)
    for name, field in schema.COMMON.items():
        assert ssd[name].type is field.type is rcnn[name].type
    assert set(ssd) & set(rcnn) == set(schema.COMMON)
    assert schema.COMMON["arch"].type._choices() == tuple(sorted(ARCHITECTURES))
    assert schema.COMMON["backbone"].type.phrase() == "one of " + ", ".join(sorted(BACKBONES))


def test_defaults_come_from_the_schema():
    ssd, rcnn = ARCHITECTURES["ssd"], ARCHITECTURES["faster_rcnn"]
    for arch in (ssd, rcnn):
        assert dict(arch.defaults) == {
            f.name: f.default for f in arch.schema.fields.values()
            if f.default not in (schema.REQUIRED, schema.DERIVED)}
        assert arch.defaults["mean_pixels"] == list(MEAN_PIXELS)
        assert arch.defaults["std_pixels"] == list(STD_PIXELS)
    assert (ssd.defaults["data_shape"], rcnn.defaults["data_shape"]) == (512, 600)
    assert (ssd.defaults["nms_threshold"], rcnn.defaults["nms_threshold"]) == (0.45, 0.3)
    assert ssd.defaults["variances"] == [0.1, 0.1, 0.2, 0.2]
    spec = config.resolve({"arch": "faster_rcnn", "backbone": "resnet50", "rpn_feature": "res4",
                           "rpn_stride": 16, "head_stage": "res5"})
    assert {k: spec[k] for k in rcnn.defaults} == dict(rcnn.defaults, name="<unnamed>")


def test_a_schema_needs_every_per_arch_default_and_no_field_twice():
    with pytest.raises(AssertionError, match="nms_threshold"):
        schema.Schema("x", [], defaults={"data_shape": 300})
    twice = schema.Field("num_classes", schema.Int(1), 3, "again")
    with pytest.raises(AssertionError, match="num_classes"):
        schema.Schema("x", [twice], defaults={"data_shape": 300, "nms_threshold": 0.5,
                                              "nms_topk": 400, "score_threshold": 0.01})


def test_markdown_table_lists_every_field():
    table = ARCHITECTURES["faster_rcnn"].schema.markdown().splitlines()
    assert table[:2] == ["| field | default | meaning |", "|---|---|---|"]
    assert len(table) == 2 + len(ARCHITECTURES["faster_rcnn"].schema.fields)
    assert "| `rpn_stride` | required | the stride of `rpn_feature` |" in table
    assert "| `roi_size` | `[14, 14]` | [height, width] of the pooled ROI features |" in table
    assert "| `class_names` | `null` | optional class names, one per class |" in table


# Each kind of violation, on the types themselves and through a model.

@pytest.mark.parametrize("kind,value,expected", [
    (schema.Int(1), 0, "a positive integer"),
    (schema.Int(1), 2.0, "a positive integer"),
    (schema.Int(1), True, "a positive integer"),
    (schema.Int(0, 10), 11, "an integer in [0, 10]"),
    (schema.Int(1, special=(-1,)), -2, "-1 or a positive integer"),
    (schema.Number(0, 1, low_open=True), 0, "a number in (0, 1]"),
    (schema.Number(0, 1, high_open=True), 1, "a number in [0, 1)"),
    (schema.Number(what="a finite number"), float("nan"), "a finite number"),
    (schema.Number(0, low_open=True), "1", "a positive number"),
    (schema.Number(2), 1, "a number >= 2"),
    (schema.Bool(), "no", "true or false"),
    (schema.Bool(), 0, "true or false"),
    (schema.Str(choices=("a", "b")), "c", "one of a, b"),
    (schema.Str(nonempty=True), "", "a non-empty string"),
    (schema.Str(), 3, "a string"),
    (schema.Optional(schema.Int(1)), 0, "null or a positive integer"),
])
def test_scalar_violations(kind, value, expected):
    assert kind.error(value, {}) == expected
    assert kind.phrase() == expected


def test_accepted_values():
    assert schema.Int(1, special=(-1,)).error(-1, {}) is None
    assert schema.Number(0, 1).error(1, {}) is None and schema.Number(0, 1).error(0.0, {}) is None
    assert schema.Optional(schema.Int(1)).error(None, {}) is None
    assert schema.List(schema.Int(), length="n").error([1, 2], {"n": [5, 6]}) is None


@pytest.mark.parametrize("kind,value,config,fault", [
    (schema.List(schema.Number(), length=3), [1, 2], {}, ("", [1, 2], "a list of 3 entries")),
    (schema.List(schema.Number(), length=3), 5, {}, ("", 5, "a list of 3 entries")),
    (schema.List(schema.Int(), length="maps"), [1], {"maps": ["a", "b"]},
     ("", [1], "2 entries, one per maps entry")),
    (schema.List(schema.Str(), length="num_classes"), ["a"], {"num_classes": 2},
     ("", ["a"], "2 entries (num_classes = 2)")),
    (schema.List(schema.Int()), [], {}, ("", [], "a non-empty list")),
    (schema.List(schema.Int(1)), [1, 0], {}, ("[1]", 0, "a positive integer")),
    (schema.List(schema.List(schema.Number(0, 1))), [[0.5], [0.2, 3]], {},
     ("[1][1]", 3, "a number in [0, 1]")),
    (schema.List(schema.List(schema.Int(), distinct=True)), [[1, 2], [3, 3]], {},
     ("[1]", [3, 3], "with no repeated value")),
])
def test_list_violations(kind, value, config, fault):
    found = kind.error(value, config)
    assert found[:2] == fault[:2] and fault[2] in found[2]


@pytest.mark.parametrize("overrides,field,expected", [
    ({"extra_use_bn": "no"}, "extra_use_bn", "true or false"),                       # type
    ({"nms_threshold": -5}, "nms_threshold", "a number in (0, 1]"),                  # range
    ({"variances": [0.1]}, "variances", "a list of 4 entries"),                      # length
    ({"sizes": [[0.1]] * 4}, "sizes", "5 entries, one per from_layers entry"),       # per map
    ({"backbone": "vgg16"}, "backbone", "one of inceptionv3, mobilenet0.25"),         # choice
    ({"arch": "yolo"}, "arch", "one of faster_rcnn, faster_rcnn_fpn, ssd"),   # choice
])
def test_each_kind_of_violation_stops_a_model_before_its_graph(overrides, field, expected,
                                                               no_graph):
    err = error_of(zoo.get_model, "ssd_mobilenetv2_stride8", **overrides)
    assert err.model == "ssd_mobilenetv2_stride8" and err.field == field
    assert err.value == overrides[field] and expected in err.expected


def test_cross_field_checks_come_before_the_graph(no_graph):
    err = error_of(zoo.get_model, "faster_rcnn_resnet50", rpn_negative_iou=0.75)
    assert str(err) == ("faster_rcnn_resnet50: rpn_negative_iou = 0.75: below "
                        "rpn_positive_iou = 0.7")


def test_derived_fields_of_a_stored_config_are_accepted(models):
    assert ARCHITECTURES["faster_rcnn"].schema.derived == ("supported_shapes", "rpn_layer")
    assert ARCHITECTURES["ssd"].schema.derived == ("supported_shapes", "feature_layers",
                                                   "feature_channels")
    stored = models["faster_rcnn_mobilenetv2"].config
    assert {"rpn_layer", "supported_shapes", "name"} <= set(stored)
    assert config.resolve(stored).to_dict() == stored
    ssd = models["ssd_mobilenetv2_stride8"].config
    assert {"feature_layers", "feature_channels", "steps"} <= set(ssd)
    assert zoo.build_model(ssd).config == ssd


def test_a_stored_derived_field_is_replaced_by_the_build(no_graph):
    """Derived fields are checked like the others, and a build derives them afresh."""
    err = error_of(zoo.get_model, "ssd_resnet50", feature_channels=[0])
    assert (err.field, err.expected) == ("feature_channels[0]", "a positive integer")


# Unknown fields: rejected with the closest name.

def test_did_you_mean_in_a_yaml_file(tmp_path, no_graph):
    path = write(tmp_path, "my_ssd", "base: ssd_mobilenetv2_stride8\nnms_treshold: 0.5\n")
    err = error_of(zoo.load_config, path)
    assert str(err) == ("my_ssd: nms_treshold = 0.5: unknown config field; did you mean "
                        "nms_threshold?")


def test_did_you_mean_in_overrides_and_shape_sections(tmp_path, no_graph):
    err = error_of(zoo.get_model, "faster_rcnn_resnet50", rpn_stide=8)
    assert (err.field, err.expected) == ("rpn_stide",
                                         "unknown config field; did you mean rpn_stride?")
    path = write(tmp_path, "mine", """\
        base: ssd_resnet50
        shapes:
          300:
            step: [16, 30, 60, 100, 150, 300]
        """)
    err = error_of(zoo.load_config, path)
    assert (err.field, err.expected) == ("shapes.300.step",
                                         "unknown config field; did you mean steps?")


def test_an_unknown_field_without_a_close_name_lists_the_known_ones(no_graph):
    err = error_of(zoo.get_model, "ssd_resnet50", zzz=1)
    assert err.expected.startswith("unknown config field; arch ssd has name, arch, backbone,")


def test_the_other_architectures_fields_are_unknown(no_graph):
    err = error_of(zoo.get_model, "faster_rcnn_resnet50", from_layers=["res4"])
    assert err.field == "from_layers" and err.expected.startswith("unknown config field")


# base: beside the file, then the registry; loops and missing bases in one line.

def test_base_from_the_registry(tmp_path, no_graph):
    path = write(tmp_path, "my_detector", "base: ssd_mobilenetv2_stride8\nnum_classes: 3\n")
    raw = zoo.load_config(path)
    expected = dict(zoo.get_config("ssd_mobilenetv2_stride8"), name="my_detector",
                    num_classes=3)
    assert raw == expected


def test_base_beside_the_file_comes_first(tmp_path, no_graph):
    write(tmp_path, "ssd_resnet50", "base: ssd_mobilenetv2_stride8\nnum_classes: 7\n")
    raw = zoo.load_config(write(tmp_path, "child", "base: ssd_resnet50\n"))
    assert raw["num_classes"] == 7 and raw["backbone"] == "mobilenetv2"


def test_a_file_named_like_a_registered_model_extends_it(tmp_path, no_graph):
    raw = zoo.load_config(write(tmp_path, "ssd_resnet50", "base: ssd_resnet50\nnum_classes: 4\n"))
    assert raw == dict(zoo.get_config("ssd_resnet50"), num_classes=4)


def test_base_loop_is_one_line_naming_the_chain(tmp_path, no_graph):
    write(tmp_path, "a", "base: b\n")
    write(tmp_path, "b", "base: c\n")
    write(tmp_path, "c", "base: a\nnum_classes: 2\n")
    err = error_of(zoo.load_config, str(tmp_path / "a.yaml"))
    assert str(err) == "c: base = 'a': a chain of bases without a loop, but " \
                       "a.yaml -> b.yaml -> c.yaml -> a.yaml"


def test_missing_base_names_where_it_looked(tmp_path, monkeypatch, no_graph):
    path = write(tmp_path, "mine", "base: ssd_resnet5\n")
    err = error_of(zoo.load_config, path)
    assert (err.model, err.field, err.value) == ("mine", "base", "ssd_resnet5")
    assert err.expected == "a config ssd_resnet5.yaml beside the file (%s) or in the registry " \
                           "(%s)" % (tmp_path, zoo.config.loading.configs_dir())
    monkeypatch.setattr(zoo.config.loading, "configs_dir", lambda: str(tmp_path / "registry"))
    os.mkdir(tmp_path / "registry")
    write(tmp_path / "registry", "ssd_resnet5", "arch: ssd\n")
    err = error_of(zoo.load_config, path)  # found there now: the next fault is a field
    assert err.field == "backbone" and "required" in err.expected
