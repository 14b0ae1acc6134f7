"""``zoo export``: write a deployable detector, from a trained artifact or from a registered
model or YAML config (initialised parameters): a format-2 artifact (e.g. the portable
unfused graph for GPUs), an ONNX file that runs on ONNX Runtime without MXNet, or an
OpenVINO model (PREFIX.xml and .bin), fp32 or int8 calibrated on your images.

Examples:
    zoo export --checkpoint output/train/ssd_mobilenetv2_stride8 --no-fuse --output out/gpu/ssd
    zoo export --network ssd_resnet50 --data-shape 512 --output out/ssd_resnet50
    zoo export --checkpoint output/train/ssd_mobilenetv2_stride8 --format onnx \\
        --output out/ssd --verify output/shapes/JPEGImages/000000.jpg
    zoo export --checkpoint output/train/ssd_mobilenetv2_stride8 --format openvino --int8 \\
        --dataset voc --data-root output/shapes --split train --calib-images 32 --output out/ssd
    zoo export --network faster_rcnn_fpn_resnet50 --format openvino --int8 --dataset coco \\
        --data-root mydata --annotations mydata/labels.json --image-dir mydata/photos \\
        --output out/fpn
"""
from zoo.jobs.export import ExportOptions, export
from zoo.flags import add_flags

__all__ = ["add_arguments", "run"]


def add_arguments(p):
    # one of the two, required
    add_flags(p.add_mutually_exclusive_group(required=True), ExportOptions, "checkpoint",
              "network")
    add_flags(p, ExportOptions, "epoch", "data_shape", "max_size", "output", "format", "fused",
              "graph_preprocessing", "verify")
    # OpenVINO's int8 and its calibration data
    add_flags(p, ExportOptions, "int8", "dataset", "data_root", "split", "annotations",
              "image_dir", "calib_images", "batch_size", "skip_bad", "data_threads",
              "class_map", "progress")


def run(args):
    result = export(ExportOptions.from_flags(args))
    print("epoch %d written to %s" % (result.epoch, result.path))
    if result.parity is not None:
        print("ONNX Runtime against MXNet: %s" % result.parity)
    calibration = (result.precision or {}).get("calibration")
    if calibration:
        print("int8: %d layers, calibrated on %d images of %s in %.1f s"
              % (calibration["int8_layers"], calibration["images"], calibration["data"],
                 calibration["seconds"]))
    return 0
