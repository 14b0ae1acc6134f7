"""``zoo benchmark-cluster`` (zoo_bench.cluster) at a tiny size: ``zoo detect`` and ``zoo detect
--ray`` on local clusters of 1 and 2 nodes each get a row of figures and a ratio to ``zoo
detect``'s photos/s, and detect the same. No timing is asserted: the figures are only sane."""
import re
import subprocess
import sys

import pytest

from zoo_bench.cluster import table_lines
from zoo_bench.large_photos import SubjectFigures

ROW = re.compile(r"^(detect|ray-\d) +([\d.]+) +([\d.]+) +([\d.]+|-) +(\d+) +(\d+|-) "
                 r"+([\d.]+x|-)$", re.M)


@pytest.mark.slow  # minutes: six processes, four of them starting Ray actors
def test_each_cluster_gets_a_row_beside_zoo_detect_and_detects_the_same(detect_prefix,
                                                                        tmp_path):
    pytest.importorskip("ray")
    done = subprocess.run(
        [sys.executable, "-m", "zoo", "benchmark-cluster", "--checkpoint", detect_prefix,
         "--num-images", "4", "--image-size", "160x120", "--output-dir",
         str(tmp_path / "bench")], capture_output=True, text=True, timeout=1200)
    assert done.returncode == 0, done.stderr[-3000:]
    rows = {row[0]: row[1:] for row in ROW.findall(done.stdout)}
    assert list(rows) == ["detect", "ray-1", "ray-2"], done.stdout
    assert len({row[4] for row in rows.values()}) == 1  # the same detections
    assert rows["detect"][5] == "1.00x"


def test_the_table_gives_each_cluster_its_photos_per_second_and_ratio():
    figures = {"detect": SubjectFigures(10.0, 4.0, 0.5, 300, 7),
               "ray-1": SubjectFigures(20.0, 10.0, 1.0, 400, 7),
               "ray-2": SubjectFigures(15.0, 10.0, 0.25, 400, 7)}
    rows = {row[0]: row[1:] for row in ROW.findall("\n".join(table_lines(figures, 14, 1)))}
    assert {subject: (row[2], row[5]) for subject, row in rows.items()} == {
        "detect": ("2.00", "1.00x"), "ray-1": ("1.00", "0.50x"), "ray-2": ("4.00", "2.00x")}
