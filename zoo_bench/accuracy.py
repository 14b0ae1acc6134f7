"""What the speed costs: ``zoo benchmark --checkpoint P --compare all`` with a dataset split
also scores each deployment of the trained artifact on that split, as ``zoo eval`` scores
it (VOC07 mAP for a VOC split, COCO AP for a COCO one), and names the accuracy the fastest
one gives up against the artifact itself in MXNet. Its OpenVINO int8 model is then
calibrated on the first images of another split of the dataset (``calib_split``, default
``train``), as ``zoo export --int8`` calibrates, instead of on the random benchmark input.
"""
import os
from dataclasses import dataclass

from zoo.inference.runner import ImageList

__all__ = ["Score", "calibration_batches", "format_cost", "format_score", "score"]

REFERENCE = "ours fp32"
"""The side every other is scored against: the artifact in MXNet, as trained."""


@dataclass(frozen=True)
class Score:
    side: str       # "ours fp32", "openvino int8", ... as the speed table names them
    metric: str     # "VOC07 mAP" or "COCO AP"
    value: float


def calibration_batches(onnx_path, split, count, batch_size=4):
    """The graph inputs of the first ``count`` images of ``split``, prepared as the file
    ``onnx_path`` prepares images once deployed."""
    from zoo.jobs.datasets import first_images
    from zoo.onnx.runtime import OnnxDetector
    detector = OnnxDetector(onnx_path)
    images = ImageList(first_images(split.open(), count))
    return [detector.inputs(batch.data, batch.im_info)
            for batch in detector.runner.batches(images, batch_size)]


def score(side, checkpoint, epoch, split, scratch):
    """The :class:`Score` of ``checkpoint`` (an artifact prefix at ``epoch``, or a deployed
    ``.onnx``/``.xml`` file) on ``split``, by :func:`zoo.jobs.evaluate.evaluate`; its
    results JSON goes into the folder ``scratch``."""
    from zoo.jobs.evaluate import EvalOptions, evaluate
    result = evaluate(EvalOptions(
        checkpoint=checkpoint, epoch=epoch, data_root=split.root, dataset=split.kind,
        split=split.split, annotations=split.annotations, image_dir=split.image_dir,
        output=os.path.join(scratch, side.replace(" ", "-") + "-eval.json"), progress=False))
    if split.kind == "coco":
        return Score(side, "COCO AP", result.coco["AP"])
    return Score(side, "VOC07 mAP", result.voc["voc07"]["mAP"])


def format_score(s, split):
    return "accuracy of %s on %s: %s %.4f" % (s.side, split, s.metric, s.value)


def format_cost(batch_size, fastest_side, scores):
    """The line naming what ``fastest_side``, the fastest at ``batch_size``, gives up
    against :data:`REFERENCE`."""
    by_side = {s.side: s for s in scores}
    ours, reference = by_side[fastest_side], by_side[REFERENCE]
    return ("accuracy cost of the fastest at batch %d, %s: %s %.4f against %.4f for %s "
            "(%+.1f points)" % (batch_size, fastest_side, ours.metric, ours.value,
                                reference.value, REFERENCE, 100 * (ours.value - reference.value)))
