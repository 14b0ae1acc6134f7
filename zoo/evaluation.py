"""Running a detector over a dataset and scoring it: VOC07 11-point and area mAP,
COCO AP through pycocotools."""
import numpy as np

from .data import DetectionLoader, ValTransform
from .deploy import Predictor
from .metrics import VOCMeanAP, coco_detections, coco_eval, coco_ground_truth


def val_transform(model):
    """The model's inference preprocessing: resize to its data shape and normalise."""
    config = model.config
    return ValTransform(config["data_shape"], config["mean_pixels"], config["std_pixels"])


def model_predictor(model, arg_params, aux_params, ctx=None, symbol=None):
    """A :class:`Predictor` of ``symbol``, by default the model's inference graph."""
    return Predictor(model.symbol() if symbol is None else symbol, arg_params, aux_params, ctx)


def predict(model, arg_params, aux_params, dataset, batch_size=8, num_workers=None,
            progress=True, ctx=None, symbol=None):
    """Detections for every image of ``dataset``, in order: a list of ``(N, 6)`` arrays of
    rows ``[class, score, x1, y1, x2, y2]`` normalised to the image, padding rows removed.

    ``symbol`` is the graph to run (e.g. a checkpoint's quantized one); by default the
    model's inference graph."""
    loader = DetectionLoader(dataset, batch_size, val_transform(model), shuffle=False,
                             num_workers=num_workers, last_batch="pad")
    predictor = model_predictor(model, arg_params, aux_params, ctx, symbol)
    batches = loader.epoch(0)
    if progress:
        from tqdm import tqdm
        batches = tqdm(batches, total=len(loader), desc="evaluating", unit="batch")
    results = []
    for batch in batches:
        detections = predictor(**model.input_arrays(batch.data))[0].asnumpy()
        keep = len(batch.indices) - batch.pad
        results.extend(d[d[:, 0] >= 0] for d in detections[:keep])
    return results


def in_pixels(detections, record):
    """Detection rows with boxes scaled from [0, 1] to the record's pixels."""
    scaled = detections.copy()
    scaled[:, 2:6] *= [record.width, record.height, record.width, record.height]
    return scaled


def voc_scores(dataset, detections):
    """``{"voc07": {...}, "voc_area": {...}}``: per-class AP and ``mAP`` for each metric."""
    metrics = {"voc07": VOCMeanAP(dataset.class_names, use_07_metric=True),
               "voc_area": VOCMeanAP(dataset.class_names, use_07_metric=False)}
    for record, found in zip(dataset.records, detections):
        found = in_pixels(found, record)
        inputs = (found[None, :, 2:6], found[None, :, 0], found[None, :, 1],
                  np.asarray(record.boxes, np.float32).reshape(1, -1, 4),
                  np.asarray(record.class_ids).reshape(1, -1),
                  np.asarray(record.difficult).reshape(1, -1))
        for metric in metrics.values():
            metric.update(*inputs)
    return {name: dict(zip(*metric.get())) for name, metric in metrics.items()}


def coco_scores(dataset, detections, results_json=None):
    """COCO AP, AP50, AP75, ... (difficult objects count as crowd regions)."""
    ground_truth = coco_ground_truth(dataset.records, dataset.class_names)
    found = []
    for image_id, (record, rows) in enumerate(zip(dataset.records, detections)):
        found.extend(coco_detections(image_id, rows, record.width, record.height))
    return coco_eval(ground_truth, found, results_json=results_json)


def evaluate_voc(model, arg_params, aux_params, dataset, **predict_options):
    """Predict on ``dataset`` and return :func:`voc_scores`."""
    return voc_scores(dataset, predict(model, arg_params, aux_params, dataset,
                                       **predict_options))
