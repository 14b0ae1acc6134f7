"""``zoo detect``: run an artifact (fp32, int8, on MXNet), an exported ``.onnx`` file (on
ONNX Runtime) or an OpenVINO ``.xml`` file (on OpenVINO) over files, folders, globs, list
files and videos; write a results JSON, drawn pictures and, if asked, crops per class and
text files. Deployed files need no MXNet.

Under --output: results.json (every picture's detections, with their COCO category ids for
a model trained on a COCO file; every file not detected on, and why), results.jsonl (a line
per picture as it finishes), pictures/NAME.EXT, with --crops crops/CLASS/NAME_K.EXT, with
--txt labels/NAME.txt. NAME and CLASS are the input's and the class's names made safe file
names: nothing is written outside --output. An --output that holds files already is
refused unless --exist-ok or --resume; no input is read from inside it. Ctrl-C or SIGTERM
stops after the images being detected, results.json written for those (exit 130 or 143),
and the line it ends with gives the command that continues the run: the same one with
--resume, which skips the images recorded in results.jsonl and refuses other settings.

With --ray [ADDRESS] the detecting runs on a Ray cluster (pip install -e '.[ray]'): the one at
ADDRESS, or without one a Ray started on this machine for the run; one detector per Ray actor
(--ray-workers, each on --ray-worker-cpus CPUs), every file written here as without --ray.

Examples:
    zoo detect --checkpoint output/train/ssd_mobilenetv2_stride8 photos/ --output output/detect
    zoo detect --checkpoint model.onnx 'photos/**/*.jpg' --recursive --crops --classes bird
    zoo detect --checkpoint out/ssd-int8.xml photos/ --no-pictures
    zoo detect --checkpoint output/int8/ssd --list todo.txt clip.mp4 --every 10 --txt
    zoo detect --checkpoint model.xml photos/ --output output/detect --exist-ok
    zoo detect --checkpoint model.xml photos/ --output output/detect --resume
    zoo detect --checkpoint model.onnx big_photos/ --tiles 800 --tile-overlap 0.2
    zoo detect --checkpoint model.onnx /shared/archive/ --recursive --crops --ray auto
An artifact trained on tiles (zoo train --tiles) runs in its tiles unless --tiles says
otherwise (--tiles 0: whole photos only); the first line says so.
"""
import argparse
import shlex

from zoo.errors import Interrupted
from zoo.jobs.detect import DetectOptions, Stopped, detect
from zoo.flags import add_flags
from zoo.ray.cluster import LOCAL, is_address

__all__ = ["add_arguments", "continue_command", "detect_options", "more_positionals",
           "run"]


def add_arguments(p):
    add_flags(p, DetectOptions, "checkpoint", "epoch")
    p.add_argument("inputs", nargs="*", metavar="INPUT",
                   help="image or video files, folders, globs (quote them: the zoo expands "
                        "them) or @FILE listing inputs one a line")
    add_flags(p, DetectOptions, "lists", "output", "exist_ok", "resume", "recursive", "every",
              "threshold", "max_detections", "tiles", "tile_overlap", "classes", "batch_size",
              "data_shape", "max_size", "image_format", "pictures", "crops", "txt", "strict",
              "exif", "data_threads", "progress", "ray", "ray_workers", "ray_worker_cpus")


def more_positionals(args, unknown):
    """Inputs named after a flag (``a.jpg --crops b.jpg``) join ``args.inputs``; the
    unknown flags are returned, to be refused."""
    args.inputs = list(args.inputs) + [word for word in unknown if not word.startswith("-")]
    return [word for word in unknown if word.startswith("-")]


def detect_options(args):
    """The :class:`DetectOptions` of the parsed flags. ``--ray`` takes a word after it as its
    ADDRESS (argparse's optional value): one that is no Ray address (``zoo detect --ray
    photos/``) is an input, and a Ray is started here."""
    inputs = list(args.inputs)
    if args.ray is not None and not is_address(args.ray):
        inputs, args.ray = [args.ray] + inputs, LOCAL
    return DetectOptions.from_flags(args, inputs=tuple(inputs), lists=tuple(args.lists))


def run(args):
    options = detect_options(args)
    try:
        summary = detect(options)
    except Stopped as err:
        raise Interrupted(err.signum, "%s; continue with: %s"
                          % (err, continue_command(options))) from None
    print(summary)
    return 0


def continue_command(options):
    """The command line continuing the run of ``options``: ``zoo detect`` with each flag
    (as :func:`add_arguments` declares it) whose value is not its default, ``--exist-ok``
    dropped and ``--resume`` added."""
    parser = argparse.ArgumentParser(add_help=False)
    add_arguments(parser)
    words = []
    for action in parser._actions:
        if action.dest in ("exist_ok", "resume"):
            continue
        words += flag_words(action, getattr(options, action.dest))
    return " ".join(["zoo", "detect"] + [shlex.quote(word) for word in words] + ["--resume"])


def flag_words(action, value):
    """The words giving ``value`` to argparse's ``action``: none for its default."""
    if not action.option_strings:  # the inputs
        return list(value)
    if isinstance(action.default, list):  # appended: each value after the default's
        return [word for item in value[len(action.default):]
                for word in (action.option_strings[0], item)]
    if value == action.default:
        return []
    if action.nargs == 0:  # an on/off switch
        return [action.option_strings[0]]
    if action.nargs == "?" and value == action.const:  # given without its value
        return [action.option_strings[0]]
    text = ",".join(value) if isinstance(value, tuple) else str(value)
    return [action.option_strings[0], text]
