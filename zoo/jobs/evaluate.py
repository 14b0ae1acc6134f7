"""Score an artifact, or a deployed detector (an ONNX file or an OpenVINO IR, fp32 or int8), on
every image of a dataset split: per-class AP and mAP (VOC07 11-point and area under the
curve) and COCO AP, AP50, AP75."""
import json
import os
from dataclasses import dataclass
from typing import Optional, Tuple

from zoo import artifact
from zoo.errors import OptionsError
from zoo.inference.evaluation import coco_report, dataset_rows, predict, voc_scores
from zoo.jobs.datasets import DataSplit, open_for_artifact, relabel
from zoo.jobs.deployed import is_deployed, load_deployed

__all__ = ["EvalOptions", "evaluate", "format_table"]


@dataclass(frozen=True)
class EvalOptions:
    checkpoint: str                      # an artifact prefix, or a PREFIX.onnx or PREFIX.xml
    data_root: str
    epoch: Optional[int] = None          # None: the best validated epoch, else the newest
    dataset: str = "voc"
    split: str = "val"
    batch_size: int = 8
    data_threads: Optional[int] = None
    skip_bad: bool = False
    annotations: Optional[str] = None    # coco: the annotation file ({split}: the split)
    image_dir: Optional[str] = None      # coco: the image folder ({split}: the split)
    output: Optional[str] = None         # results JSON; None: <checkpoint>-eval-<split>.json
    progress: bool = True
    # None: the dataset's classes are the artifact's; else pairs (dataset class, artifact
    # class) matching a dataset of some (or renamed) classes, see jobs.datasets.class_lookup
    class_map: Optional[Tuple[Tuple[str, str], ...]] = None


@dataclass(frozen=True)
class EvalResult:
    epoch: Optional[int]                 # None for a deployed file
    images: int
    precision: dict
    class_names: list
    voc: dict                            # {"voc07": {class: AP, "mAP": ...}, "voc_area": ...}
    coco: dict                           # {"AP": ..., "AP50": ..., "AP75": ..., ...}
    coco_classes: dict                   # {class: COCO AP, "mAP": AP}
    output: str                          # the results JSON written


def evaluate(options):
    """Predict on every image of the split, score, and write the results JSON (and the COCO
    detections beside it)."""
    loaded = _loaded(options)
    split = DataSplit(options.dataset, options.data_root, options.split, options.skip_bad,
                      options.data_threads, options.annotations, options.image_dir)
    dataset, lookup = open_for_artifact(split, loaded, options.class_map)
    output = options.output or "%s-eval-%s.json" % (
        os.path.splitext(options.checkpoint)[0] if loaded.epoch is None else options.checkpoint,
        options.split)
    # Before the predictions: a folder that cannot be made fails now, not after them.
    os.makedirs(os.path.dirname(os.path.abspath(output)), exist_ok=True)
    detections = relabel(predicted(loaded, dataset, options), lookup)
    coco, coco_classes = coco_report(
        dataset, detections, results_json=os.path.splitext(output)[0] + "-detections.json")
    result = EvalResult(
        epoch=loaded.epoch, images=len(dataset), precision=loaded.precision,
        class_names=list(dataset.class_names), voc=voc_scores(dataset, detections),
        coco=coco, coco_classes=coco_classes, output=output)
    with open(output, "w") as stream:
        json.dump({"checkpoint": options.checkpoint, "epoch": result.epoch,
                   "images": result.images, "precision": result.precision,
                   "data": str(split),
                   "class_map": None if options.class_map is None else dict(options.class_map),
                   "voc": result.voc, "coco": result.coco,
                   "coco_classes": result.coco_classes}, stream, indent=1)
    return result


def _loaded(options):
    """The artifact, or the deployed file, ``checkpoint`` names."""
    if not is_deployed(options.checkpoint):
        return artifact.load(options.checkpoint, options.epoch)
    if options.epoch is not None:
        raise OptionsError("epoch %d: %s is a deployed file, of one epoch; give no epoch"
                           % (options.epoch, options.checkpoint))
    return load_deployed(options.checkpoint)


def predicted(loaded, dataset, options):
    """Every image's detection rows (see :func:`zoo.inference.evaluation.predict`) by an artifact or
    a deployed detector."""
    if is_deployed(loaded.prefix):
        return dataset_rows(loaded.detector, dataset, options.batch_size, options.progress)
    return predict(loaded.model, loaded.arg_params, loaded.aux_params, dataset,
                   batch_size=options.batch_size, num_workers=options.data_threads,
                   progress=options.progress, symbol=loaded.symbol,
                   preprocessing=loaded.preprocessing)


def format_table(class_names, scores):
    """Per-class AP of every metric (``{metric: {class: AP, "mAP": ...}}``) side by side,
    mAP last."""
    metrics = list(scores)
    width = max(len(n) for n in list(class_names) + ["mAP"])
    lines = ["%-*s  %s" % (width, "class", "  ".join("%9s" % m for m in metrics))]
    for name in list(class_names) + ["mAP"]:
        lines.append("%-*s  %s" % (width, name, "  ".join(
            "%9.4f" % scores[m][name] for m in metrics)))
    return "\n".join(lines)
