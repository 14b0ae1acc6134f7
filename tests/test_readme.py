"""The README's "Use a trained detector" example runs as written."""
import contextlib
import io
import os
import re
import subprocess
import sys

import cv2
import numpy as np

import zoo
from zoo import artifact

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SECTION = "## Use a trained detector"
PREFIX = os.path.join("output", "train", "ssd_mobilenetv2_stride8")
IMAGE = os.path.join("output", "shapes", "JPEGImages", "001500.jpg")
CLASSES = ["circle", "square", "triangle", "star"]


def section_code(title):
    """The first python code block of the README section headed ``title``."""
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as handle:
        text = handle.read()
    assert title + "\n" in text, "the README has no section %r" % title
    section = text.split(title + "\n", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```python\n(.*?)```", section, re.S)
    assert blocks, "no python example in %r" % title
    return blocks[0]


def write_demo_files():
    """What ``make demo`` leaves behind, in the current folder: a small trained-looking
    artifact (its class scores biased so that boxes clear the threshold) and an image."""
    model = zoo.get_model("ssd_mobilenetv2_stride8", data_shape=128, num_classes=4,
                          class_names=CLASSES)
    arg_params, _ = model.init_params(seed=0)
    for name, bias in arg_params.items():
        if name.endswith("_cls_bias"):
            bias[:] = np.where(np.arange(bias.shape[0]) % (len(CLASSES) + 1) == 1, 8.0, 0.0)
    os.makedirs(os.path.dirname(PREFIX))
    artifact.export(model, PREFIX)
    os.makedirs(os.path.dirname(IMAGE))
    image = np.random.RandomState(0).randint(0, 256, (120, 160, 3), dtype=np.uint8)
    assert cv2.imwrite(IMAGE, image)


def test_use_a_trained_detector_example_runs(tmp_path, monkeypatch):
    code = section_code(SECTION)
    assert 'zoo.load_detector("%s")' % PREFIX in code and IMAGE in code
    monkeypatch.chdir(tmp_path)
    write_demo_files()
    namespace = {}
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        exec(compile(code, "README.md: " + SECTION, "exec"), namespace)
    found = namespace["found"]
    assert isinstance(found, zoo.Detections) and len(found) > 0
    lines = printed.getvalue().splitlines()
    assert len(lines) == len(found) and lines[0].startswith(found.names[0] + " ")
    assert (tmp_path / "output" / "detections.png").stat().st_size > 0


def test_readme_config_tables_match_the_schemas():
    """Each architecture's field table in the README is its schema's, as generated."""
    from zoo.architectures import ARCHITECTURES
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as handle:
        text = handle.read()
    for arch in ARCHITECTURES.values():
        assert arch.schema.markdown() in text, arch.name


ONNX_SECTION = "## Deploy without MXNet"
ONNX_PATH = os.path.join("output", "deploy", "ssd_mobilenetv2_stride8.onnx")
NO_MXNET = "import sys\nsys.modules['mxnet'] = None  # any import of MXNet fails\n"
LOADED_NO_MXNET = ("\nassert not [name for name, module in sys.modules.items()\n"
                   "            if name.startswith('mxnet') and module is not None]\n")


def test_deploy_without_mxnet_example_runs_without_mxnet(tmp_path, monkeypatch):
    from zoo.onnx.export import export_artifact
    code = section_code(ONNX_SECTION)
    assert 'zoo.load_onnx_detector("%s")' % ONNX_PATH in code and IMAGE in code
    monkeypatch.chdir(tmp_path)
    write_demo_files()
    export_artifact(artifact.load(PREFIX), ONNX_PATH)
    script = NO_MXNET + code + LOADED_NO_MXNET
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.splitlines()
    assert lines and all(line.split()[0] in CLASSES for line in lines)
    assert (tmp_path / "output" / "detections-onnx.png").stat().st_size > 0
