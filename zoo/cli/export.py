"""``zoo export``: write a deployable detector, from a trained artifact or from a registered
model or YAML config (initialised parameters): a format-2 artifact (e.g. the portable
unfused graph for GPUs), an ONNX file that runs on ONNX Runtime without MXNet, or an
OpenVINO model (PREFIX.xml and .bin), fp32 or int8 calibrated on your images.

Examples:
    zoo export --checkpoint output/train/ssd_mobilenetv2 --no-fuse --output out/gpu/ssd
    zoo export --network ssd_resnet50 --data-shape 512 --output out/ssd_resnet50
    zoo export --checkpoint output/train/ssd_mobilenetv2_stride8 --format onnx \\
        --output out/ssd --verify output/shapes/JPEGImages/000000.jpg
    zoo export --checkpoint output/train/ssd_mobilenetv2_stride8 --format openvino --int8 \\
        --dataset voc --data-root output/shapes --split train --calib-images 32 --output out/ssd
    zoo export --network faster_rcnn_fpn_resnet50 --format openvino --int8 --dataset coco \\
        --data-root mydata --annotations mydata/labels.json --image-dir mydata/photos \\
        --output out/fpn
"""
from zoo.jobs.export import FORMATS, ExportOptions, export
from zoo.onnx import GRAPH_PREPROCESSING
from zoo.cli.common import (KINDS, add_class_map_flag, add_coco_file_flags, add_data_threads_flag,
                            add_input_size_flags, add_progress_flag, existing_folder, network,
                            nonnegative_int, options_from, positive_int)

__all__ = ["add_arguments", "run"]


def add_arguments(p):
    source = p.add_mutually_exclusive_group(required=True)
    source.add_argument("--checkpoint", default=ExportOptions.checkpoint, metavar="PREFIX",
                        help="artifact prefix")
    source.add_argument("--network", type=network, default=ExportOptions.network,
                        help="registered model name or YAML config path")
    p.add_argument("--epoch", type=nonnegative_int, default=ExportOptions.epoch,
                   help="epoch of --checkpoint (default: the best validated one, else the "
                        "newest)")
    add_input_size_flags(p, ExportOptions, max_size=True, of_network=True, of_checkpoint=True)
    p.add_argument("--output", required=True, metavar="PREFIX",
                   help="the file to write, one prefix for every format: PREFIX-NNNN.json "
                        "and .params (mxnet), PREFIX.onnx (onnx), PREFIX.xml and PREFIX.bin "
                        "(openvino); a name ending in the format's own suffix is that file "
                        "(out/ssd.onnx writes out/ssd.onnx). A folder (out/, an existing "
                        "folder) is refused: name the file in it")
    p.add_argument("--format", choices=FORMATS, default=ExportOptions.format,
                   help="an MXNet artifact, one ONNX file holding the whole detector, or an "
                        "OpenVINO model (PREFIX.xml and PREFIX.bin)")
    p.add_argument("--no-fuse", dest="fused", action="store_false",
                   help="mxnet: write the portable graph instead of MKL-DNN's fused one")
    p.add_argument("--graph-preprocessing", choices=GRAPH_PREPROCESSING,
                   default=ExportOptions.graph_preprocessing,
                   help="onnx: 'normalize' takes RGB pixels 0-255 (B, H, W, 3) and normalises "
                        "them in the graph; 'none' takes the normalised (B, 3, H, W) input")
    p.add_argument("--verify", nargs="+", default=ExportOptions.verify, metavar="IMAGE",
                   help="onnx: image files on which ONNX Runtime must detect what MXNet does "
                        "(top 100: same classes in order, scores within 1e-4, boxes within "
                        "1e-3 of the image side)")
    add_int8_flags(p)


def add_int8_flags(p):
    p.add_argument("--int8", action="store_true",
                   help="openvino: quantize convolutions and fully connected layers to int8, "
                        "calibrated on the first --calib-images of --data-root's --split "
                        "(post-processing stays fp32)")
    p.add_argument("--dataset", choices=KINDS, default=ExportOptions.dataset,
                   help="--int8: the calibration images' dataset format")
    p.add_argument("--data-root", type=existing_folder, default=ExportOptions.data_root,
                   help="--int8: the calibration dataset folder (not needed for --dataset coco "
                        "with --annotations and --image-dir)")
    p.add_argument("--split", default=ExportOptions.split,
                   help="--int8: split to calibrate on (not one you score on)")
    add_coco_file_flags(p, ExportOptions, "--int8 --dataset coco")
    p.add_argument("--calib-images", type=positive_int, default=ExportOptions.calib_images,
                   help="--int8: images calibrated on")
    p.add_argument("--batch-size", type=positive_int, default=ExportOptions.batch_size,
                   help="--int8: calibration images per batch")
    p.add_argument("--skip-bad", action="store_true",
                   help="--int8: skip bad images with a warning instead of stopping")
    add_data_threads_flag(p, ExportOptions.data_threads)
    add_class_map_flag(p, ExportOptions.class_map)
    add_progress_flag(p)


def run(args):
    result = export(options_from(ExportOptions, args))
    print("epoch %d written to %s" % (result.epoch, result.path))
    if result.parity is not None:
        print("ONNX Runtime against MXNet: %s" % result.parity)
    calibration = (result.precision or {}).get("calibration")
    if calibration:
        print("int8: %d layers, calibrated on %d images of %s in %.1f s"
              % (calibration["int8_layers"], calibration["images"], calibration["data"],
                 calibration["seconds"]))
    return 0
