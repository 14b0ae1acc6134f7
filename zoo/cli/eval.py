"""``zoo eval``: score an artifact, or a deployed detector (PREFIX.onnx on ONNX Runtime,
PREFIX.xml on OpenVINO), on every image of a dataset split.

Examples:
    zoo eval --checkpoint output/train/ssd_mobilenetv2 --dataset voc \\
        --data-root output/shapes --split val
    zoo eval --checkpoint out/ssd-int8.xml --dataset voc --data-root output/shapes --split val
"""
from zoo.jobs.evaluate import EvalOptions, evaluate, format_table
from zoo.cli.common import (add_batch_flag, add_checkpoint_flags, add_class_map_flag,
                     add_dataset_flags, add_input_size_flags, add_progress_flag, options_from)

__all__ = ["add_arguments", "run"]


def add_arguments(p):
    add_checkpoint_flags(p, "artifact prefix (fp32, or int8 or bf16 from `zoo quantize`), or a "
                            "deployed PREFIX.onnx or PREFIX.xml (OpenVINO) from `zoo export`",
                         EvalOptions.epoch)
    add_dataset_flags(p, EvalOptions, {"--split": "split to score"}, named=True)
    add_batch_flag(p, EvalOptions.batch_size)
    add_input_size_flags(p, EvalOptions, max_size=True, of_checkpoint=True)
    add_class_map_flag(p, EvalOptions.class_map)
    p.add_argument("--output", default=EvalOptions.output,
                   help="results JSON, replaced if it exists (default: "
                        "<checkpoint>-eval-<split>.json, or -eval-<file stem>.json for "
                        "--annotations without {split}, never replacing another scoring's)")
    add_progress_flag(p)


def precision_note(precision):
    """What the summary line says of a quantized checkpoint's precision (nothing for fp32)."""
    calibration = precision.get("calibration")
    if calibration:
        return ", int8 (%s calibration)" % calibration["mode"]
    return ", bf16" if precision["dtype"] == "bf16" else ""


def run(args):
    result = evaluate(options_from(EvalOptions, args))
    where = (args.annotations.replace("{split}", args.split) if args.annotations
             else "%s/%s" % (args.data_root, args.split))
    print("%d images of %s, %s%s" % (
        result.images, where,
        args.checkpoint if result.epoch is None else "epoch %d" % result.epoch,
        precision_note(result.precision)))
    print(format_table(result.class_names, dict(result.voc, coco=result.coco_classes)))
    print("COCO AP %.4f  AP50 %.4f  AP75 %.4f"
          % (result.coco["AP"], result.coco["AP50"], result.coco["AP75"]))
    print("results written to %s" % result.output)
    return 0
