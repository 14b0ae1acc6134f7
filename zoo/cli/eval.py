"""``zoo eval``: score an artifact, or a deployed detector (PREFIX.onnx on ONNX Runtime,
PREFIX.xml on OpenVINO), on every image of a dataset split.

Examples:
    zoo eval --checkpoint output/train/ssd_mobilenetv2_stride8 --dataset voc \\
        --data-root output/shapes --split val
    zoo eval --checkpoint out/ssd-int8.xml --dataset voc --data-root output/shapes --split val
A checkpoint trained on tiles (zoo train --tiles) scores whole photos run whole and in its
tiles, as zoo detect runs them; --tiles 0 scores the whole-photo pass alone.
"""
from zoo.jobs.evaluate import EvalOptions, evaluate, format_table
from zoo.flags import add_flags

__all__ = ["add_arguments", "run"]


def add_arguments(p):
    add_flags(p, EvalOptions, "checkpoint", "epoch", "dataset", "data_root", "split",
              "annotations", "image_dir", "skip_bad", "data_threads", "batch_size",
              "data_shape", "max_size", "tiles", "tile_overlap", "class_map", "output",
              "progress")


def precision_note(precision):
    """What the summary line says of a quantized checkpoint's precision (nothing for fp32)."""
    calibration = precision.get("calibration")
    if calibration:
        return ", int8 (%s calibration)" % calibration["mode"]
    return ", bf16" if precision["dtype"] == "bf16" else ""


def run(args):
    result = evaluate(EvalOptions.from_flags(args))
    where = (args.annotations.replace("{split}", args.split) if args.annotations
             else "%s/%s" % (args.data_root, args.split))
    print("%d images of %s, %s%s%s" % (
        result.images, where,
        args.checkpoint if result.epoch is None else "epoch %d" % result.epoch,
        precision_note(result.precision),
        ", whole and in %(size)d-pixel tiles overlapping %(overlap)g" % result.tiles
        if result.tiles else ""))
    print(format_table(result.class_names, dict(result.voc, coco=result.coco_classes)))
    print("COCO AP %.4f  AP50 %.4f  AP75 %.4f"
          % (result.coco["AP"], result.coco["AP50"], result.coco["AP75"]))
    print("results written to %s" % result.output)
    return 0
