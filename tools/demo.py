#!/usr/bin/env python
"""Draw a checkpoint's detections (boxes, class names, scores) on an image, as PNG.

Example:
    python tools/demo.py --checkpoint output/train/ssd_mobilenetv2 \\
        --image output/shapes/JPEGImages/001500.jpg --output output/demo.png
"""
import argparse
import sys

from zoo import checkpoint
from zoo.data.images import read_image
from zoo.errors import ConfigError, DataError
from zoo.evaluation import detect_image
from zoo.visualize import draw_detections, save_png


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--checkpoint", required=True,
                   help="checkpoint prefix (fp32, or int8 from tools/quantize.py)")
    p.add_argument("--epoch", type=int, default=None)
    p.add_argument("--image", required=True, help="image file (JPEG or PNG)")
    p.add_argument("--threshold", type=float, default=0.5, help="lowest score drawn")
    p.add_argument("--output", default="detections.png")
    return p.parse_args(argv)


def draw(checkpoint_prefix, image_path, output, threshold=0.5, epoch=None):
    """Detect on ``image_path`` and write the drawing to ``output``; returns the detections."""
    model, arg_params, aux_params, _ = checkpoint.load_model(checkpoint_prefix, epoch)
    image = read_image(image_path)
    detections = detect_image(model, arg_params, aux_params, image,
                              symbol=checkpoint.load_symbol(checkpoint_prefix))
    names = model.config["class_names"] or [str(i) for i in range(model.config["num_classes"])]
    save_png(output, draw_detections(image, detections, names, score_threshold=threshold))
    return detections


def main(argv=None):
    args = parse_args(argv)
    try:
        detections = draw(args.checkpoint, args.image, args.output, args.threshold, args.epoch)
    except (ConfigError, DataError, FileNotFoundError) as err:
        print("demo.py: error: %s" % err, file=sys.stderr)
        return 1
    print("%d detections above %.2f drawn to %s" % (
        int((detections[:, 1] >= args.threshold).sum()), args.threshold, args.output))
    return 0


if __name__ == "__main__":
    sys.exit(main())
