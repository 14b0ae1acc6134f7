"""The config checker behind ``zoo check``: build and validate every registered model at
every supported data shape, one table row per build."""
import os

from zoo.config.loading import load_config, validate
from zoo.errors import ConfigError
from zoo.model import build_model
from zoo.config.loading import configs_dir
from zoo.config.registry import list_models

__all__ = ["COLUMNS", "check_files", "format_table", "registered_config_files"]

COLUMNS = ("model", "input", "trainable params", "params MB", "feature maps (HxW/stride)",
           "anchors")


def check_config(raw):
    """Rows for every supported shape of one raw config; raises ConfigError on the first fault."""
    rows = []
    for spec in validate(raw):  # every field at every shape, before any graph is built
        model = build_model(raw, data_shape=spec["data_shape"])
        params = model.num_params()
        maps, anchors = model.describe()
        side = "x".join(str(s) for s in model.input_shapes()["data"][2:])
        rows.append((model.name, side, "{:,}".format(params), "%.1f" % (params * 4 / 1e6), maps,
                     "{:,}".format(anchors)))
    return rows


def format_table(rows):
    widths = [max(len(str(r[i])) for r in [COLUMNS] + rows) for i in range(len(COLUMNS))]
    lines = ["  ".join(str(v).ljust(w) for v, w in zip(row, widths)).rstrip()
             for row in [COLUMNS] + rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def registered_config_files():
    return [os.path.join(configs_dir(), name + ".yaml") for name in list_models()]


def check_files(paths):
    """``(rows, failures)`` of the YAML files ``paths``: the table rows of those that build
    at every shape, one line per file that does not."""
    rows, failures = [], []
    for path in paths:
        try:
            rows.extend(check_config(load_config(path)))
        except (ConfigError, OSError) as err:
            failures.append("FAIL %s" % err)
    return rows, failures
