"""Check a dataset before training on it: the data census of its training and validation
splits and the pictures of the first batches the network would get, exactly as ``zoo
train`` with the same flags would start (:mod:`zoo.engine.health`), without training."""
import os
from dataclasses import dataclass, fields
from typing import Optional, Tuple

from zoo.engine.health.report import HealthReport
from zoo.flags import REQUIRED, field_of, flag, options_from, positive_int
from zoo.flags import network as network_name  # "network" is the field's name
from zoo.jobs.train_options import TrainOptions
from zoo.schema.preprocessing import input_size

__all__ = ["CheckDataOptions", "CheckDataResult", "check_data"]


@dataclass(frozen=True)
class CheckDataOptions:
    """The data flags of :class:`~zoo.jobs.train_options.TrainOptions` (its fields, flags and
    defaults), the model whose input the batches are drawn for, and how many batches to
    draw."""
    network: str = flag(REQUIRED, "registered model name or YAML config path: the model whose "
                                  "input the batches are drawn for", type=network_name)
    dataset: str = field_of(TrainOptions, "dataset")
    data_root: str = field_of(TrainOptions, "data_root")
    train_split: str = field_of(TrainOptions, "train_split")
    val_split: str = field_of(TrainOptions, "val_split")
    data_shape: Optional[int] = field_of(TrainOptions, "data_shape")
    batch_size: Optional[int] = field_of(TrainOptions, "batch_size")
    max_expand: float = field_of(TrainOptions, "max_expand")
    crop: bool = field_of(TrainOptions, "crop")
    fit_anchors: bool = field_of(TrainOptions, "fit_anchors")
    seed: int = field_of(TrainOptions, "seed")
    skip_bad: bool = field_of(TrainOptions, "skip_bad")
    max_skipped: float = field_of(TrainOptions, "max_skipped")
    annotations: Optional[str] = field_of(TrainOptions, "annotations")
    image_dir: Optional[str] = field_of(TrainOptions, "image_dir")
    data_threads: Optional[int] = field_of(TrainOptions, "data_threads")
    output_dir: str = flag(os.path.join("output", "check-data"),
                           "folder of the pictures train_batch0.png, ...")
    batches: int = flag(3, "first batches of the first epoch to draw", type=positive_int)

    @classmethod
    def from_flags(cls, args, **values):
        """The options of ``zoo check-data``'s parsed flags, those of ``values`` given."""
        return options_from(cls, args, **values)

    def train_options(self):
        """The :class:`TrainOptions` of a run on this data (its other settings default)."""
        shared = {f.name for f in fields(TrainOptions)} & {f.name for f in fields(self)}
        return TrainOptions(**{name: getattr(self, name) for name in shared})


@dataclass(frozen=True)
class CheckDataResult:
    lines: Tuple[str, ...]               # the census lines, then the first batch's
    pictures: Tuple[str, ...]            # train_batch0.png, ...
    warnings: Tuple[str, ...]            # the census warnings issued


def check_data(options):
    """Take the census and draw the first ``batches`` batches of the first epoch; raises
    :class:`zoo.errors.DataError` where ``zoo train`` would refuse the data, or its first
    batch (no object, or no positive anchor)."""
    # Imported here, as zoo train's job: they load MXNet, which the options do without.
    from zoo.engine.health.first_batch import draw_batch, picture_path
    from zoo.jobs.train import (build_train_model, data_census, data_split, fit_anchors,
                                open_data, training_batch, training_items, training_loader)
    train_options = options.train_options()
    train_set, val_set = open_data(train_options)
    health = HealthReport()
    model = build_train_model(train_options, train_set.class_names)
    # the batches zoo train would draw: its default batch too
    train_options, _ = training_batch(train_options, model, train_set)
    model, fit_line = fit_anchors(train_options, model, train_set, health)
    lines = [fit_line] if fit_line else []
    lines += data_census(train_options, model, train_set, val_set, health)
    loader = training_loader(train_options, model, training_items(train_options, train_set))
    name = str(data_split(train_options, options.train_split))
    pictures = []
    for index, batch in zip(range(options.batches), loader.epoch(0)):
        pictures.append(draw_batch(batch, model.preprocessing(), model.config["class_names"],
                                   picture_path(options.output_dir, index)))
        if index == 0:
            lines.append(first_batch_line(model, batch, train_set, name, pictures[0],
                                          loader.max_objects))
    return CheckDataResult(lines=tuple(lines), pictures=tuple(pictures),
                           warnings=tuple(w["message"] for w in health.warnings))


def first_batch_line(model, batch, train_set, name, picture, max_objects):
    """The first batch checked as training checks it, in one line."""
    from zoo.engine.health.first_batch import (CHECK, check_objects, check_positives,
                                               forward_positive_anchors)
    objects, annotated = check_objects(batch, train_set, name, picture)
    positives = forward_positive_anchors(model, batch, max_objects)
    check_positives(positives, objects, model, name, picture)
    return "%s: %d images, %d of their %d annotated boxes in the %s input%s" % (
        CHECK, len(batch.indices) - batch.pad, objects, annotated,
        input_size(model.preprocessing()),
        "" if positives is None else ", %d positive anchors for %s" % (positives, model.name))
