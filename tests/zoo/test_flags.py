"""Each option declared once: every command's flags are its options class's fields (every
flag is made from the field it sets, with the field's default and help), ``zoo train``'s
fields all have their flag, the fields declare their flags (:mod:`zoo.flags`), and the
Trainer takes a run's options as they are (a :class:`TrainOptions` is its trainer's and
optimizer's options both)."""
import argparse
import dataclasses
import subprocess
import sys

import pytest

from zoo.cli import COMMANDS, build_parser, find_checkout_package
from zoo.distributed.launcher import LaunchOptions
from zoo.engine.options import OptimizerOptions, TrainerOptions
from zoo.flags import FLAG
from zoo.jobs.check_data import CheckDataOptions
from zoo.jobs.convert import ConvertOptions
from zoo.jobs.demo import DemoOptions
from zoo.jobs.detect import DetectOptions
from zoo.jobs.evaluate import EvalOptions
from zoo.jobs.export import ExportOptions
from zoo.jobs.import_gluoncv import ImportOptions
from zoo.jobs.plot_log import PlotLogOptions
from zoo.jobs.prepare_data import PrepareOptions
from zoo.jobs.quantize import QuantizeOptions
from zoo.jobs.quickstart import QuickstartOptions
from zoo.jobs.serve import ServeOptions
from zoo.jobs.train_options import TrainOptions

find_checkout_package("zoo_bench")
from zoo_bench import options as bench  # noqa: E402 (found beside the zoo in its checkout)

PYTHON_ONLY = set()
"""Fields of :class:`TrainOptions` that no ``zoo train`` flag sets (none today): a new field
either gets its flag or is named here."""


COMMAND_OPTIONS = {
    "train": TrainOptions, "eval": EvalOptions, "demo": DemoOptions, "detect": DetectOptions,
    "quantize": QuantizeOptions, "export": ExportOptions, "check": None,
    "check-data": CheckDataOptions, "prepare-data": PrepareOptions, "convert": ConvertOptions,
    "import-gluoncv": ImportOptions, "benchmark": bench.BenchmarkOptions,
    "benchmark-data": bench.DataBenchmarkOptions, "benchmark-train": bench.TrainBenchmarkOptions,
    "benchmark-memory": bench.MemoryBenchmarkOptions,
    "benchmark-detector": bench.DetectorBenchmarkOptions,
    "benchmark-calibration": bench.CalibrationBenchmarkOptions,
    "benchmark-decode": bench.DecodeBenchmarkOptions,
    "serve": ServeOptions, "benchmark-serve": bench.ServeBenchmarkOptions,
    "benchmark-tiles": bench.TilesBenchmarkOptions,
    "benchmark-photos": bench.PhotosBenchmarkOptions,
    "benchmark-cluster": bench.ClusterBenchmarkOptions,
    "benchmark-parity": bench.ParityBenchmarkOptions,
    "benchmark-small-objects": bench.SmallObjectsBenchmarkOptions, "launch": LaunchOptions,
    "plot-log": PlotLogOptions, "quickstart": QuickstartOptions}
"""The options class each command's run builds from its flags (None: a command of
positional words only)."""

def by_hand(action):
    """Not a flag of an options field by design: a positional word (inputs, a name, the
    worker command), --help, or a hidden alias of an old flag name."""
    return (not action.option_strings or action.dest == "help"
            or action.help == argparse.SUPPRESS)


def field_default(options_class, field):
    if field.default_factory is not dataclasses.MISSING:
        return field.default_factory()
    return field.default


@pytest.mark.parametrize("name", COMMANDS)
def test_every_flag_is_made_from_its_options_field(name):
    """A flag declared by hand (``add_argument`` with its own help and default) beside the
    options field it sets is an option declared twice: each flag of every command must be
    the flag its options class's field declares (:func:`zoo.flags.flag`), as generated."""
    assert name in COMMAND_OPTIONS, "a new command: name its options class in COMMAND_OPTIONS"
    options_class = COMMAND_OPTIONS[name]
    fields = {} if options_class is None else {
        f.name: f for f in dataclasses.fields(options_class) if FLAG in f.metadata}
    for action in command_parser(name)._actions:
        if by_hand(action):
            continue
        field = fields.get(action.dest)
        assert field is not None, (
            "zoo %s %s is declared by hand: declare it on the field %s.%s with "
            "zoo.flags.flag, and add it with zoo.flags.add_flags"
            % (name, "/".join(action.option_strings),
               getattr(options_class, "__name__", "<no options class>"), action.dest))
        declared = field.metadata[FLAG]
        assert action.help == declared["help"], (name, action.option_strings)
        names = declared["name"] or None
        if names is not None:
            assert action.option_strings == ([names] if isinstance(names, str)
                                             else list(names)), (name, action.option_strings)
        default = field_default(options_class, field)
        if default is dataclasses.MISSING:
            assert action.required, (name, action.option_strings)
        else:
            expected = list(default) if action.__class__.__name__ == "_AppendAction" \
                else default
            given = action.default
            if isinstance(given, str) and not isinstance(expected, str):
                given = action.type(given)  # a tuple shown as typed, parsed as argparse does
            assert given == expected, (name, action.option_strings, action.default)


def command_parser(name):
    return build_parser(name)._subparsers._group_actions[0].choices[name]


def flag_actions(name):
    """The command's flags that show in --help (hidden aliases left out), by dest."""
    return {action.dest: action for action in command_parser(name)._actions
            if action.option_strings and action.help != argparse.SUPPRESS
            and action.dest != "help"}


def test_every_train_field_has_its_flag_with_its_default():
    fields = {f.name: f for f in dataclasses.fields(TrainOptions)}
    actions = flag_actions("train")
    missing = set(fields) - set(actions) - PYTHON_ONLY
    assert not missing, "TrainOptions fields without a zoo train flag (give them one, or " \
                        "list them in PYTHON_ONLY): %s" % sorted(missing)
    for field_name in set(fields) & set(actions):
        action, field = actions[field_name], fields[field_name]
        assert action.default == field.default, (action.option_strings, action.default,
                                                  field.default)


def test_every_train_flag_sets_a_field():
    fields = {f.name for f in dataclasses.fields(TrainOptions)}
    assert set(flag_actions("train")) - fields == set()


def test_a_field_that_declares_a_flag_is_on_its_commands_parser():
    """A field declared with :func:`zoo.flags.flag` whose command forgot to add it."""
    # a field TrainOptions redeclares (batch_size: None, chosen by the job) is its own
    declared = {"train": list({f.name: f for options in (OptimizerOptions, TrainerOptions,
                                                         TrainOptions)
                               for f in dataclasses.fields(options)
                               if FLAG in f.metadata}.values()),
                "detect": [f for f in dataclasses.fields(DetectOptions) if FLAG in f.metadata]}
    for name, fields in declared.items():
        assert fields
        actions = flag_actions(name)
        for field in fields:
            assert field.name in actions, (name, field.name)
            assert actions[field.name].help == field.metadata[FLAG]["help"], (name, field.name)


def test_parsed_flags_build_the_options_back():
    """Defaults through the parser give the dataclass's defaults; given values reach their
    fields (a switch, a list, a renamed destination)."""
    parser = command_parser("train")
    assert TrainOptions.from_flags(parser.parse_args(["--network", "ssd_mobilenetv2"])) == \
        TrainOptions(network="ssd_mobilenetv2")
    args = parser.parse_args(["--network", "ssd_mobilenetv2", "--no-crop", "--lr-steps", "2,3",
                              "--optimizer", "adam", "--freeze-bn", "--dtype", "auto",
                              "--data-shape", "256", "--train-set", "trainval"])
    assert TrainOptions.from_flags(args) == TrainOptions(
        network="ssd_mobilenetv2", crop=False, lr_steps=(2.0, 3.0), optimizer="adam",
        freeze_bn=".", dtype="auto", data_shape=256, train_split="trainval")
    args = command_parser("detect").parse_args(["--checkpoint", "m.onnx", "--threshold", "0.25",
                                                "a.jpg"])
    options = DetectOptions.from_flags(args, inputs=tuple(args.inputs), lists=())
    assert (options.threshold, options.inputs) == (0.25, ("a.jpg",))


def test_train_options_are_the_trainers_and_the_optimizers():
    """One declaration of each loop option: TrainOptions has their fields, the records a
    checkpoint stores hold those alone (no data field reads as a changed optimizer setting on
    a resume)."""
    options = TrainOptions(lr=0.02, epochs=3, freeze="^conv1_")
    assert isinstance(options, TrainerOptions) and isinstance(options, OptimizerOptions)
    assert set(options.trainer_record()) == {f.name for f in dataclasses.fields(TrainerOptions)}
    assert set(options.record()) == {f.name for f in dataclasses.fields(OptimizerOptions)}
    assert options.record()["lr"] == 0.02 and options.trainer_record()["epochs"] == 3
    # What a run leaves for later checks is checked by the Trainer: dtype auto, lr None.
    assert TrainOptions(dtype="auto").lr is None
    with pytest.raises(ValueError, match="dtype auto: resolve it first"):
        TrainOptions(dtype="auto").check_trainer()


def test_train_flags_load_no_mxnet():
    """The options the parser needs are declared without MXNet (zoo.engine.options)."""
    code = ("import sys; from zoo.cli import build_parser; build_parser('train'); "
            "import zoo.engine.options, zoo.jobs.train_options; "
            "print('mxnet' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True)
    assert done.stdout.strip() == "False"
