#!/usr/bin/env python
"""The main job on the embedded data: generate the shapes dataset, train
ssd_mobilenetv2_stride8 on it from scratch, evaluate on the held-out split, plot
the training curves and draw detections on a held-out image. ``make demo`` runs
this; on 2 CPU cores it takes about 10 minutes.
"""
import argparse
import os
import sys
import time

import eval as eval_tool
import demo as demo_tool
import train as train_tool
from zoo.data import VOCDataset, embedded
from zoo.visualize import plot_training_log

NETWORK = "ssd_mobilenetv2_stride8"
TARGET_MAP = 0.8
# Without pretrained weights a short schedule fits best without crops or zoom-out.
TRAIN_FLAGS = ["--data-shape", "192", "--batch-size", "8", "--epochs", "5", "--lr", "0.01",
               "--wd", "5e-4", "--warmup-epochs", "0.2", "--lr-steps", "4", "--max-expand", "1",
               "--no-crop", "--val-interval", "1"]


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--output-dir", default="output")
    p.add_argument("--epochs", default=None, help="override the number of epochs")
    return p.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    start = time.time()
    root = embedded.generate(embedded.default_root(args.output_dir))
    print("embedded dataset in %s" % root)
    train_dir = os.path.join(args.output_dir, "train")
    flags = TRAIN_FLAGS + (["--epochs", args.epochs] if args.epochs else [])
    if train_tool.main(["--network", NETWORK, "--dataset", "voc", "--data-root", root,
                        "--output-dir", train_dir] + flags):
        return 1
    prefix = os.path.join(train_dir, NETWORK)
    _, results, results_path = eval_tool.evaluate(eval_tool.parse_args(
        ["--checkpoint", prefix, "--dataset", "voc", "--data-root", root, "--split", "val"]))
    curves = plot_training_log(prefix + "-log.csv", prefix + "-log.png")
    image = VOCDataset(root, "val").image_path(0)
    picture = os.path.join(args.output_dir, "demo.png")
    demo_tool.draw(prefix, image, picture)
    achieved = results["voc"]["voc07"]["mAP"]
    print("\nheld-out VOC07 mAP %.4f (target %.2f), COCO AP %.4f, in %.1f min"
          % (achieved, TARGET_MAP, results["coco"]["AP"], (time.time() - start) / 60))
    print("checkpoints and log: %s\nevaluation:          %s\ntraining curves:     %s\n"
          "detections:          %s" % (train_dir, results_path, curves, picture))
    if achieved < TARGET_MAP:
        print("warning: held-out mAP is below the %.2f target" % TARGET_MAP, file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
