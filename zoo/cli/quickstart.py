"""``zoo quickstart`` (``make demo``): generate the embedded shapes dataset, train
ssd_mobilenetv2_stride8 on it from scratch, evaluate on the held-out split, plot the training
curves, draw detections on a held-out image, export the detector to ONNX (checked against
MXNet on held-out images), and print the lines of Python that use the trained detector."""
import sys
import time

from zoo.jobs.quickstart import QuickstartOptions, quickstart
from zoo.jobs.recipes import SSD
from zoo.flags import add_flags

__all__ = ["add_arguments", "run"]


def add_arguments(p):
    add_flags(p, QuickstartOptions, "output_dir", "epochs", "seed", "progress")


def run(args):
    start = time.time()
    result = quickstart(QuickstartOptions.from_flags(args))
    in_band = args.epochs == QuickstartOptions.epochs
    print("\nheld-out VOC07 mAP %.4f%s, COCO AP %.4f%s, in %.1f min"
          % (result.voc07_map, ": " + SSD.band.words(result.voc07_map) if in_band else "",
             result.coco_ap, ": " + SSD.coco_band.words(result.coco_ap) if in_band else "",
             (time.time() - start) / 60))
    print("checkpoints and log: %s\nevaluation:          %s\ntraining curves:     %s\n"
          "detections:          %s" % (result.train_dir, result.results_path, result.curves,
                                       result.picture))
    for metric, value, band in (("mAP", result.voc07_map, SSD.band),
                                ("COCO AP", result.coco_ap, SSD.coco_band)):
        if in_band and not band.holds(value):
            print("warning: held-out %s %.4f is outside the band %.2f-%.2f of this recipe's "
                  "measured runs: see docs/training.md, Reproducibility"
                  % (metric, value, band.low, band.high), file=sys.stderr)
    print("ONNX export:         %s\n  ONNX Runtime against MXNet: %s"
          % (result.onnx_path, result.onnx_parity))
    print("\nUse the trained detector from Python:\n%s" % result.python_line)
    print("\nor without MXNet, on ONNX Runtime:\n%s" % result.onnx_python_line)
    return 0
