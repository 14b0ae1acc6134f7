"""The data of ``zoo benchmark-parity`` (:mod:`zoo_bench.parity`): the embedded generator's
images, made once under the work folder, and anchors fitted to their training boxes, which
both sides of the Faster R-CNN comparison then build their network with."""
import functools
import os

__all__ = ["fitted_anchors", "generate_data"]


def generate_data(options):
    """The embedded data set of ``options`` (its preset, counts and seed), generated once
    under the work folder; returns its root."""
    from zoo.data import embedded
    root = os.path.join(options.work_dir, "data_%s_%d" % (options.preset, options.num_train))
    return embedded.generate(root, seed=options.data_seed, num_train=options.num_train,
                             num_val=options.num_val, preset=options.preset)


def fitted_anchors(options, config, classes, **fields):
    """``{"anchor_scales": ..., "anchor_ratios": ...}`` of the zoo config ``config`` (for
    ``classes``, ``fields`` changed) fitted to the training boxes of ``options``'s data at
    its input, as ``zoo train --fit-anchors`` fits them (:meth:`zoo.model.DetectionModel.
    with_fitted_anchors`): the same number of each, so the network's shapes stay."""
    return dict(_fitted(generate_data(options), config, tuple(classes),
                        tuple(sorted(fields.items()))))


@functools.lru_cache(maxsize=None)
def _fitted(root, config, classes, fields):
    # A seed asks several times (GluonCV's network, the import, each epoch's import): once.
    from zoo.data.factory import open_dataset
    from zoo.engine.health.census import box_sides
    from zoo.model import get_model
    model = get_model(config, num_classes=len(classes), class_names=list(classes),
                      **dict(fields))
    fitted = model.with_fitted_anchors(box_sides(open_dataset("voc", root, "train"),
                                                 model.preprocessing()))
    return tuple((name, fitted.config[name]) for name in ("anchor_scales", "anchor_ratios"))
