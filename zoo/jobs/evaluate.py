"""Score an artifact, or a deployed detector (an ONNX file or an OpenVINO IR, fp32 or int8), on
every image of a dataset split: per-class AP and mAP (VOC07 11-point and area under the
curve) and COCO AP, AP50, AP75."""
import json
import os
from dataclasses import dataclass
from typing import Optional, Tuple

from zoo.errors import OptionsError
from zoo.flags import (ARTIFACT_OR_DEPLOYED, annotations_flag, checkpoint_flag,
                       class_map_flag, data_root_flag, data_shape_flag, data_threads_flag,
                       dataset_flag, epoch_flag, flag, image_dir_flag, inference_batch_flag,
                       max_size_flag, options_from, progress_flag, skip_bad_flag,
                       tile_overlap_flag, tiles_flag)
from zoo.checkpoint import open_detector
from zoo.inference.evaluation import coco_report, dataset_rows, voc_scores
from zoo.inference.tiles import check_tile_flags, run_tiling, tiles_record
from zoo.jobs.datasets import DataSplit, checkpoint_name, open_for_artifact, relabel

__all__ = ["EvalOptions", "evaluate", "format_table"]


@dataclass(frozen=True)
class EvalOptions:
    """What ``zoo eval`` scores, and on what: each field declares its flag (:mod:`zoo.flags`)."""
    checkpoint: str = checkpoint_flag(ARTIFACT_OR_DEPLOYED)
    # None: only for a COCO split named by annotations and image_dir
    data_root: Optional[str] = data_root_flag(None, named=True)
    epoch: Optional[int] = epoch_flag()  # None: the best validated epoch, else the newest
    dataset: str = dataset_flag("voc")
    split: str = flag("val", "split to score")
    batch_size: Optional[int] = inference_batch_flag()
    data_threads: Optional[int] = data_threads_flag()  # decoding (and checking for skip_bad)
    skip_bad: bool = skip_bad_flag()
    annotations: Optional[str] = annotations_flag()
    image_dir: Optional[str] = image_dir_flag()
    output: Optional[str] = flag(        # None: default_output's, never one of another scoring
        None, "results JSON, replaced if it exists (default: <checkpoint>-eval-<split>.json, "
              "or -eval-<file stem>.json for --annotations without {split}, never replacing "
              "another scoring's)")
    progress: bool = progress_flag()
    data_shape: Optional[int] = data_shape_flag(max_size=True, of_checkpoint=True)
    max_size: Optional[int] = max_size_flag(of_checkpoint=True)  # None: the checkpoint's
    # None: the dataset's classes are the artifact's; else pairs (dataset class, artifact
    # class) matching a dataset of some (or renamed) classes, see jobs.datasets.class_lookup
    class_map: Optional[Tuple[Tuple[str, str], ...]] = class_map_flag()
    # whole photos run whole and in tiles, as zoo detect; None: the checkpoint's, 0: none
    tiles: Optional[int] = tiles_flag()
    tile_overlap: Optional[float] = tile_overlap_flag(of_checkpoint=True)  # None: as tiles

    def __post_init__(self):
        check_tile_flags(self.tiles, self.tile_overlap)  # refused before the detector loads

    @classmethod
    def from_flags(cls, args, **values):
        """The options of ``zoo eval``'s parsed flags, those of ``values`` given."""
        return options_from(cls, args, **values)


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
    tiles: Optional[dict] = None         # {"size", "overlap"} of the tiles run, None: none


def evaluate(options):
    """Detect on every image of the split with :func:`zoo.open_detector` of the checkpoint,
    score, and write the results JSON (and the COCO detections beside it). Each image is
    scored whole, run whole and in tiles where the options or the checkpoint ask for tiles
    (:func:`zoo.inference.tiles.run_tiling`), as ``zoo detect`` runs it."""
    detector = open_detector(options.checkpoint, options.epoch,
                             data_threads=options.data_threads, data_shape=options.data_shape,
                             max_size=options.max_size)
    tiles = run_tiling(options.tiles, options.tile_overlap, detector.tiles)
    split = DataSplit(options.dataset, options.data_root, options.split, options.skip_bad,
                      options.data_threads, options.annotations, options.image_dir)
    dataset, lookup = open_for_artifact(split, detector.class_names,
                                        checkpoint_name(options.checkpoint, detector.epoch),
                                        options.class_map)
    scoring = {"checkpoint": options.checkpoint, "epoch": detector.epoch, "data": str(split),
               "data_files": split.files(),
               "class_map": None if options.class_map is None else dict(options.class_map),
               "tiles": tiles_record(tiles)}
    if options.data_shape or options.max_size:  # a scoring at the checkpoint's size has none
        scoring["data_shape"] = detector.preprocessing["data_shape"]
    output = options.output or default_output(options, detector.epoch)
    if not options.output:
        check_replaceable(output, scoring)
    # Before the predictions: a folder that cannot be made fails now, not after them.
    os.makedirs(os.path.dirname(os.path.abspath(output)), exist_ok=True)
    detections = relabel(dataset_rows(detector, dataset, options.batch_size, options.progress,
                                      tiles), lookup)
    coco, coco_classes = coco_report(
        dataset, detections, results_json=os.path.splitext(output)[0] + "-detections.json",
        category_ids=dataset_category_ids(detector.category_ids, lookup,
                                          len(dataset.class_names)))
    result = EvalResult(
        epoch=detector.epoch, images=len(dataset), precision=detector.precision,
        class_names=list(dataset.class_names), voc=voc_scores(dataset, detections),
        coco=coco, coco_classes=coco_classes, output=output, tiles=tiles_record(tiles))
    with open(output, "w") as stream:
        json.dump(dict(scoring, images=result.images, precision=result.precision,
                       voc=result.voc, coco=result.coco,
                       coco_classes=result.coco_classes), stream, indent=1)
    return result


def default_output(options, epoch):
    """``<checkpoint>-eval-<what>.json`` (a deployed file's name, ``epoch`` None, without its
    extension): ``what`` is the split, or the stem of an annotation file named without
    ``{split}`` (scoring ``train.json`` never writes over a score of ``val.json``)."""
    base = os.path.splitext(options.checkpoint)[0] if epoch is None else options.checkpoint
    what = options.split
    if options.annotations and "{split}" not in options.annotations:
        what = os.path.splitext(os.path.basename(options.annotations))[0]
    return "%s-eval-%s.json" % (base, what)


SAME_SCORING = ("epoch", "data_files", "class_map", "data_shape", "tiles")
"""What makes a results file the score this evaluation makes again (its default name
already names the checkpoint): the epoch, the data read (by real paths, whatever folder
the command ran in), the class map, the input size where one was chosen and the tiles."""


def check_replaceable(output, scoring):
    """Refuse a default-named results file that holds another scoring than ``scoring``
    (another epoch, dataset or class map; or that is no results file): only ``--output``
    naming it replaces it. The same scoring run again is replaced."""
    if not os.path.exists(output):
        return
    try:
        with open(output, encoding="utf-8") as stream:
            earlier = json.load(stream)
    except (OSError, ValueError):
        earlier = None
    if isinstance(earlier, dict) and all(earlier.get(k) == scoring.get(k) for k in SAME_SCORING):
        return
    held = ("the score of %s%s on %s" % (
        earlier.get("checkpoint"), "" if earlier.get("epoch") is None
        else " epoch %s" % earlier.get("epoch"), earlier.get("data"))
        if isinstance(earlier, dict) else "something else than a zoo eval result")
    raise OptionsError("%s holds %s, which this evaluation would replace: name the results "
                       "file with --output (this name to replace it)" % (output, held))


def dataset_category_ids(category_ids, lookup, num_classes):
    """The COCO category id of each dataset class, the detector's (``category_ids``, per
    label) of the label it is matched with (``lookup``: the dataset class of each label);
    None for a detector without ids. A COCO dataset's own ids come first
    (:func:`zoo.inference.evaluation.coco_report`)."""
    if category_ids is None:
        return None
    ids = [None] * num_classes
    for label, class_id in enumerate(lookup):
        if class_id >= 0:
            ids[class_id] = category_ids[label]
    return ids


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
