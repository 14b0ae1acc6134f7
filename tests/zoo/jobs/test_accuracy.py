"""``make test-accuracy``: each recipe of :mod:`zoo.jobs.recipes` trains from scratch on the
embedded data and its held-out VOC07 mAP must lie in the recipe's measured band
(Detectron2's ``training_acc_test``). A recipe that lost a few points (a loss scaled, anchor
variances swapped, a default changed) fails here, where the unit tests would not notice.

The SSD recipe runs as ``make demo`` runs it (``zoo quickstart``), whose line must say that
its figure is inside the band; the Faster R-CNN ones through :func:`run_recipe`.
"""
import re

import pytest

from zoo.jobs.recipes import RECIPES, run_recipe

pytestmark = pytest.mark.accuracy


def test_make_demo_lies_in_its_band(demo_run):
    _, done = demo_run
    assert done.returncode == 0, done.stderr[-3000:]
    line = re.search(r"held-out VOC07 mAP ([0-9.]+): (\w+) its band .*, "
                     r"COCO AP ([0-9.]+): (\w+) its band", done.stdout)
    assert line, done.stdout[-3000:]
    print(line.group(0))
    ssd = RECIPES["ssd"]
    assert line.group(2) == line.group(4) == "inside", line.group(0)
    assert ssd.band.holds(float(line.group(1))) and ssd.coco_band.holds(float(line.group(3)))
    assert "outside the band" not in done.stderr


@pytest.mark.parametrize("name", [n for n in RECIPES if n != "ssd"])
def test_recipe_lies_in_its_band(name, tmp_path):
    result = run_recipe(name, str(tmp_path), seed=0)
    print(result.line(RECIPES[name]))
    assert result.holds(RECIPES[name]), result.line(RECIPES[name])
