"""``zoo demo``: draw a checkpoint's detections (boxes, class names, scores) on an image: an
artifact's, or a deployed .onnx or .xml file's.

Example:
    zoo demo --checkpoint output/train/ssd_mobilenetv2 \\
        --image output/shapes/JPEGImages/001500.jpg --output output/demo.png
"""
from zoo.jobs.demo import DemoOptions, demo
from zoo.cli.common import add_checkpoint_flags, add_exif_flag, fraction, options_from

__all__ = ["add_arguments", "run"]


def add_arguments(p):
    add_checkpoint_flags(p, "artifact prefix (fp32, or int8 or bf16 from `zoo quantize`), or "
                            "a PREFIX.onnx or PREFIX.xml (OpenVINO) file from `zoo export`",
                         DemoOptions.epoch)
    p.add_argument("--image", required=True, help="image file (JPEG or PNG)")
    p.add_argument("--threshold", type=fraction, default=DemoOptions.threshold,
                   help="lowest score drawn")
    p.add_argument("--output", default=DemoOptions.output,
                   help="picture to write, encoded as its extension says (.png, .jpg, ...)")
    add_exif_flag(p, DemoOptions.exif)


def run(args):
    detections = demo(options_from(DemoOptions, args))
    print("%d detections of at least %.2f drawn to %s (boxes in the %s frame)"
          % (len(detections), args.threshold, args.output, detections.frame))
    return 0
