"""Bad-input corpus, configs: each bad YAML file or override gives one ``zoo.ConfigError``
line naming the model, the exact field, the value and what is expected, before any graph
is built; ``zoo check BAD.yaml`` prints that line as its one FAIL and exits 1."""
import textwrap

import pytest

import zoo
from symbols.backbones import BACKBONES
from zoo.cli import main as zoo_main

SSD = "base: ssd_mobilenetv2_stride8\n"
RCNN = "base: faster_rcnn_resnet50\n"

# (id, {file stem: YAML text}, field, fragment of the expected text); my_ssd.yaml is loaded.
YAML_CASES = [
    ("misspelt field", {"my_ssd": SSD + "nms_treshold: 0.5\n"}, "nms_treshold",
     "unknown config field; did you mean nms_threshold?"),
    ("misspelt field in a shape section",
     {"my_ssd": SSD + "shapes:\n  192:\n    stepz: [8, 16, 32, 64, 96]\n"}, "shapes.192.stepz",
     "did you mean steps?"),
    ("nms_threshold negative", {"my_ssd": SSD + "nms_threshold: -5\n"}, "nms_threshold",
     "a number in (0, 1]"),
    ("overlap_threshold above 1", {"my_ssd": SSD + "overlap_threshold: 7\n"},
     "overlap_threshold", "a number in (0, 1]"),
    ("variances of length 1", {"my_ssd": SSD + "variances: [0.1]\n"}, "variances",
     "a list of 4 entries, each a positive number"),
    ("mean_pixels of length 2", {"my_ssd": SSD + "mean_pixels: [123, 116]\n"}, "mean_pixels",
     "a list of 3 entries, each a finite number"),
    ("mean_pixels with nan", {"my_ssd": SSD + "mean_pixels: [123, .nan, 103]\n"},
     "mean_pixels[1]", "a finite number"),
    ("std_pixels of 0", {"my_ssd": SSD + "std_pixels: 0\n"}, "std_pixels",
     "a list of 3 entries, each a positive number"),
    ("std_pixels with a 0", {"my_ssd": SSD + "std_pixels: [58, 0, 57]\n"}, "std_pixels[1]",
     "a positive number"),
    ("extra_use_bn a string", {"my_ssd": SSD + "extra_use_bn: \"no\"\n"}, "extra_use_bn",
     "true or false"),
    ("negative_mining_ratio -1", {"my_ssd": SSD + "negative_mining_ratio: -1\n"},
     "negative_mining_ratio", "a positive number"),
    ("force_suppress a number", {"my_ssd": SSD + "force_suppress: 1\n"}, "force_suppress",
     "true or false"),
    ("nms_topk 0", {"my_ssd": SSD + "nms_topk: 0\n"}, "nms_topk", "-1 or a positive integer"),
    ("num_classes 0", {"my_ssd": SSD + "num_classes: 0\n"}, "num_classes", "a positive integer"),
    ("num_classes a float", {"my_ssd": SSD + "num_classes: 2.5\n"}, "num_classes",
     "a positive integer"),
    ("class_names of the wrong count", {"my_ssd": SSD + "num_classes: 2\nclass_names: [cat]\n"},
     "class_names", "null or 2 entries (num_classes = 2), each a non-empty string"),
    ("class_names with an empty name",
     {"my_ssd": SSD + "num_classes: 2\nclass_names: [cat, '']\n"}, "class_names[1]",
     "a non-empty string"),
    ("data_shape too small", {"my_ssd": SSD + "data_shape: 16\nshapes: {16: {}}\n"}, "shapes",
     "an integer image side >= 32"),
    ("unknown arch", {"my_ssd": SSD + "arch: yolo\n"}, "arch",
     "one of faster_rcnn, faster_rcnn_fpn, ssd"),
    ("unknown backbone", {"my_ssd": SSD + "backbone: vgg16\n"}, "backbone",
     "one of " + ", ".join(sorted(BACKBONES))),
    ("per-map list too short", {"my_ssd": SSD + "pads: [-1, 1, 1, 1]\n"}, "pads",
     "5 entries, one per from_layers entry"),
    ("anchor size above 1.2",
     {"my_ssd": SSD + "sizes: [[0.1], [0.2], [0.4], [0.6], [1.5]]\n"}, "sizes[4][0]",
     "an anchor size in (0, 1.2]"),
    ("repeated aspect ratio",
     {"my_ssd": SSD + "ratios: [[1, 2, 2], [1], [1], [1], [1]]\n"}, "ratios[0]",
     "with no repeated value"),
    ("negative step",
     {"my_ssd": SSD + "shapes:\n  192:\n    steps: [-8, 16, 32, 64, 96]\n"}, "steps[0]",
     "-1 or a positive number"),
    ("extra layer first", {"my_ssd": SSD + "from_layers: ['', '', '', '', '']\n"},
     "from_layers[0]", "extra layers need a feature map to start from"),
    ("extra block of stride 0", {"my_ssd": SSD + "strides: [-1, 0, 2, 2, 2]\n"}, "strides[1]",
     "an integer >= 1 for an extra layer"),
    ("anchor sizes shrinking",
     {"my_ssd": SSD + "sizes: [[0.3], [0.2], [0.4], [0.6], [0.8]]\n"}, "sizes[1]",
     "do not shrink"),
    ("shapes not a mapping", {"my_ssd": SSD + "shapes: [192, 256]\n"}, "shapes",
     "a mapping of data shapes"),
    ("shape key not a number", {"my_ssd": SSD + "shapes: {big: {}}\n"}, "shapes",
     "data shapes as keys"),
    ("arch inside a shape section", {"my_ssd": SSD + "shapes: {192: {arch: ssd}}\n"},
     "shapes.192.arch", "set outside shapes"),
    ("missing required field", {"my_ssd": "arch: ssd\nbackbone: resnet50\n"}, "from_layers",
     "a required field for arch 'ssd'"),
    ("base loop", {"my_ssd": "base: other\n", "other": "base: my_ssd\n"}, "base",
     "my_ssd.yaml -> other.yaml -> my_ssd.yaml"),
    ("base on itself", {"my_ssd": "base: my_ssd.yaml\n"}, "base",
     "a config my_ssd.yaml beside the file"),
    ("missing base", {"my_ssd": "base: ssd_resnet5\n"}, "base",
     "a config ssd_resnet5.yaml beside the file"),
    ("base not a name", {"my_ssd": "base: [ssd_resnet50]\n"}, "base",
     "the name of another config file"),
    ("not a mapping", {"my_ssd": "- arch\n- ssd\n"}, "<file>", "a YAML mapping"),
    ("malformed YAML", {"my_ssd": "arch: ssd\nsizes: [[0.1], [0.2]\n"}, "<file>", "valid YAML"),
    ("rcnn: rpn_negative_iou above positive", {"my_ssd": RCNN + "rpn_negative_iou: 0.8\n"},
     "rpn_negative_iou", "below rpn_positive_iou = 0.7"),
    ("rcnn: more proposals after NMS than before",
     {"my_ssd": RCNN + "rpn_post_nms_top_n_test: 7000\n"}, "rpn_post_nms_top_n_test",
     "at most rpn_pre_nms_top_n_test = 6000"),
    ("rcnn: roi_size of length 1", {"my_ssd": RCNN + "roi_size: [14]\n"}, "roi_size",
     "a list of 2 entries, each a positive integer"),
    ("rcnn: repeated anchor scale", {"my_ssd": RCNN + "anchor_scales: [2, 4, 4]\n"},
     "anchor_scales", "with no repeated value"),
    ("rcnn: score_threshold 1", {"my_ssd": RCNN + "score_threshold: 1\n"}, "score_threshold",
     "a number in [0, 1)"),
    ("rcnn: max_size below data_shape", {"my_ssd": RCNN + "max_size: 500\n"}, "max_size",
     "at least data_shape (the short side), 600"),
    ("rcnn: rpn_stride 0", {"my_ssd": RCNN + "rpn_stride: 0\n"}, "rpn_stride",
     "a positive integer"),
    ("rcnn: an SSD field", {"my_ssd": RCNN + "variances: [0.1, 0.1, 0.2, 0.2]\n"}, "variances",
     "unknown config field"),
]

# (id, registered model, overrides, field, fragment): the Python API's overrides.
OVERRIDE_CASES = [
    ("misspelt override", "ssd_resnet50", {"num_clases": 3}, "num_clases",
     "did you mean num_classes?"),
    ("data_shape a string", "ssd_resnet50", {"data_shape": "300"}, "data_shape",
     "an integer image side >= 32"),
    ("nan threshold", "faster_rcnn_resnet50", {"nms_threshold": float("nan")}, "nms_threshold",
     "a number in (0, 1]"),
    ("class name not a string", "ssd_mobilenetv2_stride8",
     {"num_classes": 2, "class_names": ["cat", 2]}, "class_names[1]", "a non-empty string"),
    ("normalization 0", "ssd_mobilenetv2_stride8", {"normalizations": [-1, -1, -1, -1, 0]},
     "normalizations[4]", "-1 or a positive number"),
    ("overrides' sizes without from_layers", "ssd_resnet50",
     {"sizes": [[0.1]] * 5}, "sizes", "6 entries, one per from_layers entry"),
]


def check_error(err, field, fragment):
    message = str(err)
    assert "\n" not in message
    assert err.field == field, message
    assert fragment in err.expected, message
    assert message == "%s: %s = %r: %s" % (err.model, field, err.value, err.expected)


@pytest.mark.parametrize("files,field,fragment", [case[1:] for case in YAML_CASES],
                         ids=[case[0] for case in YAML_CASES])
def test_bad_yaml(tmp_path, capsys, no_graph, files, field, fragment):
    for stem, text in files.items():
        (tmp_path / (stem + ".yaml")).write_text(textwrap.dedent(text))
    path = str(tmp_path / "my_ssd.yaml")
    with pytest.raises(zoo.ConfigError) as caught:
        zoo.load_config(path)
    check_error(caught.value, field, fragment)

    assert zoo_main(["check", path]) == 1
    out, err = capsys.readouterr()
    assert err.splitlines() == ["FAIL %s" % caught.value]
    assert out.splitlines() == ["1 configs checked, 1 failed"]


@pytest.mark.parametrize("name,overrides,field,fragment", [case[1:] for case in OVERRIDE_CASES],
                         ids=[case[0] for case in OVERRIDE_CASES])
def test_bad_override(no_graph, name, overrides, field, fragment):
    for build in (lambda: zoo.get_model(name, **overrides),
                  lambda: zoo.build_model(zoo.get_config(name), **overrides)):
        with pytest.raises(zoo.ConfigError) as caught:
            build()
        check_error(caught.value, field, fragment)
        assert caught.value.model == name


def test_a_binary_file_is_one_line(tmp_path, capsys):
    path = tmp_path / "my_ssd.yaml"
    path.write_bytes(b"arch: ssd\nbackbone: \xff\xfe\n")
    with pytest.raises(zoo.ConfigError) as caught:
        zoo.load_config(str(path))
    assert str(caught.value) == "my_ssd: <file> = %r: UTF-8 text (byte 20 is not)" % str(path)
    assert zoo_main(["check", str(path)]) == 1
    assert capsys.readouterr().err.splitlines() == ["FAIL %s" % caught.value]


def test_a_missing_file_is_one_line(tmp_path, capsys):
    path = str(tmp_path / "nowhere.yaml")
    assert zoo_main(["check", path]) == 1
    assert capsys.readouterr().err.splitlines() == [
        "FAIL nowhere: <file> = %r: a readable YAML file (No such file or directory)" % path]


def test_the_corpus_base_files_are_good(tmp_path, no_graph):
    """The bad cases fail for their one fault: the files they extend load."""
    for text in (SSD, RCNN):
        (tmp_path / "my_ssd.yaml").write_text(text)
        assert zoo.load_config(str(tmp_path / "my_ssd.yaml"))["name"] == "my_ssd"


def test_corpus_size():
    assert len(YAML_CASES) + len(OVERRIDE_CASES) >= 25
