"""The README's "Train on your own data" walkthrough, run as written (only the sizes made
small) on COCO datasets laid out as a user's own: category ids that are not 1..N, large
scattered image ids, a second dataset with other classes to fine-tune onto; then its
Python, which scores the fine-tuned detector's own results with pycocotools."""
import contextlib
import io
import json
import os
import re
import shlex
import shutil
import subprocess
import sys

import numpy as np
import pytest
from pycocotools.coco import COCO
from pycocotools.cocoeval import COCOeval

import zoo
from zoo.data import VOCDataset
from test_readme import section_code

from factories import ROOT
SMALL = {"--data-shape 192": "--data-shape 128", "--epochs 20": "--epochs 1",
         "--epochs 10": "--epochs 1", "--batch-size 8": "--batch-size 4"}
BASE_CATEGORIES = {"circle": 42, "square": 7, "triangle": 3, "star": 11}
TUNED_CATEGORIES = {"star": 9, "kite": 2, "square": 44}  # kite: the circles, renamed
RENAMED = {"circle": "kite"}


def walkthrough_commands():
    """The commands of the README block between the walkthrough markers, continuation
    lines joined, comments dropped, sizes made small."""
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as stream:
        text = stream.read()
    block = text.split("<!-- walkthrough -->")[1].split("<!-- /walkthrough -->")[0]
    block = block.split("```sh\n")[1].split("```")[0].replace("\\\n", " ")
    commands = [line.strip() for line in block.splitlines()
                if line.strip() and not line.strip().startswith("#")]
    for small in SMALL.items():
        commands = [command.replace(*small) for command in commands]
    return commands


def write_coco(voc, root, split, categories, renamed, first_id):
    """``root/annotations/SPLIT.json`` of the VOC split's images and boxes, the classes
    named in ``categories`` only (under ``renamed`` names), images copied into
    ``root/images`` as ``a.jpg``, ``b.jpg``, ..."""
    images, annotations = [], []
    os.makedirs(os.path.join(root, "images"), exist_ok=True)
    for index, record in enumerate(voc.records):
        name = "%s.jpg" % chr(ord("a") + first_id % 7 + index) if split == "val" else \
            "train_%02d.jpg" % index
        shutil.copy(record.path, os.path.join(root, "images", name))
        image_id = 900000 + 37 * (index + first_id)
        images.append({"id": image_id, "file_name": name, "width": record.width,
                       "height": record.height})
        for class_id, (x1, y1, x2, y2) in zip(record.class_ids, record.boxes):
            class_name = renamed.get(voc.class_names[class_id], voc.class_names[class_id])
            if class_name in categories:
                annotations.append({
                    "id": len(annotations) + 1, "image_id": image_id, "iscrowd": 0,
                    "category_id": categories[class_name],
                    "bbox": [float(x1), float(y1), float(x2 - x1 + 1), float(y2 - y1 + 1)],
                    "area": float((x2 - x1 + 1) * (y2 - y1 + 1))})
    data = {"images": images, "annotations": annotations,
            "categories": [{"id": i, "name": n} for n, i in categories.items()]}
    os.makedirs(os.path.join(root, "annotations"), exist_ok=True)
    with open(os.path.join(root, "annotations", split + ".json"), "w") as stream:
        json.dump(data, stream)


@pytest.fixture(scope="module")
def workdir(shapes, tmp_path_factory):
    work = tmp_path_factory.mktemp("walkthrough")
    for split, first_id in (("train", 10), ("val", 0)):
        voc = VOCDataset(shapes, split)
        write_coco(voc, str(work / "mydata"), split, BASE_CATEGORIES, {}, first_id)
        write_coco(voc, str(work / "mydata2"), split, TUNED_CATEGORIES, RENAMED, first_id)
    return work


def run(command, cwd):
    argv = shlex.split(command)
    assert argv[0] == "zoo"
    return subprocess.run([sys.executable, "-m", "zoo"] + argv[1:], cwd=str(cwd),
                          capture_output=True, text=True, timeout=900)


def run_readme_python(workdir, monkeypatch):
    """The section's Python, run in ``workdir``: its namespace."""
    monkeypatch.chdir(workdir)
    namespace = {}
    with contextlib.redirect_stdout(io.StringIO()):
        exec(compile(section_code("## Train on your own data"), "README.md", "exec"), namespace)
    return namespace


def test_the_readme_walkthrough_runs_as_written(workdir, monkeypatch):
    commands = walkthrough_commands()
    assert [c.split()[1] for c in commands] == ["train", "train", "eval", "detect", "export",
                                                "detect", "quantize", "eval"]
    outputs = []
    for command in commands:
        done = run(command, workdir)
        assert done.returncode == 0, (command, done.stderr[-3000:])
        outputs.append(done)
    base, tuned, evaluated = outputs[:3]
    assert "runs/base/ssd_mobilenetv2_stride8" in base.stdout.splitlines()[-1]
    assert re.search(r"init from runs/base/ssd_mobilenetv2_stride8-\d{4}: \d+ arrays copied, "
                     r"\d+ mapped class by class", tuned.stdout + tuned.stderr)
    # The written detections carry the file's own ids and score what zoo eval saved.
    truth = COCO(str(workdir / "mydata2" / "annotations" / "val.json"))
    found = truth.loadRes(str(workdir / "runs" / "tuned" / "eval-val-detections.json"))
    assert {row["category_id"] for row in found.dataset["annotations"]} <= {9, 2, 44}
    evaluator = COCOeval(truth, found, "bbox")
    evaluator.evaluate(), evaluator.accumulate(), evaluator.summarize()
    with open(workdir / "runs" / "tuned" / "eval-val.json") as stream:
        saved = json.load(stream)
    assert saved["coco"]["AP"] == pytest.approx(evaluator.stats[0], abs=1e-9)
    # zoo detect on the folder, on MXNet and on the ONNX export: the same boxes.
    with open(workdir / "runs" / "detect" / "results.json") as stream:
        on_mxnet = json.load(stream)["images"]
    with open(workdir / "runs" / "detect-onnx" / "results.json") as stream:
        on_onnx = json.load(stream)["images"]
    assert len(on_mxnet) == len(os.listdir(workdir / "mydata2" / "images"))
    for ours, theirs in zip(on_mxnet, on_onnx):
        assert os.path.basename(ours["file"]) == os.path.basename(theirs["file"])
        boxes = [np.array([d["box"] for d in entry["detections"]]).reshape(-1, 4)
                 for entry in (ours, theirs)]
        assert boxes[0].shape == boxes[1].shape
        np.testing.assert_allclose(boxes[0], boxes[1], atol=0.05)
    with open(workdir / "runs" / "int8" / "eval-val.json") as stream:
        assert json.load(stream)["precision"]["dtype"] == "int8"
    # Both trained artifacts record their file's ids; detect's results name them, as MXNet
    # and as the ONNX export (whose metadata carries them).
    assert zoo.artifact.load(str(workdir / "runs" / "base" / "ssd_mobilenetv2_stride8")) \
        .category_ids == [3, 7, 11, 42]
    for folder in ("detect", "detect-onnx"):
        with open(workdir / "runs" / folder / "results.json") as stream:
            results = json.load(stream)
        assert results["category_ids"] == [2, 9, 44]
        assert all(d["category_id"] == [2, 9, 44][d["class_id"]]
                   for entry in results["images"] for d in entry["detections"])
    # From Python: the detector's own results carry the file's ids, and pycocotools gives
    # them the AP zoo eval printed.
    namespace = run_readme_python(workdir, monkeypatch)
    assert namespace["detector"].category_ids == [2, 9, 44]
    assert namespace["detector"].class_names == ["kite", "star", "square"]
    with open(workdir / "runs" / "tuned" / "python-val.json") as stream:
        written = json.load(stream)
    assert {row["category_id"] for row in written} == {2, 9, 44}
    assert namespace["evaluator"].stats[0] == pytest.approx(saved["coco"]["AP"], abs=1e-4)
    assert "COCO AP %.4f" % saved["coco"]["AP"] in evaluated.stdout
