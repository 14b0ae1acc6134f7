"""``zoo detect``: run an artifact (fp32, int8, on MXNet), an exported ``.onnx`` file (on
ONNX Runtime) or an OpenVINO ``.xml`` file (on OpenVINO) over files, folders, globs, list
files and videos; write into the output folder ``results.json`` (every picture's
detections, with their COCO category ids for a model trained on a COCO file; the files
skipped), the drawn pictures in ``pictures/`` and, if asked, crops in ``crops/CLASS/`` and
text files in ``labels/``. Deployed files need no MXNet.

Examples:
    zoo detect --checkpoint output/train/ssd_mobilenetv2 photos/ --output output/detect
    zoo detect --checkpoint model.onnx 'photos/**/*.jpg' --recursive --crops --classes bird
    zoo detect --checkpoint out/ssd-int8.xml photos/ --no-pictures
    zoo detect --checkpoint output/int8/ssd --list todo.txt clip.mp4 --every 10 --txt
"""
from zoo.jobs.detect import FORMATS, DetectOptions, detect
from zoo.cli.common import (add_batch_flag, add_checkpoint_flags, add_exif_flag, add_progress_flag,
                            comma_list, fraction, options_from, positive_int)

__all__ = ["add_arguments", "more_positionals", "run"]

DEFAULTS = DetectOptions(checkpoint="", inputs=("",))


def add_arguments(p):
    add_checkpoint_flags(p, "artifact prefix (fp32, or int8 from `zoo quantize`), or a "
                            "PREFIX.onnx or PREFIX.xml (OpenVINO) file from `zoo export`")
    p.add_argument("inputs", nargs="*", metavar="INPUT",
                   help="image or video files, folders, globs (quote them: the zoo expands "
                        "them) or @FILE listing inputs one a line")
    p.add_argument("--list", dest="lists", action="append", default=None, metavar="FILE",
                   help="text file listing inputs, one a line (repeatable)")
    p.add_argument("--output", default=DEFAULTS.output, help="folder to write into")
    p.add_argument("--recursive", action="store_true", help="folders: their subfolders too")
    p.add_argument("--every", type=positive_int, default=DEFAULTS.every, metavar="N",
                   help="videos: detect on every Nth frame")
    p.add_argument("--threshold", type=fraction, default=DEFAULTS.threshold,
                   help="lowest score kept")
    p.add_argument("--max-detections", type=positive_int, default=DEFAULTS.max_detections,
                   help="the best-scoring detections kept per picture")
    p.add_argument("--classes", type=comma_list(str), default=(), metavar="NAME,...",
                   help="keep only these classes (default: all)")
    add_batch_flag(p, DEFAULTS.batch_size)
    p.add_argument("--format", dest="image_format", choices=FORMATS, default=None,
                   help="format of the drawn pictures (default: each input's)")
    p.add_argument("--no-pictures", dest="pictures", action="store_false",
                   help="write no drawn pictures")
    p.add_argument("--crops", action="store_true",
                   help="write each detection cut out, in a folder per class")
    p.add_argument("--txt", action="store_true",
                   help="write one text file per picture: class score x1 y1 x2 y2 a line")
    p.add_argument("--strict", action="store_true",
                   help="stop at the first file that cannot be read (default: skip it)")
    add_exif_flag(p)
    add_progress_flag(p)


def more_positionals(args, unknown):
    """Inputs named after a flag (``a.jpg --crops b.jpg``) join ``args.inputs``; the
    unknown flags are returned, to be refused."""
    args.inputs = list(args.inputs) + [word for word in unknown if not word.startswith("-")]
    return [word for word in unknown if word.startswith("-")]


def run(args):
    summary = detect(options_from(DetectOptions, args, inputs=tuple(args.inputs),
                                  lists=tuple(args.lists or ())))
    print(summary)
    return 0
