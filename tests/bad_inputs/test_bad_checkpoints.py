"""Damaged, hand-edited, hostile or mismatched artifacts, through the command line (eval,
demo, quantize, export, train --resume) and ``zoo.load_detector``: each is refused in one
line naming the file, nothing is unpickled, and a dataset whose classes are not the
artifact's is refused listing both."""
import json
import os
import pickle
import re
import shutil

import mxnet as mx
import numpy as np
import pytest

import zoo
from zoo import artifact
from zoo.artifact import ArtifactError
from zoo.cli import main
from zoo.jobs.datasets import relabel

NETWORK = "ssd_mobilenetv2_stride8"
CLASSES = ["circle", "square", "triangle", "star"]


def train_argv(shapes, output, *extra):
    return ["train", "--network", NETWORK, "--dataset", "voc", "--data-root", shapes,
            "--data-shape", "128", "--batch-size", "4", "--output-dir", str(output),
            "--no-progress", "--data-threads", "1", *extra]


@pytest.fixture(scope="module")
def trained(shapes, tmp_path_factory):
    """The folder of a two-epoch run (epochs 1 and 2, optimizer states included)."""
    folder = tmp_path_factory.mktemp("trained")
    assert main(train_argv(shapes, folder, "--epochs", "2", "--val-split", "")) == 0
    return folder


@pytest.fixture
def prefix(trained, tmp_path):
    """A fresh copy of the trained artifact, to damage."""
    shutil.copytree(str(trained), str(tmp_path / "run"))
    return str(tmp_path / "run" / NETWORK)


# Damage done to the copy at ``p`` (epoch 2 is the newest).

def params(p):
    return p + "-0002.params"


def meta(p):
    return p + "-0002.json"


def symbol(p):
    return p + "-symbol.json"


def truncate(path, size):
    with open(path, "r+b") as stream:
        stream.truncate(size)


def flip_byte(path, offset=-20):
    with open(path, "r+b") as stream:
        stream.seek(offset, os.SEEK_END)
        byte = stream.read(1)
        stream.seek(offset, os.SEEK_END)
        stream.write(bytes([byte[0] ^ 0xFF]))


def write(path, data):
    with open(path, "wb") as stream:
        stream.write(data)


def edit_meta(p, change):
    with open(meta(p)) as stream:
        value = json.load(stream)
    change(value)
    write(meta(p), json.dumps(value).encode())


def resave(p, change_arrays):
    """Rewrite epoch 2 through artifact.save (a valid sha256) with changed parameters."""
    loaded = artifact.load(p, 2)
    arg_params = dict(loaded.arg_params)
    change_arrays(arg_params)
    artifact.save(p, 2, loaded.model, arg_params, loaded.aux_params)


def nan_first(arg_params):
    name = sorted(arg_params)[0]
    array = arg_params[name].asnumpy()
    array.flat[0] = np.nan
    arg_params[name] = mx.nd.array(array)


def not_array_file(p):
    write(params(p), b"\x12\x01\x00\x00\x00\x00\x00\x00garbage" * 10)
    digest = artifact._sha256(params(p))
    edit_meta(p, lambda m: m.update(params_sha256=digest))


def dict_set(**values):
    return lambda m: m.update(values)


def swap_config_classes(m):
    m["config"]["class_names"] = m["class_names"] = list(reversed(m["class_names"]))
    m["class_names_sha256"] = artifact.names_sha256(m["class_names"])


def swap_names_only(m):
    """Class names edited in both places, their sha256 left as saved."""
    m["config"]["class_names"] = m["class_names"] = list(reversed(m["class_names"]))


def escaping_names(m):
    m["config"]["class_names"] = m["class_names"] = ["../../../x"] + m["class_names"][1:]


def break_config(m):
    del m["config"]["backbone"]


SHA = ("{params}: damaged or changed since it was saved (its sha256 differs from the one "
       "{meta} records)")
# (id, damage, the one-line message as a regular expression after re.escape of its fixed
# parts: {params}, {meta}, {symbol}, {prefix} are filled in; "<ANY>" matches anything)
LOAD_CASES = [
    ("params truncated", lambda p: truncate(params(p), 1000), SHA),
    ("params byte flipped", lambda p: flip_byte(params(p)), SHA),
    ("params empty", lambda p: truncate(params(p), 0), SHA),
    ("params not MXNet's", not_array_file, "{params}: not an MXNet array file (<ANY>)"),
    ("params NaN", lambda p: resave(p, nan_first),
     "{params}: arg:<ANY> holds NaN or infinite values"),
    ("params missing", lambda p: os.remove(params(p)), "{params}: not found"),
    ("params a folder", lambda p: (os.remove(params(p)), os.mkdir(params(p))),
     "{params}: cannot be read (Is a directory)"),
    ("json truncated", lambda p: truncate(meta(p), 100), "{meta}: not valid JSON (<ANY>)"),
    ("json binary", lambda p: write(meta(p), b"\xbf\x00\xff" * 30),
     "{meta}: not valid JSON (<ANY>)"),
    ("json a list", lambda p: write(meta(p), b"[1, 2]"), "{meta}: not a JSON object"),
    ("json format 1", lambda p: write(meta(p), json.dumps(
        {"network": NETWORK, "epoch": 2}).encode()),
     "{meta} is a format-1 checkpoint; convert it with: zoo convert --checkpoint {prefix}"),
    ("json format 3", lambda p: edit_meta(p, dict_set(format=3)),
     "{meta}: artifact format 3; zoo %s reads format 2" % zoo.__version__),
    ("json no config", lambda p: edit_meta(p, lambda m: m.pop("config")),
     "{meta}: no 'config' field"),
    ("json precision null", lambda p: edit_meta(p, dict_set(precision=None)),
     "{meta}: precision = null: expected an object whose dtype is 'fp32', 'int8' or "
     "'bf16'"),
    ("json precision fp16", lambda p: edit_meta(p, dict_set(precision={"dtype": "fp16"})),
     "{meta}: precision = {{\"dtype\": \"fp16\"}}: expected an object whose dtype is 'fp32', "
     "'int8' or 'bf16'"),
    ("json class names text", lambda p: edit_meta(p, dict_set(class_names="abc")),
     "{meta}: class_names = \"abc\": expected a list of class names, none repeated"),
    ("json other epoch", lambda p: edit_meta(p, dict_set(epoch=3)),
     "{meta}: epoch = 3: expected 2"),
    ("json sha not hex", lambda p: edit_meta(p, dict_set(params_sha256="xyz")),
     "{meta}: params_sha256 = \"xyz\": expected 64 hexadecimal digits"),
    ("json config broken", lambda p: edit_meta(p, break_config),
     "{meta}: its stored config is refused: <ANY>backbone<ANY>"),
    ("json classes not the config's", lambda p: edit_meta(p, dict_set(
        class_names=list("abcd"), class_names_sha256=artifact.names_sha256(list("abcd")))),
     "{meta}: class_names [\"a\", \"b\", \"c\", \"d\"] are not its config's %s" % CLASSES),
    ("json class names edited", lambda p: edit_meta(p, swap_names_only),
     "{meta}: class_names changed since it was saved (their sha256 differs from the "
     "class_names_sha256 recorded there); restore the file, or train onto other names with "
     "zoo train --init-from"),
    ("json class names a path", lambda p: edit_meta(p, escaping_names),
     "{meta}: class_names changed since it was saved<ANY>"),
    ("symbol truncated", lambda p: truncate(symbol(p), 1000), "{symbol}: not valid JSON (<ANY>)"),
    ("symbol not a graph", lambda p: write(symbol(p), b'{"nodes": 5}'),
     "{symbol}: not an MXNet graph (<ANY>)"),
    ("symbol missing", lambda p: os.remove(symbol(p)), "{symbol}: not found"),
]


def expected_pattern(template, p):
    text = template.format(params=params(p), meta=meta(p), symbol=symbol(p), prefix=p)
    return "".join(".*" if part == "<ANY>" else re.escape(part)
                   for part in re.split("(<ANY>)", text))


def run(argv, capsys):
    """``(exit status, the one line on stderr)``."""
    status = main(argv)
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    return status, err.rstrip("\n")


def assert_refused(status, line, command, template, p):
    assert status == 1
    assert re.fullmatch(re.escape("zoo %s: error: " % command) + expected_pattern(template, p),
                        line), line


@pytest.mark.parametrize("damage, template", [case[1:] for case in LOAD_CASES],
                         ids=[case[0] for case in LOAD_CASES])
def test_eval_refuses_it_in_one_line(shapes, prefix, capsys, damage, template):
    damage(prefix)
    status, line = run(["eval", "--checkpoint", prefix, "--epoch", "2", "--data-root", shapes,
                        "--no-progress"], capsys)
    assert_refused(status, line, "eval", template, prefix)


@pytest.mark.parametrize("damage, template", [case[1:] for case in LOAD_CASES],
                         ids=[case[0] for case in LOAD_CASES])
def test_load_detector_raises_one_line(prefix, damage, template):
    damage(prefix)
    with pytest.raises(ArtifactError) as err:
        zoo.load_detector(prefix, 2)
    assert re.fullmatch(expected_pattern(template, prefix), str(err.value)), str(err.value)
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("command", ["demo", "export", "quantize", "benchmark"])
def test_every_command_that_loads_refuses_it(shapes, prefix, tmp_path, capsys, command):
    flip_byte(params(prefix))
    argv = {"demo": ["--image", os.path.join(shapes, "JPEGImages", "000001.jpg"),
                     "--output", str(tmp_path / "d.png")],
            "export": ["--output", str(tmp_path / "exported")],
            "quantize": ["--data-root", shapes, "--batch-size", "4"],
            "benchmark": []}[command]
    status, line = run([command, "--checkpoint", prefix, "--epoch", "2"] + argv, capsys)
    assert_refused(status, line, command, SHA, prefix)


def test_a_missing_epoch_lists_those_there(shapes, prefix, capsys):
    status, line = run(["eval", "--checkpoint", prefix, "--epoch", "7", "--data-root", shapes],
                       capsys)
    assert status == 1
    assert line == "zoo eval: error: %s: no epoch 7 (complete epochs: 1, 2)" % prefix


class Payload:
    """Unpickled, it would create the file ``path``."""

    def __init__(self, path):
        self.path = path

    def __reduce__(self):
        return (os.system, ("touch %s" % self.path,))


@pytest.mark.parametrize("with_json", [False, True], ids=["pickle alone", "pickle and json"])
def test_a_crafted_pickle_is_refused_on_resume_never_run(shapes, prefix, tmp_path, capsys,
                                                         with_json):
    witness = tmp_path / "pwned"
    states = prefix + "-0002.states"
    write(states, pickle.dumps(Payload(witness)))
    if not with_json:
        os.remove(states + ".json")
    status, line = run(train_argv(shapes, tmp_path / "resumed", "--epochs", "3", "--resume",
                                  prefix), capsys)
    expected = (SHA.format(params=states, meta=states + ".json") if with_json else
                "%s: an optimizer state without %s.json (a format-1 pickle, which the zoo never "
                "unpickles)" % (states, states))
    assert (status, line) == (1, "zoo train: error: " + expected)
    assert not witness.exists()


RESUME_CASES = [
    ("states truncated", lambda p: truncate(p + "-0002.states", 100), [],
     SHA.format(params="{prefix}-0002.states", meta="{prefix}-0002.states.json")),
    ("states json broken", lambda p: write(p + "-0002.states.json", b"{"), [],
     "{prefix}-0002.states.json: not valid JSON (<ANY>)"),
    ("params NaN", lambda p: resave(p, nan_first), [],
     "{params}: arg:<ANY> holds NaN or infinite values"),
    ("epochs done", lambda p: None, ["--epochs", "2"],
     "{prefix}-0002 has trained 2 epochs already and epochs is 2 (it counts every epoch from "
     "the first): ask for more to go on"),
    ("other classes", lambda p: edit_meta(p, swap_config_classes), [],
     "{prefix}-0002 was trained on classes %s, this run's data has %s"
     % (list(reversed(CLASSES)), CLASSES)),
    ("another model", lambda p: None, ["--network", "ssd_mobilenetv2", "--data-shape", "256"],
     "{prefix}-0002 holds another model's parameters: <ANY> is missing, ssd_mobilenetv2 needs "
     "<ANY>"),
]


@pytest.mark.parametrize("damage, flags, template", [case[1:] for case in RESUME_CASES],
                         ids=[case[0] for case in RESUME_CASES])
def test_resume_refuses_it_in_one_line(shapes, prefix, tmp_path, capsys, damage, flags,
                                       template):
    damage(prefix)
    output = tmp_path / "resumed"
    status, line = run(train_argv(shapes, output, "--epochs", "3", "--resume", prefix, *flags),
                       capsys)
    assert_refused(status, line, "train", template, prefix)
    assert not output.exists() or not artifact.epochs(str(output / NETWORK))


@pytest.mark.parametrize("command, split", [("eval", "val"), ("quantize", "train")])
def test_a_dataset_with_other_classes_is_refused_listing_both(shapes, prefix, capsys, command,
                                                              split):
    edit_meta(prefix, swap_config_classes)
    status, line = run([command, "--checkpoint", prefix, "--data-root", shapes,
                        "--batch-size", "4"], capsys)
    assert status == 1
    assert line == ("zoo %s: error: voc:%s/%s: classes %s are not those of %s-0002, %s (the "
                    "same names in the same order are needed, or a class map: --class-map '' "
                    "matches them by name)"
                    % (command, shapes, split, CLASSES, prefix, list(reversed(CLASSES))))


def test_an_int8_artifact_is_not_quantized_again(shapes, prefix, capsys):
    edit_meta(prefix, dict_set(precision={"dtype": "int8", "calibration": {"mode": "naive"}}))
    status, line = run(["quantize", "--checkpoint", prefix, "--data-root", shapes], capsys)
    assert (status, line) == (1, "zoo quantize: error: %s-0002 is an int8 artifact, which runs "
                                 "on MXNet's MKL-DNN only: quantize the fp32 artifact it was "
                                 "made from" % prefix)


def test_eval_has_no_implicit_dataset(prefix, capsys):
    assert main(["eval", "--checkpoint", prefix]) == 1
    assert capsys.readouterr().err == "zoo eval: error: --data-root: needed for --dataset voc\n"


def rename_circle(m):
    m["config"]["class_names"] = m["class_names"] = ["round"] + CLASSES[1:]
    m["class_names_sha256"] = artifact.names_sha256(m["class_names"])


def reordered_copy(shapes, folder):
    """The dataset with its class list in reverse order (the same objects by name)."""
    shutil.copytree(shapes, str(folder), symlinks=True)
    with open(os.path.join(str(folder), "classes.txt"), "w") as stream:
        stream.write("\n".join(reversed(CLASSES)) + "\n")
    return str(folder)


def eval_detections(argv, capsys):
    """The COCO detections ``zoo eval argv`` writes, as ``(image, score, box, category)``."""
    assert main(argv) == 0, capsys.readouterr().err
    output = os.path.splitext(argv[argv.index("--output") + 1])[0] + "-detections.json"
    with open(output) as stream:
        return sorted((d["image_id"], d["score"], d["bbox"], d["category_id"])
                      for d in json.load(stream))


def test_a_class_map_scores_reordered_and_renamed_classes_by_name(shapes, prefix, tmp_path,
                                                                  capsys):
    common = ["eval", "--checkpoint", prefix, "--no-progress", "--batch-size", "4"]
    plain = eval_detections(common + ["--data-root", shapes, "--output",
                                      str(tmp_path / "a.json")], capsys)
    assert len({category for *_, category in plain}) > 1
    reordered = reordered_copy(shapes, tmp_path / "reordered")
    status, line = run(common + ["--data-root", reordered], capsys)
    assert status == 1 and line.endswith("--class-map '' matches them by name)")
    by_name = eval_detections(common + ["--data-root", reordered, "--class-map", "",
                                        "--output", str(tmp_path / "b.json")], capsys)
    # Category ids are dataset class ids + 1: the reversed list turns c into 5 - c.
    assert by_name == sorted((*rest, len(CLASSES) + 1 - category) for *rest, category in plain)
    edit_meta(prefix, rename_circle)
    renamed = eval_detections(common + ["--data-root", shapes, "--class-map", "circle=round",
                                        "--output", str(tmp_path / "c.json")], capsys)
    assert renamed == plain


@pytest.mark.parametrize("class_map, expected", [
    ("circle=disc", "class map circle=disc: 'disc' is not a class of {source} %s" % CLASSES),
    ("disc=circle", "class map disc=circle: 'disc' is not a class of voc:{data}/val %s"
     % CLASSES),
    ("square=circle", "class map: {source}'s class 'circle' is matched by both 'circle' and "
                      "'square'"),
])
def test_a_bad_class_map_is_one_line(shapes, prefix, capsys, class_map, expected):
    status, line = run(["eval", "--checkpoint", prefix, "--data-root", shapes, "--class-map",
                        class_map], capsys)
    assert (status, line) == (1, "zoo eval: error: " + expected.format(
        source=prefix + "-0002", data=shapes))


def test_a_dataset_class_the_artifact_lacks_needs_a_mapping(shapes, prefix, capsys):
    edit_meta(prefix, rename_circle)
    status, line = run(["eval", "--checkpoint", prefix, "--data-root", shapes, "--class-map",
                        ""], capsys)
    assert (status, line) == (1, "zoo eval: error: voc:%s/val: class 'circle' is not a class of "
                                 "%s-0002 %s: map it to one with circle=CLASS"
                              % (shapes, prefix, ["round"] + CLASSES[1:]))


def test_detections_of_unmapped_classes_are_dropped():
    rows = np.array([[0, 0.9, 0, 0, 1, 1], [1, 0.8, 0, 0, 1, 1], [2, 0.7, 0, 0, 1, 1]],
                    np.float32)
    lookup = np.array([-1, 0, 1])  # the artifact's class 0 is not in the dataset
    (relabelled,) = relabel([rows], lookup)
    np.testing.assert_array_equal(relabelled, rows[1:] - [[1, 0, 0, 0, 0, 0]])


def test_quantize_refuses_an_unknown_excluded_layer(shapes, prefix, capsys):
    status, line = run(["quantize", "--checkpoint", prefix, "--data-root", shapes,
                        "--batch-size", "4", "--calib-batches", "1", "--exclude", "conv_typo"],
                       capsys)
    assert status == 1
    assert line.startswith("zoo quantize: error: excluded layer 'conv_typo' is not in the graph "
                           "(whose layers are "), line
    assert not os.path.exists(prefix + "-int8-0002.json")


def test_a_freeze_pattern_matching_nothing_is_refused(shapes, tmp_path, capsys):
    status, line = run(train_argv(shapes, tmp_path, "--epochs", "1", "--freeze", "^conv_typo"),
                       capsys)
    assert status == 1
    assert line.startswith("zoo train: error: freeze '^conv_typo' matches no parameter of %s "
                           "(whose names are like " % NETWORK), line
    assert not tmp_path.exists() or not list(tmp_path.iterdir())  # refused before any write
