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

Examples:
    zoo detect --checkpoint output/train/ssd_mobilenetv2 photos/ --output output/detect
    zoo detect --checkpoint model.onnx 'photos/**/*.jpg' --recursive --crops --classes bird
    zoo detect --checkpoint out/ssd-int8.xml photos/ --no-pictures
    zoo detect --checkpoint output/int8/ssd --list todo.txt clip.mp4 --every 10 --txt
    zoo detect --checkpoint model.xml photos/ --output output/detect --exist-ok
    zoo detect --checkpoint model.xml photos/ --output output/detect --resume
    zoo detect --checkpoint model.onnx big_photos/ --tiles 800 --tile-overlap 0.2
"""
import argparse
import shlex

from zoo.errors import Interrupted
from zoo.jobs.detect import FORMATS, DetectOptions, Stopped, detect
from zoo.inference.tiles import DEFAULT_OVERLAP, MIN_TILE
from zoo.cli.common import (add_checkpoint_flags, add_data_threads_flag,
                            add_exif_flag, add_input_size_flags, add_progress_flag, comma_list,
                            float_in, positive_int)
from zoo.flags import add_flags

__all__ = ["add_arguments", "continue_command", "detect_options", "more_positionals",
           "run"]


def add_arguments(p):
    add_checkpoint_flags(p, "artifact prefix (fp32, or int8 or bf16 from `zoo quantize`), or "
                            "a PREFIX.onnx or PREFIX.xml (OpenVINO) file from `zoo export`",
                         DetectOptions.epoch)
    p.add_argument("inputs", nargs="*", metavar="INPUT",
                   help="image or video files, folders, globs (quote them: the zoo expands "
                        "them) or @FILE listing inputs one a line")
    # a list: "append" appends to (a copy of) its default
    p.add_argument("--list", dest="lists", action="append", default=list(DetectOptions.lists),
                   metavar="FILE",
                   help="text file listing inputs, one a line (repeatable)")
    p.add_argument("--output", default=DetectOptions.output,
                   help="folder to write into; refused if it holds files, unless --exist-ok")
    p.add_argument("--exist-ok", action="store_true",
                   help="write into an --output that holds files already (files of the same "
                        "names are replaced; results.json lists this run's pictures only, "
                        "results.jsonl keeps earlier runs' lines before them)")
    p.add_argument("--resume", action="store_true",
                   help="continue the run stopped in --output: skip the images recorded in "
                        "its results.jsonl (refused if a setting differs)")
    p.add_argument("--recursive", action="store_true",
                   help="folders: their subfolders too (symlinked ones followed, each once); "
                        "globs: '**' matches any depth")
    p.add_argument("--every", type=positive_int, default=DetectOptions.every, metavar="N",
                   help="videos: detect on every Nth frame")
    add_flags(p, DetectOptions, "threshold")
    p.add_argument("--max-detections", type=positive_int, default=DetectOptions.max_detections,
                   help="the best-scoring detections kept per picture")
    p.add_argument("--tiles", type=positive_int, default=DetectOptions.tiles, metavar="SIZE",
                   help="also detect in overlapping square tiles of SIZE pixels of the photo, "
                        "each resized to the network's input, for objects too small for the "
                        "whole photo's pass (which is kept); boxes are merged (e.g. 800; at "
                        "least %d)" % MIN_TILE)
    p.add_argument("--tile-overlap", type=float_in(0.0, 1.0, high_open=True),
                   default=DetectOptions.tile_overlap, metavar="SHARE",
                   help="share of a tile's side its neighbours overlap (default %g)"
                        % DEFAULT_OVERLAP)
    p.add_argument("--classes", type=comma_list(str), default=DetectOptions.classes,
                   metavar="NAME,...",
                   help="keep only these classes (default: all)")
    add_flags(p, DetectOptions, "batch_size")
    add_input_size_flags(p, DetectOptions, max_size=True, of_checkpoint=True)
    p.add_argument("--format", dest="image_format", choices=FORMATS,
                   default=DetectOptions.image_format,
                   help="format of the drawn pictures (default: each input's)")
    p.add_argument("--no-pictures", dest="pictures", action="store_false",
                   help="write no drawn pictures")
    p.add_argument("--crops", action="store_true",
                   help="write each detection cut out, in a folder per class")
    p.add_argument("--txt", action="store_true",
                   help="write one text file per picture, a line per detection: CLASS_ID "
                        "CLASS_NAME SCORE X1 Y1 X2 Y2 (pixels; blanks in the name written _)")
    p.add_argument("--strict", action="store_true",
                   help="stop at the first file that cannot be read (default: skip it)")
    add_exif_flag(p, DetectOptions.exif)
    add_data_threads_flag(p, DetectOptions.data_threads)
    add_progress_flag(p)


def more_positionals(args, unknown):
    """Inputs named after a flag (``a.jpg --crops b.jpg``) join ``args.inputs``; the
    unknown flags are returned, to be refused."""
    args.inputs = list(args.inputs) + [word for word in unknown if not word.startswith("-")]
    return [word for word in unknown if word.startswith("-")]


def detect_options(args):
    """The :class:`DetectOptions` of the parsed flags."""
    return DetectOptions.from_flags(args, inputs=tuple(args.inputs), lists=tuple(args.lists))


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
    text = ",".join(value) if isinstance(value, tuple) else str(value)
    return [action.option_strings[0], text]
