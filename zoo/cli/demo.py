"""``zoo demo``: draw a checkpoint's detections (boxes, class names, scores) on an image: an
artifact's, or a deployed .onnx or .xml file's.

Example:
    zoo demo --checkpoint output/train/ssd_mobilenetv2_stride8 \\
        --image output/shapes/JPEGImages/001500.jpg --output output/demo.png
"""
from zoo.jobs.demo import DemoOptions, demo
from zoo.flags import add_flags

__all__ = ["add_arguments", "run"]


def add_arguments(p):
    add_flags(p, DemoOptions, "checkpoint", "epoch", "image", "threshold", "output", "exif")


def run(args):
    detections = demo(DemoOptions.from_flags(args))
    print("%d detections of at least %.2f drawn to %s (boxes in the %s frame)"
          % (len(detections), args.threshold, args.output, detections.frame))
    return 0
