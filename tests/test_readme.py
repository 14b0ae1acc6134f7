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


def section_code(title, document="README.md"):
    """The first python code block of the section headed ``title`` of ``document`` (a path
    from the checkout's root: the README, or a page of docs/)."""
    with open(os.path.join(ROOT, document), encoding="utf-8") as handle:
        text = handle.read()
    assert title + "\n" in text, "%s has no section %r" % (document, title)
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
    assert 'zoo.open_detector("%s")' % PREFIX in code and IMAGE in code
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
    """Each architecture's field table in docs/models.md is its schema's, as generated."""
    from zoo.architectures import ARCHITECTURES
    with open(os.path.join(ROOT, "docs", "models.md"), encoding="utf-8") as handle:
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
    code = section_code(ONNX_SECTION, os.path.join("docs", "deployment.md"))
    assert 'zoo.open_detector("%s")' % ONNX_PATH in code and IMAGE in code
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


def test_readme_command_table_is_the_command_line():
    """The README's command table lists every command of ``zoo`` and no other."""
    from zoo.cli import COMMANDS
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as handle:
        table = handle.read().split("<!-- commands:", 1)[1].split("\n\n", 1)[0]
    listed = re.findall(r"^\| `([a-z-]+)` \|", table, re.M)
    assert listed == list(COMMANDS)


def test_readme_links_name_files_that_exist():
    """Every relative link of the README and of docs/ names a file of the checkout."""
    for document in ["README.md"] + [os.path.join("docs", name)
                                     for name in sorted(os.listdir(os.path.join(ROOT, "docs")))
                                     if name.endswith(".md")]:
        with open(os.path.join(ROOT, document), encoding="utf-8") as handle:
            links = re.findall(r"\]\(([^)#:]+)(?:#[^)]*)?\)", handle.read())
        for link in links:
            path = os.path.normpath(os.path.join(ROOT, os.path.dirname(document), link))
            assert os.path.exists(path), "%s links to %s, which does not exist" % (
                document, link)
