"""``zoo train`` ends with the ``zoo eval`` command that scores its artifact: run as printed,
it scores the run's validation split, found by the very flags the run found its data by (a
COCO file at its own path needs no ``--data-root``)."""
import json
import os
import shlex

from zoo.cli import main
from zoo.data import VOCDataset

from test_data import write_coco

NETWORK = "ssd_mobilenetv2_stride8"


def test_the_printed_eval_command_scores_a_coco_run_at_its_own_paths(shapes, tmp_path,
                                                                      capsys):
    labels = tmp_path / "labels"
    labels.mkdir()
    for split in ("train", "val"):
        write_coco(VOCDataset(shapes, split), str(labels / ("%s.json" % split)))
    output = str(tmp_path / "run")
    assert main(["train", "--network", NETWORK, "--dataset", "coco", "--annotations",
                 str(labels / "{split}.json"), "--image-dir",
                 os.path.join(shapes, "JPEGImages"), "--data-shape", "128", "--batch-size",
                 "4", "--epochs", "1", "--data-threads", "1", "--output-dir", output]) == 0
    footer = capsys.readouterr().out.strip().splitlines()[-1]
    printed = shlex.split(footer.split("evaluate it with: ")[1])
    assert printed[:2] == ["zoo", "eval"]
    # The run read no root folder: its default (output/shapes) is none of its data.
    assert "--data-root" not in printed, printed
    assert main(printed[1:]) == 0
    prefix = os.path.join(output, NETWORK)
    with open(prefix + "-eval-val.json") as stream:
        scored = json.load(stream)
    assert (scored["checkpoint"], scored["epoch"], scored["images"]) == (prefix, 1, 4)
    assert scored["data_files"]["annotations"] == os.path.realpath(str(labels / "val.json"))
