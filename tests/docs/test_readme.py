"""The README's examples run as written, the way the page says to run them: its shell blocks
by bash in a stand-in of the checkout's folder after the Install block's activation of
``.venv`` (``python`` and ``zoo`` there are this interpreter and its command line, on this
checkout), its Python ones as ``python FILE`` (the "Three uses" one from another folder); the
set-up the page says they need first (``make demo``) comes before them; the model table is the
registry's."""
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
from zoo.data import embedded
from zoo.jobs.quickstart import trained_prefix

from factories import ROOT
SECTION = "## Use a trained detector"


def demo_output_dir():
    """The folder ``make demo`` writes, from the Makefile's ``demo`` recipe."""
    with open(os.path.join(ROOT, "Makefile"), encoding="utf-8") as handle:
        found = re.search(r"^demo:.*\n\t.* quickstart --output-dir (\S+)$", handle.read(), re.M)
    assert found, "the Makefile's demo target runs no zoo quickstart --output-dir"
    return found.group(1)


PREFIX = trained_prefix(demo_output_dir())
IMAGE = os.path.join(embedded.default_root(demo_output_dir()), "JPEGImages", "001500.jpg")
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


def test_use_a_trained_detector_example_runs(tmp_path):
    """The block runs as the page says: after ``make demo`` (its artifact and image), as
    ``python FILE`` in the checkout's folder, which the page names as where it runs."""
    code = section_code(SECTION)
    assert 'zoo.open_detector("%s")' % PREFIX in code and IMAGE in code
    section = readme().split(SECTION + "\n", 1)[1].split("\n## ", 1)[0]
    assert "After `make demo`, in the checkout's folder" in section
    work = shell_folder(tmp_path)
    old = os.getcwd()
    os.chdir(str(work))
    try:
        write_demo_files()
    finally:
        os.chdir(old)
    (tmp_path / "example.py").write_text(code)
    done = run_shell("python %s" % (tmp_path / "example.py"), tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.splitlines()
    assert lines and all(line.split()[0] in CLASSES for line in lines), done.stdout
    assert (work / "output" / "detections.png").stat().st_size > 0


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


def marked_block(name, marker=USES):
    """The code block right after the README's ``<!-- three-uses: NAME -->`` marker (or
    ``marker``'s): ``(language, code)``."""
    text = readme()
    assert marker % name in text, "README.md has no %r marker" % (marker % name)
    found = re.match(r"\n```(\w+)\n(.*?)```", text.split(marker % name, 1)[1], re.S)
    assert found, "no code block right after %r" % (marker % name)
    return found.group(1), found.group(2)


def readme():
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as handle:
        return handle.read()


def activation():
    """The Install block's line that activates ``.venv``, which every later shell block of
    the page runs after."""
    language, code = marked_block("install", "<!-- %s -->")
    assert language == "sh"
    lines = [line.split("#")[0].strip() for line in code.splitlines()]
    sourced = [line for line in lines if line in ("source .venv/bin/activate",
                                                  ". .venv/bin/activate")]
    assert sourced, "the Install block activates no .venv: python and zoo are not its"
    assert lines.index(sourced[0]) > lines.index("make install")
    return sourced[0]


def shell_folder(tmp_path):
    """``tmp_path/work``, standing in for the checkout's folder after ``make install``: its
    ``tools/``, Makefile and packaging files, and a ``.venv`` whose ``python`` and ``zoo``
    are this interpreter and its command line on this checkout."""
    work = tmp_path / "work"
    venv = work / ".venv" / "bin"
    if venv.exists():
        return work
    venv.mkdir(parents=True)
    for name in ("tools", "Makefile", "setup.cfg", "pyproject.toml"):
        os.symlink(os.path.join(ROOT, name), str(work / name))
    path = os.pathsep.join(filter(None, [ROOT, os.environ.get("PYTHONPATH")]))
    for name, command in (("python", [sys.executable]), ("zoo", [sys.executable, "-m", "zoo"])):
        shim = venv / name
        shim.write_text("#!/bin/sh\nPYTHONPATH=%s exec %s \"$@\"\n" % (path, " ".join(command)))
        shim.chmod(shim.stat().st_mode | stat.S_IXUSR)
    (venv / "activate").write_text('PATH="%s:$PATH"; export PATH\n' % venv)
    return work


def run_shell(code, tmp_path, cwd=None):
    """``code`` run by bash (``set -e``) as the page says: in the checkout's folder
    (:func:`shell_folder`, or ``cwd``), after the Install block's activation of ``.venv``.
    Neither ``python`` nor ``zoo`` of this environment is on PATH otherwise."""
    work = shell_folder(tmp_path)
    setup = "cd %s\n%s\ncd %s\n" % (work, activation(), cwd or work)
    env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    env["PATH"] = os.pathsep.join(
        folder for folder in env["PATH"].split(os.pathsep)
        if not os.path.exists(os.path.join(folder, "zoo"))
        and os.path.realpath(os.path.join(folder, "python")) != os.path.realpath(sys.executable))
    return subprocess.run(["bash", "-e", "-c", setup + code], cwd=str(work), env=env,
                          capture_output=True, text=True, timeout=600)


def test_install_block_runs_as_written(tmp_path):
    """make install (dry-run here: -n), the activation, zoo --help."""
    language, code = marked_block("install", "<!-- %s -->")
    assert "make install" in code
    done = run_shell(code.replace("make install", "make -n install"), tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "usage: zoo [-h] [--version] COMMAND" in done.stdout


def blocks_in_order():
    """``(offset, language, code)`` of every fenced block of the README, in page order."""
    return [(found.start(), found.group(1), found.group(2))
            for found in re.finditer(r"^```(\w*)\n(.*?)^```", readme(), re.S | re.M)]


def test_blocks_that_read_make_demos_output_come_after_it():
    """A reader meets ``make demo`` (Quick start) before any block that reads what it
    writes, and the contents list the sections in page order."""
    text = readme()
    written = demo_output_dir() + "/"
    blocks = blocks_in_order()
    demo = [offset for offset, language, code in blocks
            if language == "sh" and re.search(r"^make demo\b", code, re.M)]
    assert demo, "no block runs make demo"
    readers = [(offset, code) for offset, language, code in blocks
               if written in code and offset != demo[0]]
    assert readers
    for offset, code in readers:
        assert offset > demo[0], "a block reading %s comes before make demo: %s" % (
            written, code.splitlines()[0])
    sections = re.findall(r"^## (.+)$", text, re.M)
    contents = re.findall(r"\[([^]]+)\]\(#[^)]+\)", text.split("**Contents:**", 1)[1]
                          .split("\n\n", 1)[0])
    assert contents == sections


def test_readme_model_table_is_the_registry():
    """The table near the top: each registered model's architecture, backbone, default
    input and parameters as built; every speed figure one of BENCHMARKS.md's results."""
    table = readme().split("<!-- models:", 1)[1].split("\n\n", 1)[0]
    rows = [[cell.strip() for cell in line.strip("|").split("|")]
            for line in table.splitlines()[3:]]
    assert [row[0] for row in rows] == ["`%s`" % name for name in zoo.list_models()]
    with open(os.path.join(ROOT, "BENCHMARKS.md"), encoding="utf-8") as handle:
        results = handle.read().split("## Results at a glance", 1)[1].split("\n## ", 1)[0]
    for name, arch, backbone, side, params, speed in rows:
        model = zoo.get_model(name.strip("`"))
        assert (arch, backbone) == (model.config["arch"], model.config["backbone"]), name
        assert side == "x".join(str(n) for n in model.input_shapes()["data"][2:]), name
        assert params == "{:,}".format(model.num_params()), name
        for figure in re.findall(r"\d+\.\d+ (?:img/s|s)\b", speed):
            assert figure in results, (name, figure)


def test_readme_shows_detections_before_install():
    """A picture of detections near the top: a file of the checkout, before Install."""
    top = readme().split("\n## Install\n", 1)[0]
    pictures = re.findall(r"!\[[^]]*\]\(([^)]+\.png)\)", top)
    assert pictures and os.path.isfile(os.path.join(ROOT, pictures[0]))


FROM_CODE_CHECKS = """
assert set(arg_params) == set(model.param_shapes()[0])
outputs = graph.infer_shape(**model.input_shapes())[1]
assert len(outputs) == 1 and outputs[0][0] == 1 and outputs[0][2] == 6
"""
"""Appended to the "from code" block: what it made is what it says."""


def test_three_uses_from_code_prints_what_the_readme_says(tmp_path):
    """The Python of "Three uses" runs as ``python FILE`` from a folder other than the
    checkout's, and each ``print(...)  # TEXT`` prints TEXT."""
    language, code = marked_block("python")
    assert language == "python" and 'zoo.get_model("ssd_resnet101")' in code
    said = re.findall(r"^print\(.*\)  # (.*)$", code, re.M)
    assert said, "the block shows no printed line"
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "example.py").write_text(code + FROM_CODE_CHECKS)
    done = run_shell("python example.py", tmp_path, cwd=elsewhere)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.splitlines() == said


def test_three_uses_tools_scripts_train_and_evaluate(shapes, tmp_path):
    """The tools/ block runs as written in a folder where ``make demo`` left output/shapes
    and ``tools/`` is the checkout's, its sizes made small (:data:`USES_SMALL`)."""
    language, code = marked_block("tools")
    assert language == "sh" and code.startswith("python tools/train.py ")
    for large, small in USES_SMALL.items():
        assert large in code, "the tools/ block lost %r: update USES_SMALL" % large
        code = code.replace(large, small)
    work = shell_folder(tmp_path)
    (work / "output").mkdir()
    os.symlink(shapes, str(work / "output" / "shapes"))
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
    configs = shell_folder(tmp_path) / "my_configs"
    configs.mkdir()
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
