"""A seeded training run is reproducible on one machine: the same seed gives the same epoch
lines and the same parameters, bit for bit, whatever else runs beside it and however many
threads decode the data (docs/training.md, "Reproducibility"). Through ``zoo train`` as a
user runs it, progress bar on."""
import csv
import multiprocessing
import os
import subprocess
import sys

import pytest

from factories import ROOT

# Two trainings, the second beside two CPU-bound processes: it would take both cores from
# the other worker of `make test`, so it runs in `make test-accuracy` (as CI does).
pytestmark = pytest.mark.accuracy
# Two OpenMP threads, as the zoo picks on this 2-core machine: the threads split the work
# and the run must not depend on how busy each is.
ENV = dict(os.environ, PYTHONPATH=ROOT, OMP_NUM_THREADS="2")
TIMING = ("samples_per_sec",)


def _burn(stop):
    while not stop.is_set():
        sum(i * i for i in range(10000))


def _train(shapes, output, data_threads):
    done = subprocess.run(
        [sys.executable, "-m", "zoo", "train", "--network", "ssd_mobilenetv2_stride8",
         "--dataset", "voc", "--data-root", shapes, "--data-shape", "128",
         "--batch-size", "4", "--epochs", "2", "--seed", "7", "--data-threads",
         str(data_threads), "--output-dir", output],
        cwd=ROOT, env=ENV, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    prefix = os.path.join(output, "ssd_mobilenetv2_stride8")
    with open(prefix + "-log.csv") as f:
        rows = [{k: v for k, v in row.items() if k not in TIMING} for row in csv.DictReader(f)]
    with open(prefix + "-0002.params", "rb") as f:
        return rows, f.read()


def test_seeded_run_is_identical_quiet_busy_and_with_any_data_threads(shapes, tmp_path):
    quiet = _train(shapes, str(tmp_path / "quiet"), data_threads=1)
    stop = multiprocessing.Event()
    burners = [multiprocessing.Process(target=_burn, args=(stop,)) for _ in range(2)]
    for burner in burners:
        burner.start()
    try:
        busy = _train(shapes, str(tmp_path / "busy"), data_threads=3)
    finally:
        stop.set()
        for burner in burners:
            burner.join()
    assert len(quiet[0]) == 2 and quiet[0][-1]["val_map"]
    assert busy[0] == quiet[0]
    assert busy[1] == quiet[1], "the parameters differ after the same seeded training"
