"""The dataset a job runs an artifact on: its classes must be the artifact's, in order, or
be matched to a subset of them by an explicit class map."""
import numpy as np

from ..data.factory import open_dataset
from ..errors import DataError, OptionsError


def data_name(options):
    """``kind:root/split`` of the options' dataset, as messages and results name it."""
    return "%s:%s/%s" % (options.dataset, options.data_root, options.split)


def open_for_artifact(options, loaded):
    """The split ``options`` name (``dataset``, ``data_root``, ``split``, ``skip_bad``,
    ``class_map``, ``data_threads``) and the artifact label of each dataset class (see
    :func:`class_lookup`). With ``skip_bad`` every image is decoded first and the bad ones
    dropped (one warning with the count), since the job's loader stops at a bad image;
    without it that first bad image already stops the job with one line."""
    dataset = open_dataset(options.dataset, options.data_root, options.split, options.skip_bad)
    lookup = class_lookup(options, list(dataset.class_names), loaded)
    if options.skip_bad:
        dataset.verify(skip_bad=True, num_workers=options.data_threads)
    return dataset, lookup


def class_lookup(options, names, loaded):
    """For each artifact label, the dataset class id it scores as (-1: its detections are
    dropped).

    With ``options.class_map`` None the dataset's classes must be the artifact's, the same
    names in the same order, else class ids would pair unrelated classes (wrong APs under
    the wrong names, or a calibration on other objects). A class map, pairs ``(dataset
    class, artifact class)``, matches each dataset class to the artifact class it names, or
    else to the artifact class of the same name: for a dataset of a subset of the classes,
    or of renamed ones.
    """
    artifact_names = list(loaded.class_names)
    source = (loaded.prefix if loaded.epoch is None  # a deployed file
              else "%s-%04d" % (loaded.prefix, loaded.epoch))
    if options.class_map is None:
        if names != artifact_names:
            raise DataError("%s: classes %s are not those of %s, %s (the same names in the "
                            "same order are needed, or a class map)"
                            % (data_name(options), names, source, artifact_names))
        return np.arange(len(names))
    renamed = dict(options.class_map)
    for dataset_class, artifact_class in options.class_map:
        if dataset_class not in names:
            raise OptionsError("class map %s=%s: %r is not a class of %s %s" % (
                dataset_class, artifact_class, dataset_class, data_name(options), names))
        if artifact_class not in artifact_names:
            raise OptionsError("class map %s=%s: %r is not a class of %s %s" % (
                dataset_class, artifact_class, artifact_class, source, artifact_names))
    lookup = np.full(len(artifact_names), -1)
    for index, name in enumerate(names):
        match = renamed.get(name, name)
        if match not in artifact_names:
            raise DataError("%s: class %r is not a class of %s %s: map it to one with "
                            "%s=CLASS" % (data_name(options), name, source, artifact_names,
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
