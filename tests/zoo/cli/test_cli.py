"""The ``zoo`` command line: every command's --help, --version, flags refused while parsing,
one-line user errors, the tools/ shells, and train -> eval -> demo -> quantize -> export run
through ``python -m zoo`` from another folder."""
import argparse
import ast
import dataclasses
import json
import os
import re
import shlex
import subprocess
import sys

import pytest
import yaml

import zoo
from zoo import artifact
from zoo.cli import COMMANDS, build_parser, command_module, main
from zoo.data import embedded
from zoo.architectures import ssd
from zoo.jobs.quickstart import python_line, trained_prefix

from factories import ROOT
ENV = dict(os.environ, PYTHONPATH=ROOT, OMP_NUM_THREADS="1")


def zoo_run(*argv, cwd=ROOT):
    return subprocess.run([sys.executable, "-m", "zoo", *argv], cwd=str(cwd), env=ENV,
                          capture_output=True, text=True, timeout=600)


CHANGED_DEFAULTS = {"nms_threshold": 0.9, "nms_topk": 5, "variances": [0.3, 0.3, 0.5, 0.5],
                    "mean_pixels": [0.0, 0.0, 0.0]}
"""SSD defaults unlike the schema's, none of which the trained config sets."""
CHANGE_DEFAULTS = (
    "import types, zoo.architectures.ssd as ssd; fields = ssd.SCHEMA.fields; "
    "ssd.SCHEMA.fields = types.MappingProxyType(dict(fields, **{name: fields[name]."
    "with_default(value) for name, value in %r.items()}))" % (CHANGED_DEFAULTS,))
"""Python code that changes those defaults in the config code (zoo/schema.py Fields)."""


def zoo_run_changed_defaults(*argv, cwd):
    """``zoo_run`` in a process whose config code has :data:`CHANGED_DEFAULTS`."""
    code = CHANGE_DEFAULTS + "; import sys; from zoo.cli import main; sys.exit(main(sys.argv[1:]))"
    return subprocess.run([sys.executable, "-c", code, *argv], cwd=str(cwd), env=ENV,
                          capture_output=True, text=True, timeout=600)


def command_parser(name):
    parser = build_parser(name)
    return parser._subparsers._group_actions[0].choices[name]


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_every_commands_help_lists_its_flags(name, capsys):
    with pytest.raises(SystemExit) as exit_:
        main([name, "--help"])
    assert exit_.value.code == 0
    text = capsys.readouterr().out
    assert text.startswith("usage: zoo %s" % name)
    flags = [flag for action in command_parser(name)._actions if action.help != "==SUPPRESS=="
             for flag in action.option_strings]
    assert "--help" in flags
    for flag in flags:
        assert flag in text, flag


def help_of(argv, capsys):
    """What ``zoo ARGV --help`` prints."""
    with pytest.raises(SystemExit) as exit_:
        main(argv + ["--help"])
    assert exit_.value.code == 0
    return capsys.readouterr().out


@pytest.mark.parametrize("argv", [[]] + [[name] for name in sorted(COMMANDS)],
                         ids=lambda argv: " ".join(["zoo"] + argv))
def test_no_help_shows_rst_markup(argv, capsys):
    """--help is plain text: no reStructuredText literal (``zoo``) or role (:mod:`x`)."""
    text = help_of(argv, capsys)
    assert "``" not in text and not re.search(r":(?:mod|class|func|meth|attr|data):`", text)


def test_helps_name_the_prefix_make_demo_writes(capsys):
    """zoo detect's first example, and those of demo, eval and export, open the artifact
    ``make demo`` writes (the Makefile's quickstart --output-dir), not another name."""
    with open(os.path.join(ROOT, "Makefile"), encoding="utf-8") as handle:
        output_dir = re.search(r"quickstart --output-dir (\S+)", handle.read()).group(1)
    prefix = trained_prefix(output_dir)
    examples = help_of(["detect"], capsys).split("Examples:\n", 1)[1].splitlines()
    assert examples[0].split()[:4] == ["zoo", "detect", "--checkpoint", prefix]
    for name in ("demo", "eval", "export"):
        named = re.findall(r"--checkpoint (output/train/\S+)", help_of([name], capsys))
        assert named and set(named) == {prefix}, name


def test_help_shows_true_defaults(capsys):
    with pytest.raises(SystemExit):
        main(["train", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    # the batch is chosen at run time: its help says how, not a number or None
    assert "images per step (default: the most whose estimated memory fits" in text
    assert "(default: 3)" in text and "(default: None)" not in text
    assert "--train-set" not in text  # the old name still parses, unlisted


WITHOUT_OPTIONS = {"check"}
"""Commands whose job takes no options dataclass: their flags have nothing to follow."""


def options_class(name):
    """The options dataclass command ``name``'s module builds its job from."""
    found = {value for value in vars(command_module(name)).values()
             if isinstance(value, type) and dataclasses.is_dataclass(value)
             and value.__name__.endswith("Options")}
    assert len(found) == 1, (name, found)
    return found.pop()


def changed(value):
    """A value of ``value``'s kind unlike it (None: a string)."""
    if isinstance(value, bool):
        return not value
    if isinstance(value, (int, float)):
        return value + 7
    if isinstance(value, tuple):
        return value + ("changed",)
    return (value or "") + "-changed"


@pytest.mark.parametrize("name", sorted(set(COMMANDS) - WITHOUT_OPTIONS - {
    name for name in COMMANDS if name.startswith("benchmark")}))
def test_flag_defaults_are_the_options_defaults(name, monkeypatch):
    """Every flag of a field of the command's options dataclass takes its default from that
    field: with the field's default changed, the flag's follows. A switch's default is the
    field's (its action fixes which way it turns)."""
    options = options_class(name)
    fields = {field.name: field for field in dataclasses.fields(options)}
    defaults = {}
    for field in fields.values():
        if field.default_factory is not dataclasses.MISSING:
            defaults[field.name] = field.default_factory()
        elif field.default is not dataclasses.MISSING:
            defaults[field.name] = changed(field.default)
            monkeypatch.setattr(options, field.name, defaults[field.name])
    actions = [action for action in command_parser(name)._actions
               if action.dest in defaults and action.default != argparse.SUPPRESS]
    assert actions
    for action in actions:
        expected = defaults[action.dest]
        if isinstance(action.const, bool) and not action.nargs:
            expected = fields[action.dest].default
        default = tuple(action.default) if isinstance(action.default, list) else action.default
        if isinstance(default, str) and isinstance(expected, tuple):
            default = action.type(default)  # a tuple shown as typed (zoo.flags.add_flag)
        assert default == expected, (action.option_strings, action.default, expected)


def test_version_and_the_command_table(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["--version"])
    assert exit_.value.code == 0 and capsys.readouterr().out == "zoo %s\n" % zoo.__version__
    done = zoo_run("--help")
    assert done.returncode == 0
    for name in COMMANDS:
        assert name in done.stdout


BAD_FLAGS = [("--batch-size", "0"), ("--lr", "nan"), ("--lr", "inf"), ("--lr-steps", "abc"),
             ("--val-interval", "0"), ("--data-threads", "-1"),
             ("--epochs", "0"), ("--momentum", "1.5"), ("--ctx", "gpu"), ("--network", "nope")]


@pytest.mark.parametrize("flag, value", BAD_FLAGS)
def test_bad_values_are_usage_errors_naming_the_flag(flag, value, capsys):
    argv = ["train", "--network", "ssd_mobilenetv2", flag, value]
    with pytest.raises(SystemExit) as exit_:
        main(argv)
    assert exit_.value.code == 2
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert last.startswith("zoo train: error: argument %s: must be" % flag), last
    assert repr(value) in last


def test_comma_lists_and_old_names_parse_once(tmp_path):
    args = build_parser("train").parse_args(
        ["train", "--network", "ssd_mobilenetv2", "--lr-steps", "4, 6.5", "--val-set", "",
         "--train-set", "trainval"])
    assert args.lr_steps == (4.0, 6.5) and args.val_split == "" and args.train_split == "trainval"
    args = build_parser("quantize").parse_args(
        ["quantize", "--checkpoint", "x", "--data-root", str(tmp_path), "--exclude", "a,b"])
    assert args.exclude == ("a", "b") and args.dataset == "voc"
    # --data-root is checked when the dataset is opened: a COCO split may name its files
    assert build_parser("eval").parse_args(["eval", "--checkpoint", "x"]).data_root is None


def test_user_errors_are_one_line_and_exit_1(tmp_path, capsys):
    assert main(["eval", "--checkpoint", str(tmp_path / "none"), "--data-root",
                 str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert err.startswith("zoo eval: error: ") and err.count("\n") == 1
    assert str(tmp_path / "none") in err
    assert main(["prepare-data", "--format", "coco", "--output", str(tmp_path / "x")]) == 1
    assert capsys.readouterr().err == "zoo prepare-data: error: format coco needs annotations\n"


def test_tools_are_shells_over_the_cli():
    for name in sorted(os.listdir(os.path.join(ROOT, "tools"))):
        if not name.endswith(".py"):
            continue
        with open(os.path.join(ROOT, "tools", name)) as stream:
            tree = ast.parse(stream.read())
        defined = [node.name for node in ast.walk(tree)
                   if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))]
        assert not defined, "tools/%s defines %s" % (name, ", ".join(defined))
    done = subprocess.run([sys.executable, os.path.join(ROOT, "tools", "eval.py"), "--help"],
                          env=ENV, capture_output=True, text=True)
    assert done.returncode == 0 and done.stdout.startswith("usage: zoo eval")


HELP_RUNNER = """import io, json, runpy, sys
from contextlib import redirect_stdout
found = []
for argv in %r:
    sys.argv = list(argv)
    out = io.StringIO()
    try:
        with redirect_stdout(out):
            if sys.argv[0] == "zoo":
                runpy.run_module("zoo", run_name="__main__", alter_sys=True)
            else:
                runpy.run_path(sys.argv[0], run_name="__main__")
        code = None
    except SystemExit as exit_:
        code = exit_.code
    found.append([argv, code, out.getvalue()[:200], "mxnet" in sys.modules])
    if "mxnet" in sys.modules:
        break
print(json.dumps(found))
"""
"""Runs each ``argv`` in turn (``zoo`` as ``python -m zoo``, else a script) in one process and
says after each whether MXNet has been imported, stopping at the first that imports it (the
later ones could no longer tell): one interpreter for all, not one for each."""
TOOLS = sorted(name for name in os.listdir(os.path.join(ROOT, "tools")) if name.endswith(".py"))
HELPS = ([["zoo", "--help"]] + [["zoo", name, "--help"] for name in COMMANDS]
         + [[os.path.join(ROOT, "tools", name), "--help"] for name in TOOLS])


def test_every_help_loads_no_mxnet():
    """Every --help, of the command line and of the tools/ scripts, builds its parser without
    MXNet, which takes seconds to load: a command imports its job when it runs it."""
    done = subprocess.run([sys.executable, "-c", HELP_RUNNER % (HELPS,)], env=ENV,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    found = json.loads(done.stdout.splitlines()[-1])
    assert [argv for argv, _, _, mxnet in found if mxnet] == []
    assert len(found) == len(HELPS)
    for argv, code, out, _ in found:
        assert code in (0, None) and out.startswith("usage: "), (argv, code, out)


@pytest.mark.slow  # 45 s: in `make test-slow`, to keep `make test` within its 12 minutes
def test_train_eval_demo_quantize_export_from_other_folders(shapes192, tmp_path, monkeypatch):
    """The whole path through ``python -m zoo``: trained in one folder from a user's YAML
    (by relative path), then used from another folder once the YAML is gone, and once
    defaults in the config code have changed: the same detections, the trained config."""
    work, elsewhere = tmp_path / "work", tmp_path / "elsewhere"
    (work / "myconfigs").mkdir(parents=True)
    elsewhere.mkdir()
    os.symlink(shapes192, str(elsewhere / "shapes"))
    config = dict(zoo.get_config("ssd_mobilenetv2"), name="tiny")
    (work / "myconfigs" / "tiny.yaml").write_text(yaml.safe_dump(config))
    done = zoo_run("train", "--network", "myconfigs/tiny.yaml", "--dataset", "voc",
                   "--data-root", shapes192, "--data-shape", "192", "--batch-size", "4",
                   "--epochs", "1", "--output-dir", "run", "--no-progress",
                   "--data-threads", "2", cwd=work)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "checkpoints and log in %s" % (work / "run") in done.stdout
    assert artifact.epochs(str(work / "run" / "tiny")) == [1]
    # It starts by saying what it trains, and ends naming the artifact and how to use it.
    assert re.search(r"training tiny: 8 images of voc:%s/train, 4 classes \(%s\), [\d,]+ "
                     r"parameters, batch 4, lr 0.00125 \(the ssd recipe's 0.005 at batch 16, "
                     r"scaled linearly to batch 4; --lr keeps one\), 1 epochs, fp32, "
                     r"output run/tiny$" % (
                         re.escape(shapes192), ", ".join(embedded.CLASSES)),
                     done.stderr, re.MULTILINE), done.stderr[-2000:]
    footer = done.stdout.strip().splitlines()[-1]
    assert footer.startswith("artifact run/tiny (best validated epoch 1); evaluate it with: ")
    printed = shlex.split(footer.split("evaluate it with: ")[1])
    assert printed[:2] == ["zoo", "eval"]
    assert zoo_run(*printed[1:], "--no-progress", cwd=work).returncode == 0
    os.remove(str(work / "myconfigs" / "tiny.yaml"))
    prefix = "../work/run/tiny"
    done = zoo_run("eval", "--checkpoint", prefix, "--data-root", "shapes", "--no-progress",
                   cwd=elsewhere)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "4 images of shapes/val, epoch 1" in done.stdout and "COCO AP" in done.stdout
    assert json.loads((work / "run" / "tiny-eval-val.json").read_text())["images"] == 4
    demo = ("demo", "--checkpoint", prefix, "--image", "shapes/JPEGImages/000008.jpg",
            "--threshold", "0", "--output")
    done = zoo_run(*demo, "pictures/demo.png", cwd=elsewhere)
    assert done.returncode == 0, done.stderr[-2000:]
    assert (elsewhere / "pictures" / "demo.png").read_bytes()[:4] == b"\x89PNG"
    trained = artifact.load(str(work / "run" / "tiny")).meta["config"]
    # From here on the config code's defaults differ, here and in the subprocesses: a model
    # built afresh from the same YAML gets them, the artifact keeps what it was trained with.
    monkeypatch.setattr(ssd.SCHEMA, "fields", ssd.SCHEMA.fields)  # restored after the test
    exec(CHANGE_DEFAULTS, {})
    fresh = zoo.build_model(config, data_shape=192).config
    loaded = artifact.load(str(work / "run" / "tiny")).model.config
    for name, value in CHANGED_DEFAULTS.items():
        assert fresh[name] == value != trained[name] == loaded[name], name
    done = zoo_run_changed_defaults("eval", "--checkpoint", prefix, "--data-root", "shapes",
                                    "--no-progress", "--output", "changed.json", cwd=elsewhere)
    assert done.returncode == 0, done.stderr[-2000:]
    scores = json.loads((work / "run" / "tiny-eval-val.json").read_text())
    assert json.loads((elsewhere / "changed.json").read_text())["voc"] == scores["voc"]
    detections = (work / "run" / "tiny-eval-val-detections.json").read_text()
    assert len(json.loads(detections)) > 0
    assert (elsewhere / "changed-detections.json").read_text() == detections
    done = zoo_run_changed_defaults(*demo, "pictures/changed.png", cwd=elsewhere)
    assert done.returncode == 0, done.stderr[-2000:]
    assert ((elsewhere / "pictures" / "changed.png").read_bytes()
            == (elsewhere / "pictures" / "demo.png").read_bytes())
    # The line `zoo quickstart` ends with runs as printed.
    monkeypatch.chdir(elsewhere)
    line = python_line(str(work / "run" / "tiny"), "shapes/JPEGImages/000008.jpg")
    # A path outside the working folder is absolute, one inside it relative.
    assert '("%s")("shapes/JPEGImages/000008.jpg")' % (work / "run" / "tiny") in line
    done = subprocess.run(line, shell=True, env=ENV, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    done = zoo_run_changed_defaults("quantize", "--checkpoint", prefix, "--data-root", "shapes",
                                    "--batch-size", "4", "--calib-batches", "1", "--output",
                                    "int8/tiny", cwd=elsewhere)
    assert done.returncode == 0, done.stderr[-2000:]
    assert artifact.load(str(elsewhere / "int8" / "tiny")).is_int8
    done = zoo_run_changed_defaults("export", "--checkpoint", "int8/tiny", "--output",
                                    "deploy/int8", cwd=elsewhere)
    assert done.returncode == 0, done.stderr[-2000:]
    assert artifact.load(str(elsewhere / "deploy" / "int8")).is_int8
    done = zoo_run_changed_defaults("export", "--checkpoint", prefix, "--no-fuse", "--output",
                                    "deploy/gpu", cwd=elsewhere)
    assert done.returncode == 0 and not artifact.load(str(elsewhere / "deploy" / "gpu")).is_int8
    for written in ("int8/tiny", "deploy/int8", "deploy/gpu"):
        stored = artifact.load(str(elsewhere / written)).meta["config"]
        assert {name: stored[name] for name in CHANGED_DEFAULTS} == {
            name: trained[name] for name in CHANGED_DEFAULTS}, written
    done = zoo_run("export", "--checkpoint", "int8/tiny", "--no-fuse", "--output", "x",
                   cwd=elsewhere)
    assert done.returncode == 1 and done.stderr.startswith("zoo export: error: ")
    assert done.stderr.count("\n") == 1 and "MKL-DNN" in done.stderr


@pytest.mark.parametrize("found, coco, said, coco_said, warned", [
    (0.9645, 0.8426, "inside", "inside", []),
    (0.80, 0.8426, "BELOW", "inside", ["mAP"]),
    (0.995, 0.8426, "ABOVE", "inside", ["mAP"]),
    (0.9700, 0.95, "inside", "ABOVE", ["COCO AP"]),
    (0.9379, 0.8073, "BELOW", "inside", ["mAP"])])
def test_make_demo_says_whether_its_figures_lie_in_their_bands(found, coco, said, coco_said,
                                                               warned, monkeypatch, capsys):
    """``zoo quickstart``'s own line, the job replaced by its result (the whole job runs in
    ``make test-accuracy``): the bands of the ``ssd`` recipe, VOC07 mAP and COCO AP, and a
    warning only outside one (the healthy figures, seed 0's, stay silent; the last row is the
    run whose loss was scaled by 4)."""
    from zoo.cli import quickstart as command
    from zoo.jobs.quickstart import QuickstartResult
    from zoo.jobs.recipes import SSD
    result = QuickstartResult(train_dir="t", results_path="r", curves="c", picture="p",
                              voc07_map=found, coco_ap=coco, python_line="x", onnx_path="o",
                              onnx_parity="parity", onnx_python_line="y")
    monkeypatch.setattr(command, "quickstart", lambda options: result)
    assert main(["quickstart", "--no-progress"]) == 0
    out, err = capsys.readouterr()
    assert "held-out VOC07 mAP %.4f: %s its band %.2f-%.2f" % (found, said, SSD.band.low,
                                                              SSD.band.high) in out
    assert "COCO AP %.4f: %s its band %.2f-%.2f" % (coco, coco_said, SSD.coco_band.low,
                                                   SSD.coco_band.high) in out
    assert [metric for metric in ("mAP", "COCO AP") if "held-out %s " % metric in err] == warned
