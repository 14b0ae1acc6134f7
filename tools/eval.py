#!/usr/bin/env python
"""Evaluate a checkpoint on a dataset: per-class AP and mAP (VOC07 11-point and
area under the curve) and COCO AP, AP50, AP75. Every image is scored.

Example:
    python tools/eval.py --checkpoint output/train/ssd_mobilenetv2 \\
        --dataset embedded --data-root output/shapes --split val
"""
import argparse
import json
import os
import sys

from zoo import checkpoint
from zoo.data.factory import KINDS, open_dataset
from zoo.errors import ConfigError, DataError
from zoo.evaluation import coco_scores, predict, voc_scores


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--checkpoint", required=True, help="checkpoint prefix, e.g. out/ssd_resnet50 "
                   "(fp32, or int8 from tools/quantize.py)")
    p.add_argument("--epoch", type=int, default=None, help="default: the newest complete one")
    p.add_argument("--dataset", choices=KINDS, default="embedded")
    p.add_argument("--data-root", default=os.path.join("output", "shapes"))
    p.add_argument("--split", default="val")
    p.add_argument("--batch-size", type=int, default=8)
    p.add_argument("--data-threads", type=int, default=None)
    p.add_argument("--skip-bad", action="store_true")
    p.add_argument("--output", default=None,
                   help="results JSON (default: <checkpoint>-eval-<split>.json)")
    p.add_argument("--no-progress", dest="progress", action="store_false")
    return p.parse_args(argv)


def format_table(class_names, scores):
    """Per-class AP of every VOC metric side by side, mAP last."""
    metrics = list(scores)
    width = max(len(n) for n in list(class_names) + ["mAP"])
    lines = ["%-*s  %s" % (width, "class", "  ".join("%9s" % m for m in metrics))]
    for name in list(class_names) + ["mAP"]:
        lines.append("%-*s  %s" % (width, name, "  ".join(
            "%9.4f" % scores[m][name] for m in metrics)))
    return "\n".join(lines)


def evaluate(args):
    model, arg_params, aux_params, meta = checkpoint.load_model(args.checkpoint, args.epoch)
    dataset = open_dataset(args.dataset, args.data_root, args.split, args.skip_bad)
    detections = predict(model, arg_params, aux_params, dataset, batch_size=args.batch_size,
                         num_workers=args.data_threads, progress=args.progress,
                         symbol=checkpoint.load_symbol(args.checkpoint))
    output = args.output or "%s-eval-%s.json" % (args.checkpoint, args.split)
    results = {"checkpoint": args.checkpoint, "epoch": meta["epoch"], "images": len(dataset),
               "quantization": meta.get("quantization"),
               "voc": voc_scores(dataset, detections),
               "coco": coco_scores(dataset, detections,
                                   results_json=os.path.splitext(output)[0] + "-detections.json")}
    with open(output, "w") as stream:
        json.dump(results, stream, indent=1)
    return dataset, results, output


def main(argv=None):
    args = parse_args(argv)
    try:
        dataset, results, output = evaluate(args)
    except (ConfigError, DataError, FileNotFoundError) as err:
        print("eval.py: error: %s" % err, file=sys.stderr)
        return 1
    print("%d images of %s/%s, epoch %d%s" % (
        results["images"], args.data_root, args.split, results["epoch"],
        ", int8 (%s calibration)" % results["quantization"]["calib_mode"]
        if results["quantization"] else ""))
    print(format_table(dataset.class_names, results["voc"]))
    coco = results["coco"]
    print("COCO AP %.4f  AP50 %.4f  AP75 %.4f" % (coco["AP"], coco["AP50"], coco["AP75"]))
    print("results written to %s" % output)
    return 0


if __name__ == "__main__":
    sys.exit(main())
