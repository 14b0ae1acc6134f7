"""The README's examples run as written: "Three uses" (from code, with the tools/ scripts,
the config check in CI) and "Use a trained detector"."""
import contextlib
import io
import os
import re
import stat
import subprocess
import sys

import cv2
import numpy as np
import yaml

import zoo
from zoo import artifact

from factories import ROOT
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


USES = "<!-- three-uses: %s -->"
USES_SMALL = {"--data-shape 256": "--data-shape 128", "--batch-size 16": "--batch-size 4",
              "--epochs 10": "--epochs 1"}
"""What the tools/ block's test changes, and nothing else: the sizes, small."""


def marked_block(name):
    """The code block right after the README's ``<!-- three-uses: NAME -->`` marker:
    ``(language, code)``."""
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as handle:
        text = handle.read()
    assert USES % name in text, "README.md has no %r marker" % (USES % name)
    found = re.match(r"\n```(\w+)\n(.*?)```", text.split(USES % name, 1)[1], re.S)
    assert found, "no code block right after %r" % (USES % name)
    return found.group(1), found.group(2)


def run_shell(code, tmp_path):
    """``code`` run by bash (``set -e``) in ``tmp_path/work`` as a user's shell runs it, where
    ``python`` is this interpreter and ``zoo`` its command line, on this checkout."""
    shims, work = tmp_path / "bin", tmp_path / "work"
    shims.mkdir(exist_ok=True)
    work.mkdir(exist_ok=True)
    for name, command in (("python", [sys.executable]), ("zoo", [sys.executable, "-m", "zoo"])):
        shim = shims / name
        shim.write_text("#!/bin/sh\nexec %s \"$@\"\n" % " ".join(command))
        shim.chmod(shim.stat().st_mode | stat.S_IXUSR)
    env = dict(os.environ, PATH="%s:%s" % (shims, os.environ["PATH"]),
               PYTHONPATH=os.pathsep.join(filter(None, [ROOT, os.environ.get("PYTHONPATH")])))
    return subprocess.run(["bash", "-e", "-c", code], cwd=str(work), env=env,
                          capture_output=True, text=True, timeout=600)


def test_three_uses_from_code_prints_what_the_readme_says():
    """The Python of "Three uses" runs, and each ``print(...)  # TEXT`` prints TEXT."""
    language, code = marked_block("python")
    assert language == "python" and 'zoo.get_model("ssd_resnet101")' in code
    said = re.findall(r"^print\(.*\)  # (.*)$", code, re.M)
    assert said, "the block shows no printed line"
    namespace, printed = {}, io.StringIO()
    with contextlib.redirect_stdout(printed):
        exec(compile(code, "README.md: three uses", "exec"), namespace)
    assert printed.getvalue().splitlines() == said
    model = namespace["model"]
    assert set(namespace["arg_params"]) == set(model.param_shapes()[0])
    outputs = namespace["graph"].infer_shape(**model.input_shapes())[1]
    assert len(outputs) == 1 and outputs[0][0] == 1 and outputs[0][2] == 6


def test_three_uses_tools_scripts_train_and_evaluate(shapes, tmp_path):
    """The tools/ block runs as written in a folder where ``make demo`` left output/shapes
    and ``tools/`` is the checkout's, its sizes made small (:data:`USES_SMALL`)."""
    language, code = marked_block("tools")
    assert language == "sh" and code.startswith("python tools/train.py ")
    for large, small in USES_SMALL.items():
        assert large in code, "the tools/ block lost %r: update USES_SMALL" % large
        code = code.replace(large, small)
    (tmp_path / "work" / "output").mkdir(parents=True)
    os.symlink(shapes, str(tmp_path / "work" / "output" / "shapes"))
    os.symlink(os.path.join(ROOT, "tools"), str(tmp_path / "work" / "tools"))
    done = run_shell(code, tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    prefix = str(tmp_path / "work" / "output" / "tools" / "ssd_mobilenetv2_stride8")
    assert artifact.epochs(prefix) == [1]
    assert "4 images of output/shapes/val" in done.stdout and "COCO AP" in done.stdout


MY_SSD = "base: ssd_resnet101\nnum_classes: 3\n"
BAD_SSD = 'base: ssd_resnet101\nfrom_layers: [stage3_unit6_relu, res5, "", "", "", ""]\n'


def test_three_uses_config_check_in_ci(tmp_path):
    """The check commands of "Three uses" and its CI step run as written: exit 0 while every
    config holds, 1 with a FAIL line once one of the user's configs taps the wrong layer."""
    language, code = marked_block("check")
    assert language == "sh"
    configs = tmp_path / "work" / "my_configs"
    configs.mkdir(parents=True)
    (configs / "my_ssd.yaml").write_text(MY_SSD)
    lines = [line for line in code.splitlines() if line.strip()]
    assert lines
    for line in lines:
        done = run_shell(line, tmp_path)
        assert done.returncode == 0, (line, done.stderr[-3000:])
        assert re.search(r"^\d+ configs checked, 0 failed$", done.stdout, re.M), line
    language, ci = marked_block("ci")
    assert language == "yaml"
    steps = yaml.safe_load(ci)
    assert isinstance(steps, list) and len(steps) == 1 and set(steps[0]) >= {"name", "run"}
    done = run_shell(steps[0]["run"], tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert re.search(r"^my_ssd +300x300 +46,608,048 ", done.stdout, re.M), done.stdout
    (configs / "bad_ssd.yaml").write_text(BAD_SSD)
    done = run_shell(steps[0]["run"], tmp_path)
    assert done.returncode == 1, done.stderr[-3000:]
    assert done.stderr.startswith("FAIL bad_ssd: from_layers[0] = 'stage3_unit6_relu'")
    assert "2 configs checked, 1 failed" in done.stdout
