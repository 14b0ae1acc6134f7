"""A user's own data through the command line, scored by a toy export (test_onnx_runtime's
graph): VOC folders as labelling tools leave them (no classes.txt, <filename> naming PNGs),
results named after what was scored and never written over, and the help and messages
that name the flag that works."""
import io
import json
import logging
import os
import shutil

import pytest

import zoo
from zoo.cli import COMMANDS, main
from zoo.progress import PlainBar

from test_without_mxnet import COCO_IMAGES, VOC_IMAGES, toy_exports, write_coco, write_voc


@pytest.fixture(scope="module")
def toy_file(tmp_path_factory):
    return toy_exports(str(tmp_path_factory.mktemp("toy")))[0]


@pytest.fixture
def toy(toy_file, tmp_path):
    """The toy export with COCO ids, in this test's folder (where its results go)."""
    return shutil.copy(toy_file, str(tmp_path / "toy.onnx"))


def run(argv, capsys):
    """``(exit status, stdout, the one line on stderr or "")``."""
    status = main(argv)
    out, err = capsys.readouterr()
    assert err.count("\n") <= 1 and "Traceback" not in err, err
    return status, out, err.strip()


def evaluate(toy, root, capsys, *flags):
    return run(["eval", "--checkpoint", toy, "--dataset", "voc", "--data-root", root,
                "--no-progress"] + list(flags), capsys)


def test_a_voc_folder_without_classes_txt_reads_its_classes_and_filenames(toy, tmp_path, capsys,
                                                                          caplog):
    root = write_voc(str(tmp_path / "voc"))
    with caplog.at_level(logging.INFO):
        status, out, err = evaluate(toy, root, capsys)
    assert status == 0, err
    assert out.startswith("4 images of %s/val" % root)
    notes = [r.getMessage() for r in caplog.records if "classes.txt" in r.getMessage()]
    assert notes == ["%s has no classes.txt: its 3 classes, read from its annotations in "
                     "alphabetical order: circle, square, triangle (list them in "
                     "%s/classes.txt, one a line, to choose them and their order)"
                     % (root, root)]
    # Its images are the files <filename> names, PNG or JPEG, whatever the id.
    scored = zoo.data.VOCDataset(root, "val")
    assert [os.path.basename(r.path) for r in scored.records] == [n for _, n, _, _ in VOC_IMAGES]
    # A classes.txt (the healthy case) is used, in its order, and nothing is said.
    caplog.clear()
    with open(os.path.join(root, "classes.txt"), "w") as stream:
        stream.write("circle\nsquare\ntriangle\n")
    with caplog.at_level(logging.INFO):
        assert evaluate(toy, root, capsys, "--output", str(tmp_path / "a.json"))[0] == 0
    assert not [r for r in caplog.records if "classes.txt" in r.getMessage()]


def test_voc_faults_name_the_file_and_the_way_out(toy, tmp_path, capsys):
    root = write_voc(str(tmp_path / "voc"))
    with open(os.path.join(root, "classes.txt"), "w") as stream:
        stream.write("circle\nsquare\n")
    status, _, err = evaluate(toy, root, capsys)
    assert status == 1 and err == (
        "zoo eval: error: %s/Annotations/val_2195953.xml: object 1: unknown class 'triangle': "
        "not in %s/classes.txt (circle, square): add it there, one name a line" % (root, root))
    os.remove(os.path.join(root, "classes.txt"))
    os.remove(os.path.join(root, "JPEGImages", "val_2195953.png"))
    status, _, err = evaluate(toy, root, capsys)
    assert status == 1 and err.startswith(
        "zoo eval: error: %s/Annotations/val_2195953.xml: image %s/JPEGImages/val_2195953.png "
        "(its <filename>): No such file" % (root, root)), err
    empty = write_voc(str(tmp_path / "empty"), VOC_IMAGES[:1])
    with open(os.path.join(empty, "Annotations", "001500.xml")) as stream:
        xml = stream.read()
    with open(os.path.join(empty, "Annotations", "001500.xml"), "w") as stream:
        stream.write(xml[:xml.index("\t<object>")] + "</annotation>\n")
    status, _, err = evaluate(toy, empty, capsys)
    assert status == 1 and err == (
        "zoo eval: error: %s: no classes.txt, and no <object> in %s/Annotations to read the "
        "class names from: list them in %s/classes.txt, one a line" % (empty, empty, empty))


def coco_eval(toy, annotations, image_dir, capsys, *flags):
    return run(["eval", "--checkpoint", toy, "--dataset", "coco", "--annotations", annotations,
                "--image-dir", image_dir, "--no-progress"] + list(flags), capsys)


def test_eval_results_are_named_after_what_was_scored_and_kept(toy, tmp_path, capsys,
                                                               monkeypatch):
    write_coco(str(tmp_path / "mine"))
    labels, images = tmp_path / "mine" / "annotations", str(tmp_path / "mine" / "images")
    with open(labels / "val.json") as stream:
        data = json.load(stream)
    shutil.copy(str(labels / "val.json"), str(labels / "train.json"))
    assert coco_eval(toy, str(labels / "{split}.json"), images, capsys)[0] == 0
    base = os.path.splitext(toy)[0]
    val = open(base + "-eval-val.json").read()
    assert json.loads(val)["data"] == "coco:%s" % (labels / "val.json")
    # A file named without {split} is scored under its own name, beside the split's.
    assert coco_eval(toy, str(labels / "train.json"), images, capsys)[0] == 0
    assert json.loads(open(base + "-eval-train.json").read())["data"] == \
        "coco:%s" % (labels / "train.json")
    assert open(base + "-eval-val.json").read() == val
    # Another file of the same stem is another scoring: refused, the earlier kept.
    other = tmp_path / "other"
    other.mkdir()
    data["annotations"] = data["annotations"][:1]
    (other / "val.json").write_text(json.dumps(data))
    status, _, err = coco_eval(toy, str(other / "val.json"), images, capsys)
    assert status == 1 and err == (
        "zoo eval: error: %s-eval-val.json holds the score of %s on coco:%s, which this "
        "evaluation would replace: name the results file with --output (this name to replace "
        "it)" % (base, toy, labels / "val.json"))
    assert open(base + "-eval-val.json").read() == val
    # --output naming it replaces it; the same scoring run again (from another folder, by
    # other names) replaces its own result.
    assert coco_eval(toy, str(other / "val.json"), images, capsys, "--output",
                     base + "-eval-val.json")[0] == 0
    assert json.loads(open(base + "-eval-val.json").read())["data"] == \
        "coco:%s" % (other / "val.json")
    monkeypatch.chdir(tmp_path)
    assert coco_eval(os.path.relpath(toy), "other/val.json", "mine/images", capsys)[0] == 0


def test_eval_needs_no_data_root_for_a_named_coco_split(toy, tmp_path, capsys):
    write_coco(str(tmp_path / "mine"))
    flags = ["--annotations", str(tmp_path / "mine" / "annotations" / "val.json"),
             "--output", str(tmp_path / "a.json")]
    status, out, err = run(["eval", "--checkpoint", toy, "--dataset", "coco", "--no-progress",
                            "--image-dir", str(tmp_path / "mine" / "images")] + flags, capsys)
    assert status == 0 and out.startswith("%d images of " % len(COCO_IMAGES)), err
    status, _, err = run(["eval", "--checkpoint", toy, "--dataset", "coco"] + flags, capsys)
    assert (status, err) == (1, "zoo eval: error: --data-root: needed for --dataset coco unless "
                                "--annotations and --image-dir name the split's file and "
                                "folder")


def test_help_shows_plain_text_that_fits_and_names_every_checkpoint_kind(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "100")
    for command in COMMANDS:
        with pytest.raises(SystemExit) as exit_:
            main([command, "--help"])
        assert exit_.value.code == 0
        shown = capsys.readouterr().out
        assert ":mod:" not in shown and "``" not in shown, command
        too_long = [line for line in shown.splitlines() if len(line) > 100]
        assert not too_long, (command, too_long)
        if command in ("detect", "eval", "benchmark"):
            assert ".onnx" in shown and ".xml" in shown, command


def test_an_ssd_at_a_data_shape_its_maps_cannot_shrink_at_names_one_that_works(tmp_path, capsys):
    root = write_voc(str(tmp_path / "voc"), split="train")
    status, _, err = run(["train", "--network", "ssd_resnet50_v1_gluoncv_voc", "--dataset",
                          "voc", "--data-root", root, "--val-split", "", "--batch-size", "2",
                          "--data-shape", "256", "--output-dir", str(tmp_path / "out")], capsys)
    assert status == 1 and err.endswith("at data shape 256: strides must grow strictly; data "
                                        "shapes from 288 up work (e.g. --data-shape 288)"), err
    assert zoo.get_model("ssd_resnet50_v1_gluoncv_voc", data_shape=288).config["data_shape"] == 288


class Terminal(io.StringIO):
    def isatty(self):
        return True


def test_a_progress_bar_without_tqdm_counts_on_a_terminal_only():
    shown = Terminal()
    assert list(PlainBar(range(3), total=3, desc="detecting", unit="image",
                         stream=shown)) == [0, 1, 2]
    assert shown.getvalue().endswith("\r\033[Kdetecting: 3/3 image\n")
    quiet = io.StringIO()
    bar = PlainBar(total=2, desc="epoch 1/2", stream=quiet, leave=False)
    bar.update(), bar.set_postfix({"loss": "0.5"}), bar.close()
    assert quiet.getvalue() == ""
