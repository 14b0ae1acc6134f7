"""The ``zoo`` command line: ``zoo COMMAND [flags]`` or ``python -m zoo COMMAND [flags]``.

Each command is a module of this package with ``add_arguments(parser)`` and
``run(args) -> int``: ``run`` turns the flags into a job's options and calls the library
(:mod:`zoo.jobs`). Every failure a user can cause is one line on stderr, no traceback:

- a bad flag value or a missing flag: ``zoo COMMAND: error: argument --flag: ...``, exit 2;
- a bad config, dataset, artifact, deployed file or option, a file that cannot be read or
  written (disk full, no permission), a diverged training, an environment variable the zoo
  or MXNet reads set to a value that cannot be (checked before MXNet loads):
  ``zoo COMMAND: error: ...``, exit 1;
- SIGINT or SIGTERM: training stops at a batch boundary and names its last complete
  checkpoint, ``zoo detect`` after its current image with the results of those finished
  written; exit 130 (SIGINT) or 143 (SIGTERM), as a shell reports a killed command.

A bad image or annotation that ``--skip-bad`` would have skipped says so in its error line.
A warning (images skipped with ``--skip-bad``, ...) is one line too: ``zoo COMMAND: warning:
...``, without Python's file, line and source.

Anything else is a bug and keeps its traceback.
"""
import contextlib
import importlib
import importlib.util
import logging
import os
import re
import signal
import sys
import warnings

from zoo import process
from zoo.jobs import LOG_FORMAT
from zoo.cli.common import HelpFormatter, Parser

__all__ = ["COMMANDS", "HelpFormatter", "LOG_FORMAT", "Parser", "build_parser", "main", "report"]

COMMANDS = {
    # name: (module of this package, or a whole module name: the benchmarks' package,
    # found beside the zoo in its checkout, not installed: find_checkout_package), one-line
    # summary
    "train": ("train", "train a detector on a dataset, or fine-tune an artifact (--init-from)"),
    "eval": ("eval", "score an artifact on a dataset split (VOC mAP, COCO AP)"),
    "demo": ("demo", "draw an artifact's detections on an image"),
    "detect": ("detect", "run an artifact or a deployed .onnx or .xml file over files, "
                         "folders, globs, lists and videos; write results JSON, pictures, "
                         "crops"),
    "quantize": ("quantize", "quantize an artifact to int8 (calibrated on a dataset split) or "
                             "bf16"),
    "export": ("export", "write a deployable artifact from an artifact or a registered model"),
    "check": ("check", "validate model configs against their graphs and print a table"),
    "check-data": ("check_data", "census of a dataset's splits and pictures of the first "
                                 "batches the network would get, without training"),
    "prepare-data": ("prepare_data", "pack a VOC or COCO dataset into .lst/.rec/.idx files"),
    "convert": ("convert", "convert a format-1 checkpoint into a format-2 artifact"),
    "import-gluoncv": ("import_gluoncv", "import one of GluonCV's trained detectors as an "
                                         "artifact"),
    "benchmark": ("zoo_bench.cli.benchmark",
                  "inference speed of a model or artifact, fp32 and int8, optionally beside "
                  "GluonCV's"),
    "benchmark-data": ("zoo_bench.cli.benchmark_data",
                       "throughput of the SSD training data pipeline, beside GluonCV's "
                       "DataLoader"),
    "benchmark-train": ("zoo_bench.cli.benchmark_train",
                        "samples/s of the whole training step, beside GluonCV's training "
                        "recipe"),
    "benchmark-memory": ("zoo_bench.cli.benchmark_memory",
                         "peak memory and step time of training with and without memory "
                         "saving"),
    "benchmark-detector": ("zoo_bench.cli.benchmark_detector",
                           "images/s through zoo.Detector on JPEG files against pure "
                           "inference of the same graph"),
    "benchmark-calibration": ("zoo_bench.cli.benchmark_calibration",
                              "seconds per image of int8 calibration, MXNet's collector beside "
                              "the zoo's"),
    "benchmark-decode": ("zoo_bench.cli.benchmark_decode",
                         "decode time and peak memory of large JPEGs, whole beside DCT-scaled "
                         "to the network's size"),
    "benchmark-serve": ("zoo_bench.cli.benchmark_serve",
                        "requests/s and p50/p99 latency of zoo serve at 1, 4 and 16 clients, "
                        "batching on and off, beside the detector called in-process"),
    "benchmark-tiles": ("zoo_bench.cli.benchmark_tiles",
                        "COCO AP of a shapes detector on generated large photos of small "
                        "shapes, whole and in tiles"),
    "benchmark-photos": ("zoo_bench.cli.benchmark_photos",
                         "zoo detect end to end on large photos, fp32 and int8, beside "
                         "GluonCV's load_test and net(x), and where its time goes"),
    "benchmark-cluster": ("zoo_bench.cli.benchmark_cluster",
                          "photos/s of zoo detect --ray on local Ray clusters of 1 and 2 "
                          "nodes beside zoo detect on the same photos"),
    "benchmark-small-objects": ("zoo_bench.cli.benchmark_small_objects",
                                "the small-objects recipe end to end on generated bird "
                                "photos: tiles and fitted anchors beside whole photos, "
                                "held-out mAP and AP on 4000x3000 photos"),
    "benchmark-parity": ("zoo_bench.cli.benchmark_parity",
                         "the zoo's training beside GluonCV's on one network from the same "
                         "initial parameters, held-out mAP by epoch over seeds, one verdict"),
    "serve": ("serve", "serve an artifact or a deployed .onnx or .xml file over HTTP on Ray "
                       "Serve: POST /detect answers zoo detect's record of a photo"),
    "launch": ("launch", "run a command on every worker of a parameter-server cluster"),
    "plot-log": ("plot_log", "plot a training CSV log's loss and mAP curves into a PNG"),
    "quickstart": ("quickstart", "the `make demo` job: shapes dataset, train, eval, plot, draw"),
}


MODULE_ERRORS = (("zoo.artifact", "ArtifactError"), ("zoo.distributed.cluster", "ClusterError"),
                 ("zoo.engine.trainer", "TrainingError"),
                 ("zoo.gluoncv.common", "GluonCVImportError"))
"""The user errors modules define beside :mod:`zoo.errors`': (module, name)."""


def user_errors():
    """The exceptions that mean the user asked for something wrong (not a bug): reported
    in one line, no traceback. Those of :data:`MODULE_ERRORS` whose module this process has
    not imported cannot have been raised and are left out: importing them would load MXNet,
    which a deployment has none of."""
    from zoo.errors import (ConfigError, DataError, Interrupted, MissingPackage, OnnxModelError,
                            OptionsError, OutputLocked)
    loaded = tuple(getattr(sys.modules[module], name) for module, name in MODULE_ERRORS
                   if module in sys.modules)
    return (ConfigError, DataError, FileNotFoundError, OptionsError, OutputLocked,
            MissingPackage, OnnxModelError, Interrupted) + loaded

SETTINGS = (
    "MXNet's settings: every command runs MXNet on its synchronous engine "
    "(MXNET_ENGINE_TYPE=%s: about twice as fast as the threaded one for a Faster R-CNN in "
    "int8 on 2 cores, as fast for training; a process of a parameter-server cluster keeps the "
    "threaded one) with one OpenMP thread per core (OMP_NUM_THREADS=%d here), set before MXNet "
    "loads. Set either variable yourself to choose otherwise. In Python, zoo.open_detector "
    "(of an artifact), zoo.load_detector, zoo.Detector, zoo.get_model and the zoo.jobs and "
    "zoo.engine packages choose the same where they load MXNet first; import zoo alone "
    "changes nothing."
    % (process.SYNCHRONOUS_ENGINE, len(os.sched_getaffinity(0))))
"""The epilog of ``zoo --help``: what :func:`zoo.process.use_fast_settings` chooses."""


def build_parser(command=None):
    """The parser of every command; only ``command``'s flags are declared (importing one
    command's module only)."""
    from zoo.version import __version__
    parser = Parser(prog="zoo", description=help_text(__doc__.splitlines()[0]),
                    epilog=SETTINGS)
    parser.add_argument("--version", action="version", version="zoo %s" % __version__)
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name, (_, summary) in COMMANDS.items():
        if name != command:
            commands.add_parser(name, help=summary, description=summary)
            continue
        module = command_module(name)
        module.add_arguments(commands.add_parser(name, help=summary,
                                                 description=help_text(module.__doc__),
                                                 formatter_class=HelpFormatter))
    return parser


MARKUP = re.compile(r":(?:mod|class|func|meth|attr|data):`~?([^`]+)`")


def help_text(docstring):
    """A command module's docstring as ``--help`` shows it: its reStructuredText roles and
    literals as plain text (``:mod:`zoo.x``` as ``zoo.x``), line breaks kept."""
    return MARKUP.sub(r"\1", docstring).replace("``", "")


def command_module(name):
    """Command ``name``'s module: one of this package, or a benchmark's (a whole module name),
    whose package is looked for in the zoo's checkout first."""
    module = COMMANDS[name][0]
    if "." not in module:
        return importlib.import_module("%s.%s" % (__name__, module))
    find_checkout_package(module.partition(".")[0])
    return importlib.import_module(module)


BENCHMARKS = "zoo_bench"
"""The package of the ``zoo benchmark*`` commands: beside ``zoo/`` in the zoo's source
checkout, and not installed with it (the library never imports it)."""


def find_checkout_package(package):
    """Make ``package`` importable from the zoo's source checkout, beside ``zoo/``, where
    Python does not find it already: an editable install (``pip install -e .``) maps the
    installed packages only, and ``python -m zoo`` finds what is beside the zoo only when
    run from the checkout's folder. Nothing changes for an installed zoo."""
    checkout = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    if (importlib.util.find_spec(package) is None
            and os.path.isfile(os.path.join(checkout, package, "__init__.py"))):
        sys.path.append(checkout)


def not_installed(command):
    """The line refusing a benchmark command where the zoo is installed without them."""
    return ("the benchmarks are not installed with the zoo: they run from its source "
            "checkout, as python -m zoo %s ... in the checkout's folder, or as zoo %s ... "
            "after pip install -e . there" % (command, command))


def main(argv=None):
    """Run one command; returns its exit code."""
    argv = sys.argv[1:] if argv is None else list(argv)
    # The top-level parser has no flag taking a value: the first word is the command.
    command = next((word for word in argv if not word.startswith("-")), None)
    problem = environment_problem()
    if problem:
        # Before any command's module loads MXNet, which aborts on some of these.
        print("zoo%s: error: %s" % (" " + command if command in COMMANDS else "", problem),
              file=sys.stderr)
        return 1
    process.use_fast_settings()  # before a command's module loads MXNet
    try:
        return _main(argv, command)
    except ModuleNotFoundError as err:
        # A command module imports what it needs: MXNet's are refused here in one line, and
        # so are the benchmarks where only the library is installed.
        if err.name == BENCHMARKS:
            return report(command, not_installed(command), 1)
        if (err.name or "").partition(".")[0] not in TRAINING_STACK:
            raise
        return report(command, missing_training_stack(err, command), 1)


def _main(argv, command):
    parser = build_parser(command if command in COMMANDS else None)
    args, unknown = parser.parse_known_args(argv)
    if unknown and args.command in COMMANDS and hasattr(command_module(args.command),
                                                        "more_positionals"):
        # argparse fills a command's list of positionals from the first run of words only.
        unknown = command_module(args.command).more_positionals(args, unknown)
    if unknown:
        # argparse would blame the top-level parser ("zoo: error:"); the command owns them.
        parser.exit(2, "zoo %s: error: unrecognized arguments: %s\n"
                    % (args.command, " ".join(unknown)))
    logging.basicConfig(level=logging.INFO, format=LOG_FORMAT)
    try:
        with one_line_warnings(args.command):
            return command_module(args.command).run(args)
    except user_errors() as err:
        return report(args.command, one_line(err) + skip_hint(err, args),
                      getattr(err, "exit_status", 1))
    except OSError as err:
        # The file system or the network refused (disk full, no permission, ...).
        return report(args.command, one_line(err), 1)
    except KeyboardInterrupt:
        # Outside the training loop (which stops cleanly itself): nothing half-written is
        # kept, artifacts are written atomically.
        return report(args.command, "interrupted by SIGINT", 128 + signal.SIGINT)


def environment_problem():
    """The one-line error of an environment variable set to a value that cannot be (see
    :data:`zoo.process.VARIABLES`), else None."""
    from zoo.errors import OptionsError
    from zoo.process import check_environment
    try:
        check_environment()
    except OptionsError as err:
        return str(err)
    return None


TRAINING_STACK = ("mxnet", "gluoncv")
"""What a deployment installs without (``requirements/deploy.txt``): a command or a
checkpoint that needs them is refused in one line."""


def missing_training_stack(err, command):
    """The line refusing ``command`` where MXNet (or GluonCV) is not installed."""
    return ("needs %s, which is not installed here (No module named %r): install the zoo with "
            "its dependencies (pip install . in its checkout); without MXNet, zoo detect, "
            "zoo eval and zoo benchmark run deployed .onnx and .xml files"
            % ("MXNet" if err.name.startswith("mxnet") else "GluonCV", err.name))


SKIP_HINT = "; --skip-bad skips such an image with a warning"


def skip_hint(err, args):
    """:data:`SKIP_HINT` for an error ``--skip-bad`` would have skipped (marked
    ``skippable`` where it is raised, and not ``skip_hint = False``: its message names a
    better way out) on a command that has the flag unset, else ``""``."""
    unset = getattr(args, "skip_bad", None) is False
    hinted = getattr(err, "skippable", False) and getattr(err, "skip_hint", True)
    return SKIP_HINT if hinted and unset else ""


@contextlib.contextmanager
def one_line_warnings(command):
    """Warnings shown as ``zoo COMMAND: warning: MESSAGE`` on one line (the category named
    unless a UserWarning), not as Python's file, line and source line. Only the text
    changes: a recorder of warnings (``pytest.warns``) still gets each one whole."""
    from zoo.errors import HealthWarning
    default = warnings.formatwarning

    def formatted(message, category, *_):
        kind = "" if category in (UserWarning, HealthWarning) else category.__name__ + ": "
        return "zoo %s: warning: %s%s\n" % (command, kind, one_line(message))
    warnings.formatwarning = formatted
    try:
        yield
    finally:
        warnings.formatwarning = default


def report(command, message, status):
    print("zoo %s: error: %s" % (command, message), file=sys.stderr)
    return status


def one_line(err):
    """The error's message on one line, whatever line breaks a library put in it; an
    operating-system error as ``PATH: what failed``."""
    if isinstance(err, OSError) and err.strerror and err.filename is not None:
        text = "%s: %s" % (err.filename, err.strerror)
    else:
        text = str(err)
    return " ".join(text.split())
