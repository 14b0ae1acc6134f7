"""The command line where only a deployment's requirements are installed: the README's
"Deploy without MXNet" commands and Python, run as written in a fresh interpreter that can
import nothing but what requirements/onnxruntime.txt and requirements/openvino.txt install
(and their dependencies): no MXNet, GluonCV or tqdm. The deployed files are toy exports (the
graph of test_onnx_runtime.py) carrying COCO category ids 44, 2 and 9; the data are a VOC
folder and a COCO file written here as a user's tools write them."""
import configparser
import json
import os
import re
import shutil
import subprocess
import sys
from importlib import metadata

import cv2
import numpy as np
import pytest
from packaging.requirements import Requirement
from test_onnx_runtime import NAMES, STRETCH, write_export
from test_readme import section_code

from factories import ROOT
RUNTIMES = ("onnxruntime.txt", "openvino.txt")
CATEGORY_IDS = [2, 9, 44]           # of NAMES (circle, square, triangle), in id order
CATEGORIES = [(44, "triangle"), (2, "circle"), (9, "square")]   # as the file lists them
BOX = [0.1, 0.2]                    # the toy's box of class k is [k/10, k/10, 0.9, 0.9]
VOC_IMAGES = [("001500", "001500.jpg", 120, 90), ("val_2195953", "val_2195953.png", 77, 101),
              ("0003", "IMG_0003.PNG", 64, 64), ("val_0000004", "val_0000004.jpg", 150, 61)]
COCO_IMAGES = [(1000004, "a/p1.png", 97, 70), (2195953, "p2.jpg", 61, 130),
               (7, "p3.jpg", 120, 120)]


def requirement_lines(name):
    """The requirements a requirements/ file names, its -r includes followed."""
    lines = []
    with open(os.path.join(ROOT, "requirements", name)) as stream:
        for line in stream:
            line = line.split("#")[0].strip()
            if line.startswith("-r "):
                lines += requirement_lines(line[3:].strip())
            elif line:
                lines.append(Requirement(line))
    return lines


def canonical(name):
    return re.sub(r"[-_.]+", "-", name).lower()


def installable():
    """The distributions the deployment requirements install: those files' and, transitively,
    what they require (extras left out)."""
    wanted = [r.name for name in RUNTIMES for r in requirement_lines(name)]
    found = set()
    while wanted:
        name = canonical(wanted.pop())
        if name in found:
            continue
        found.add(name)
        for line in metadata.requires(name) or ():
            requirement = Requirement(line)
            if requirement.marker is None or requirement.marker.evaluate({"extra": ""}):
                wanted.append(requirement.name)
    return found


def hidden_modules():
    """The top-level modules of every installed distribution the deployment does not
    install (the zoo itself, from the checkout, aside)."""
    allowed = installable()
    return sorted(module for module, dists in metadata.packages_distributions().items()
                  if module not in ("zoo", "symbols")
                  and not any(canonical(d) in allowed for d in dists))


SITECUSTOMIZE = """import importlib.machinery
import sys

HIDDEN = set(%r)


class Hidden(importlib.machinery.PathFinder):
    # Finds nothing of HIDDEN: as if those distributions were not installed.
    @classmethod
    def find_spec(cls, name, path=None, target=None):
        if name.partition(".")[0] in HIDDEN:
            return None
        return importlib.machinery.PathFinder.find_spec(name, path, target)


sys.meta_path[:] = [Hidden if finder is importlib.machinery.PathFinder else finder
                    for finder in sys.meta_path]
"""

DRIVER = """import contextlib
import io
import json
import logging
import shlex
import sys

STARTUP = set(sys.modules)  # what site's .pth files loaded (setuptools' _distutils_hack)

from zoo.cli import main


def run(command):
    out, err = io.StringIO(), io.StringIO()
    logging.getLogger().handlers.clear()  # main() logs to the stderr of its own run
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            status = main(shlex.split(command)[1:])
        except SystemExit as exit_:
            status = exit_.code
    return {"status": status, "stdout": out.getvalue(), "stderr": err.getvalue()}


def python(code):
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, "README.md", "exec"), {})
    return out.getvalue()


job = json.load(open(sys.argv[1]))
done = {"runs": [run(command) for command in job["commands"]],
        "python": [python(code) for code in job["python"]]}
done["loaded"] = sorted(name for name, module in sys.modules.items()
                        if name.partition(".")[0] in job["hidden"] and module is not None
                        and name not in STARTUP)
print(json.dumps(done))
"""

COCO_ROUTE = """from pycocotools.coco import COCO
from pycocotools.cocoeval import COCOeval

import zoo

truth = COCO("mydata/annotations/val.json")
images = truth.loadImgs(truth.getImgIds())
detector = zoo.load_deployed_detector("out/ssd.onnx")
found = detector(["mydata/images/" + image["file_name"] for image in images],
                 score_threshold=0.0, max_detections=1000)
zoo.write_coco_results("out/python-val.json", zip([i["id"] for i in images], found))
evaluator = COCOeval(truth, truth.loadRes("out/python-val.json"), "bbox")
evaluator.evaluate(), evaluator.accumulate(), evaluator.summarize()
print("AP", repr(float(evaluator.stats[0])))
"""


def textured(height, width, seed):
    """A bright image whose channel means, and so the toy's scores (all above 0.5), differ
    from image to image."""
    rng = np.random.default_rng(seed)
    return rng.integers(rng.integers(100, 180, 3), 256, (height, width, 3)).astype(np.uint8)


def toy_box(k, width, height):
    return [k / 10 * width, k / 10 * height, 0.9 * width, 0.9 * height]


VOC_XML = """<annotation>
\t<folder>JPEGImages</folder>
\t<filename>%s</filename>
\t<path>C:\\Users\\me\\Pictures\\%s</path>
\t<source><database>Unknown</database></source>
\t<size><width>%d</width><height>%d</height><depth>3</depth></size>
\t<segmented>0</segmented>
%s</annotation>
"""
VOC_OBJECT = """\t<object>
\t\t<name>%s</name><pose>Unspecified</pose><truncated>0</truncated><difficult>0</difficult>
\t\t<bndbox><xmin>%d</xmin><ymin>%d</ymin><xmax>%d</xmax><ymax>%d</ymax></bndbox>
\t</object>
"""


def write_voc(root, images=VOC_IMAGES, split="val"):
    """A VOC folder as labelImg leaves it, without classes.txt: annotations whose
    ``<filename>`` names JPEG and PNG files (one not named after its id), the toy's circle
    and square boxes on alternate images, one triangle it cannot find; returns ``root``."""
    for folder in ("Annotations", "JPEGImages", os.path.join("ImageSets", "Main")):
        os.makedirs(os.path.join(root, folder), exist_ok=True)
    for index, (image_id, filename, width, height) in enumerate(images):
        assert cv2.imwrite(os.path.join(root, "JPEGImages", filename),
                           textured(height, width, index))
        objects = [(NAMES[index % 2], toy_box(index % 2, width, height))]
        if index == 1:
            objects.append(("triangle", [2, 3, 20, 30]))
        xml = VOC_XML % (filename, filename, width, height, "".join(
            VOC_OBJECT % (name, *(round(v) + 1 for v in box)) for name, box in objects))
        with open(os.path.join(root, "Annotations", image_id + ".xml"), "w") as stream:
            stream.write(xml)
    with open(os.path.join(root, "ImageSets", "Main", split + ".txt"), "w") as stream:
        stream.write("".join(image_id + "\n" for image_id, *_ in images))
    return root


def write_coco(root):
    """``root/annotations/val.json`` with category ids 44, 2, 9 (listed out of order) and
    large image ids, images in ``root/images`` and a subfolder; the ground truth is the
    toy's circle box of every image, its square of one, and a triangle it cannot find."""
    annotations = []
    for index, (image_id, name, width, height) in enumerate(COCO_IMAGES):
        path = os.path.join(root, "images", name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        assert cv2.imwrite(path, textured(height, width, 10 + index))
        boxes = [(2, toy_box(0, width, height))] + (
            [(9, toy_box(1, width, height))] if index == 1 else [])
        boxes += [(44, [1, 1, 9, 7])] if index == 2 else []
        for category, (x1, y1, x2, y2) in boxes:
            annotations.append({"id": 500 + len(annotations), "image_id": image_id,
                                "category_id": category, "bbox": [x1, y1, x2 - x1, y2 - y1],
                                "area": (x2 - x1) * (y2 - y1), "iscrowd": 0})
    data = {"images": [{"id": i, "file_name": n, "width": w, "height": h}
                       for i, n, w, h in COCO_IMAGES],
            "categories": [{"id": i, "name": n} for i, n in CATEGORIES],
            "annotations": annotations}
    os.makedirs(os.path.join(root, "annotations"))
    with open(os.path.join(root, "annotations", "val.json"), "w") as stream:
        json.dump(data, stream)


def toy_exports(folder):
    """``(onnx path, xml path)``: the toy export with the COCO ids, and its OpenVINO IR."""
    from zoo.onnx.openvino_runtime import write_ir
    os.makedirs(folder, exist_ok=True)
    onnx_path = write_export(os.path.join(folder, "ssd.onnx"), STRETCH, metadata={
        "zoo.category_ids": json.dumps(CATEGORY_IDS)})
    return onnx_path, write_ir(onnx_path, os.path.join(folder, "ssd-int8.xml"),
                               {"dtype": "fp32"})


def readme_commands(marker):
    """The commands of docs/deployment.md's block between ``<!-- marker -->`` comments."""
    with open(os.path.join(ROOT, "docs", "deployment.md"), encoding="utf-8") as stream:
        block = stream.read().split("<!-- %s -->" % marker)[1].split("<!-- /%s -->" % marker)[0]
    block = block.split("```sh\n")[1].split("```")[0].replace("\\\n", " ")
    return [line.split("#")[0].strip() for line in block.splitlines() if line.strip()]


@pytest.fixture(scope="module")
def deployment(tmp_path_factory):
    """What the README's commands read, under one folder: the exports in out/, the VOC
    folder in output/shapes, the ONNX example's file, a COCO dataset in mydata/."""
    work = tmp_path_factory.mktemp("deployment")
    onnx_path, _ = toy_exports(str(work / "out"))
    write_voc(str(work / "output" / "shapes"))
    os.makedirs(work / "output" / "deploy")
    shutil.copy(onnx_path, str(work / "output" / "deploy" / "ssd_mobilenetv2_stride8.onnx"))
    write_coco(str(work / "mydata"))
    return work


def run_without_mxnet(work, commands, python=()):
    """Run ``commands`` (``zoo ...`` lines) and ``python`` (code) in one fresh interpreter
    in ``work`` that finds none of :func:`hidden_modules`; returns what the driver
    reports."""
    hidden = hidden_modules()
    site = work / "site"
    site.mkdir(exist_ok=True)
    (site / "sitecustomize.py").write_text(SITECUSTOMIZE % (hidden,))
    (site / "driver.py").write_text(DRIVER)
    (site / "job.json").write_text(json.dumps({"commands": list(commands),
                                               "python": list(python), "hidden": hidden}))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(site), ROOT]),
               OMP_NUM_THREADS="1", COLUMNS="100")
    done = subprocess.run([sys.executable, str(site / "driver.py"), str(site / "job.json")],
                          cwd=str(work), env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.splitlines()[-1])


def test_the_deployment_requirements_are_setup_cfgs_without_mxnet():
    """requirements/*.txt pin what setup.cfg pins, and leave MXNet, GluonCV and tqdm out: the
    environment the test below simulates is what they install."""
    config = configparser.ConfigParser()
    config.read(os.path.join(ROOT, "setup.cfg"))
    declared = [Requirement(line) for section, key in (("options", "install_requires"),
                                                       ("options.extras_require", "onnx"),
                                                       ("options.extras_require", "openvino"))
                for line in config.get(section, key).splitlines() if line.strip()]
    pins = {canonical(r.name): str(r.specifier) for r in declared}
    for name in RUNTIMES:
        for requirement in requirement_lines(name):
            assert pins[canonical(requirement.name)] == str(requirement.specifier), requirement
    hidden = hidden_modules()
    assert {"mxnet", "gluoncv", "tqdm"} <= set(hidden)
    assert not {"numpy", "cv2", "onnxruntime", "openvino", "pycocotools"} & set(hidden)


def test_the_readme_deployment_runs_without_mxnet(deployment):
    commands = readme_commands("without-mxnet")
    installs = [c for c in commands if c.startswith("pip ")]
    assert installs == ["pip install -r requirements/onnxruntime.txt",
                        "pip install -r requirements/openvino.txt", "pip install --no-deps ."]
    # The benchmarks are not installed: theirs runs as python -m zoo in the checkout's folder
    # (on the path here), the same main() as the zoo command's.
    assert [c.split()[3] for c in commands if c.startswith("python -m zoo ")] == ["benchmark"]
    zoo_lines = [c.replace("python -m zoo ", "zoo ", 1) for c in commands
                 if c.startswith(("zoo ", "python -m zoo "))]
    assert [c.split()[1] for c in zoo_lines] == ["eval", "detect", "benchmark"]
    coco_eval = ("zoo eval --checkpoint out/ssd.onnx --dataset coco --annotations "
                 "mydata/annotations/val.json --image-dir mydata/images --no-progress")
    refused = ["zoo train --network ssd_mobilenetv2_stride8 --data-root output/shapes",
               "zoo detect --checkpoint output/train/ssd_mobilenetv2_stride8 output/shapes"]
    done = run_without_mxnet(deployment, ["zoo --version"] + zoo_lines + [coco_eval] + refused,
                             [section_code("## Deploy without MXNet",
                                           os.path.join("docs", "deployment.md")), COCO_ROUTE])
    assert done["loaded"] == []
    version, evaluated, detected, timed, scored, *rest = done["runs"]
    assert version["status"] == 0 and version["stdout"].startswith("zoo ")
    for run in (evaluated, detected, timed, scored):
        assert run["status"] == 0, run["stderr"][-2000:]
    # The VOC folder has no classes.txt: its classes come from its annotations, said once.
    assert ("output/shapes has no classes.txt: its 3 classes, read from its annotations in "
            "alphabetical order: circle, square, triangle" in evaluated["stderr"])
    assert "4 images of output/shapes/val, out/ssd-int8.xml" in evaluated["stdout"]
    # The IR carries the export's COCO ids, which name the classes of a VOC folder's results.
    with open(deployment / "out" / "ssd-int8-eval-val-detections.json") as stream:
        assert sorted({row["category_id"] for row in json.load(stream)}) == CATEGORY_IDS
    assert "4 images, 12 detections, 0 skipped" in detected["stdout"]
    with open(deployment / "out" / "detect" / "results.json") as stream:
        results = json.load(stream)
    assert results["category_ids"] == CATEGORY_IDS
    assert sorted({d["category_id"] for e in results["images"] for d in e["detections"]}) \
        == CATEGORY_IDS
    assert [line.split(": batch")[1].split()[0] for line in timed["stdout"].splitlines()[1:]] \
        == ["1", "4"]
    # COCO ids from Python and from zoo eval (no --data-root needed): the same AP.
    ap = float(re.search(r"COCO AP (\S+)", scored["stdout"]).group(1))
    python_ap = float(done["python"][1].split("AP ")[-1])
    assert 0.1 < python_ap < 0.99 and python_ap == pytest.approx(ap, abs=1e-4)
    with open(deployment / "out" / "ssd-eval-val.json") as stream:
        assert json.load(stream)["coco"]["AP"] == pytest.approx(python_ap, abs=1e-4)
    with open(deployment / "out" / "python-val.json") as stream:
        assert sorted({row["category_id"] for row in json.load(stream)}) == CATEGORY_IDS
    # The README's ONNX example prints its detections and draws them.
    assert done["python"][0].split()[0] in NAMES
    assert (deployment / "output" / "detections-onnx.png").stat().st_size > 0
    # What needs MXNet says so in one line.
    for run in rest:
        assert run["status"] == 1 and run["stderr"].count("\n") == 1, run["stderr"][-2000:]
        assert "needs MXNet, which is not installed here" in run["stderr"]
