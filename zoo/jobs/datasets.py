"""The dataset a job runs an artifact on: its classes must be the artifact's, in order, or
be matched to a subset of them by an explicit class map."""
import os
from dataclasses import dataclass
from typing import Optional

import numpy as np

from zoo.data.factory import COCO_ANNOTATIONS, COCO_IMAGES, coco_path, open_dataset
from zoo.errors import DataError, OptionsError

__all__ = ["DataSplit", "checkpoint_name", "class_lookup", "first_images", "open_for_artifact",
           "relabel"]


@dataclass(frozen=True)
class DataSplit:
    """The dataset split a job reads: its kind (``voc``, ``coco``, ``rec``), root folder and
    split, whether bad items are skipped, the threads that check them and, for COCO, the
    annotation file and image folder (``{split}`` stands for the split; None: the default
    layout under the root)."""
    kind: str
    root: str
    split: str
    skip_bad: bool = False
    threads: Optional[int] = None
    annotations: Optional[str] = None
    image_dir: Optional[str] = None

    def __str__(self):
        """``kind:root/split``, or ``coco:FILE`` of a named COCO annotation file, as messages
        and results name it."""
        if self.annotations:
            return "%s:%s" % (self.kind, self.annotations.replace("{split}", self.split))
        return "%s:%s/%s" % (self.kind, self.root, self.split)

    def files(self):
        """What this split reads, as absolute real paths (the same data by any name): a COCO
        split's annotation file and image folder, else the root folder and the split."""
        if self.kind == "coco":
            return {"annotations": real(coco_path(self.annotations, self.root, COCO_ANNOTATIONS,
                                                  self.split)),
                    "images": real(coco_path(self.image_dir, self.root, COCO_IMAGES,
                                             self.split))}
        return {"root": real(self.root), "split": self.split}

    def open(self):
        """The dataset of this split."""
        return open_dataset(self.kind, self.root, self.split, self.skip_bad, self.annotations,
                            self.image_dir)


def real(path):
    return os.path.realpath(path) if path is not None else None


def first_images(dataset, count):
    """The first ``count`` images of ``dataset`` (what int8 calibrates on): files, or decoded
    where the dataset keeps them in a record file."""
    return [dataset.image_path(i) or dataset[i][0] for i in range(min(count, len(dataset)))]


def checkpoint_name(checkpoint, epoch):
    """How messages name a checkpoint: ``PREFIX-NNNN`` for an artifact's epoch, a deployed
    file (``epoch`` None) by its path."""
    return checkpoint if epoch is None else "%s-%04d" % (checkpoint, epoch)


def open_for_artifact(split, class_names, source, class_map=None):
    """The dataset of ``split`` (a :class:`DataSplit`) and the artifact label of each dataset
    class (see :func:`class_lookup`): ``class_names`` are the artifact's (or deployed
    file's), ``source`` its :func:`checkpoint_name`. With ``skip_bad`` every image is
    decoded first and the bad ones dropped (one warning with the count), since the job's
    loader stops at a bad image; without it that first bad image already stops the job with
    one line."""
    dataset = split.open()
    lookup = class_lookup(split, list(dataset.class_names), class_names, source, class_map)
    if split.skip_bad:
        dataset.verify(skip_bad=True, num_workers=split.threads)
    return dataset, lookup


def class_lookup(split, names, artifact_names, source, class_map=None):
    """For each artifact label, the dataset class id it scores as (-1: its detections are
    dropped).

    With ``class_map`` None the dataset's classes must be the artifact's, the same
    names in the same order, else class ids would pair unrelated classes (wrong APs under
    the wrong names, or a calibration on other objects). A class map, pairs ``(dataset
    class, artifact class)``, matches each dataset class to the artifact class it names, or
    else to the artifact class of the same name: for a dataset of a subset of the classes,
    or of renamed ones.
    """
    artifact_names = list(artifact_names)
    if class_map is None:
        if names != artifact_names:
            raise DataError("%s: classes %s are not those of %s, %s (the same names in the "
                            "same order are needed, or a class map: --class-map '' matches "
                            "them by name)" % (split, names, source, artifact_names))
        return np.arange(len(names))
    renamed = dict(class_map)
    for dataset_class, artifact_class in class_map:
        if dataset_class not in names:
            raise OptionsError("class map %s=%s: %r is not a class of %s %s" % (
                dataset_class, artifact_class, dataset_class, split, names))
        if artifact_class not in artifact_names:
            raise OptionsError("class map %s=%s: %r is not a class of %s %s" % (
                dataset_class, artifact_class, artifact_class, source, artifact_names))
    lookup = np.full(len(artifact_names), -1)
    for index, name in enumerate(names):
        match = renamed.get(name, name)
        if match not in artifact_names:
            raise DataError("%s: class %r is not a class of %s %s: map it to one with "
                            "%s=CLASS" % (split, name, source, artifact_names,
                                          name))
        label = artifact_names.index(match)
        if lookup[label] >= 0:
            raise OptionsError("class map: %s's class %r is matched by both %r and %r" % (
                source, match, names[lookup[label]], name))
        lookup[label] = index
    return lookup


def relabel(detections, lookup):
    """Detection rows ``[class, score, ...]`` with artifact labels turned into dataset
    class ids by ``lookup``; rows of unmatched classes removed."""
    result = []
    for rows in detections:
        labels = lookup[rows[:, 0].astype(np.int64)]
        kept = rows[labels >= 0].copy()
        kept[:, 0] = labels[labels >= 0]
        result.append(kept)
    return result
