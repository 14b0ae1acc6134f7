"""``zoo benchmark-serve`` in a smoke run through its command line: every mode at two
numbers of clients, side by side."""
import subprocess
import sys

import pytest

from factories import ROOT
from test_serve import free_port

pytest.importorskip("ray.serve", reason="zoo benchmark-serve needs the ray extra")


@pytest.mark.slow
def test_a_smoke_run_prints_every_mode_side_by_side(tmp_path):
    done = subprocess.run(
        [sys.executable, "-m", "zoo", "benchmark-serve", "--clients", "1,2", "--requests", "4",
         "--num-images", "2", "--image-size", "160x120", "--data-shape", "128",
         "--work-dir", str(tmp_path), "--port", str(free_port())],
        capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    table = done.stdout.splitlines()[-3:]
    assert table[0].startswith("clients") and "batching/none" in table[0]
    for clients, line in zip((1, 2), table[1:]):
        cells = line.split("|")
        assert int(cells[0]) == clients and len(cells) == 6, line
        figures = [float(value) for cell in cells[1:4] for value in cell.split()]
        assert len(figures) == 9 and min(figures) > 0, line
