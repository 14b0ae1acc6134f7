"""``zoo benchmark-photos`` (zoo_bench.large_photos) at tiny sizes: every subject runs ``zoo
detect`` (or GluonCV) on the same photos and gets a row of figures and its ratio; each
process's peak memory is its own; the profile sees the work of every thread. No timing is
asserted: the figures are only sane."""
import os
import re
import subprocess
import sys
import threading

import pytest
from PIL import Image

from zoo.errors import OptionsError
from zoo_bench import large_photos
from zoo_bench.large_photos import PhotosBenchmarkOptions, part_seconds, profile_threads

ROW = re.compile(r"^(zoo-fp32|zoo-int8|gluoncv) +([-\d.]+) +([-\d.]+) +([-\d.]+) +(\d+) "
                 r"+(\d+|-) +([\d.]+x|-)$", re.M)


@pytest.mark.slow  # minutes: three subjects, each a few processes loading MXNet and a model
def test_each_subject_gets_a_row_its_ratio_to_gluoncv_and_the_zoos_a_profile(tmp_path):
    out = tmp_path / "bench"
    done = subprocess.run(
        [sys.executable, "-m", "zoo", "benchmark-photos", "--num-images", "3",
         "--image-size", "320x240", "--network", "faster_rcnn_fpn_mobilenetv2",
         "--data-shape", "128", "--max-size", "160", "--output-dir", str(out)],
        capture_output=True, text=True, timeout=1800)
    assert done.returncode == 0, done.stderr[-3000:]
    text = done.stdout
    assert "3 photo(s) of 320x240 (as stored), input short side 128" in text, text
    assert "VNNI: " in text and "DNNL_MAX_CPU_ISA=None" in text, text
    rows = {row[0]: row[1:] for row in ROW.findall(text)}
    assert list(rows) == ["zoo-fp32", "zoo-int8", "gluoncv"], text
    per_photo = {}
    for subject, (total, one, each, peak, _, ratio) in rows.items():
        assert float(total) > 0 and float(one) > 0 and int(peak) > 100, (subject, text)
        # (total - the first two's) over the one photo more, rounded
        assert float(each) == pytest.approx(float(total) - float(one), abs=0.011)
        per_photo[subject] = float(each), ratio
    gluoncv = per_photo["gluoncv"][0]
    for subject, (each, ratio) in per_photo.items():
        if min(each, gluoncv) > 0:  # else under the noise, as the table says
            assert float(ratio[:-1]) == pytest.approx(gluoncv / each, rel=0.02, abs=0.01)
        else:
            assert ratio == "-" and "under the noise" in text
    # the same photos for all, every other one turned as a phone stores portraits
    photos = sorted(os.listdir(out / "photos"))
    assert len(photos) == 3
    assert [Image.open(out / "photos" / name).getexif().get(0x0112) for name in photos] \
        == [None, 6, None]
    for subject in ("zoo-fp32", "zoo-int8"):
        assert sorted(os.listdir(out / "runs" / ("%s-3" % subject))) == [
            "crops", "pictures", "results.json", "results.jsonl"]
        profile = re.search(r"^where %s's time goes .*$" % subject, text, re.M)
        assert profile, text
        for part, _ in large_photos.PARTS:
            assert re.search(r"%s [\d.]+ s \(\d+%%\)" % part, profile.group(0)), profile
        assert float(re.search(r"network ([\d.]+) s", profile.group(0)).group(1)) > 0
    assert "where gluoncv's" not in text


def test_the_table_gives_each_subject_its_ratio_to_gluoncvs_seconds_per_photo():
    figures = large_photos.SubjectFigures
    lines = large_photos.table_lines({
        "zoo-fp32": figures(30.0, 6.0, 24.0 / 7, 2000.0, 12),
        "zoo-int8": figures(20.0, 6.0, 2.0, 1500.0, 11),
        "gluoncv": figures(62.0, 6.0, 8.0, 3000.0, None)}, 8)
    rows = {row[0]: row[1:] for row in ROW.findall("\n".join(lines))}
    assert rows == {"zoo-fp32": ("30.00", "6.00", "3.429", "2000", "12", "2.33x"),
                    "zoo-int8": ("20.00", "6.00", "2.000", "1500", "11", "4.00x"),
                    "gluoncv": ("62.00", "6.00", "8.000", "3000", "-", "1.00x")}
    assert "under the noise" not in "\n".join(lines)
    noisy = large_photos.table_lines({"zoo-fp32": figures(5.0, 6.0, -1.0, 900.0, 0),
                                      "gluoncv": figures(9.0, 6.0, 3.0, 900.0, 0)}, 2)
    assert ROW.findall("\n".join(noisy))[0][-1] == "-" and "under the noise" in noisy[-1]


def test_the_peak_memory_of_each_process_is_its_own(tmp_path):
    """A small process after a large one has a small peak (not the largest so far, as
    RUSAGE_CHILDREN would give)."""
    big = [sys.executable, "-c", "b = bytearray(300 * 2**20); b[::4096] = b'x' * len(b[::4096])"]
    small = [sys.executable, "-c", "pass"]
    _, big_mb = large_photos.timed_process(big, dict(os.environ), str(tmp_path / "big.log"))
    wall, small_mb = large_photos.timed_process(small, dict(os.environ),
                                                str(tmp_path / "small.log"))
    assert big_mb > 300 and small_mb < 60 and wall > 0
    with pytest.raises(RuntimeError, match="exit 3"):
        large_photos.timed_process([sys.executable, "-c", "import sys; sys.exit(3)"],
                                   dict(os.environ), str(tmp_path / "fails.log"))


FAKE_ZOO = '''
import time

def photo():
    time.sleep(0.2)

def launch():
    time.sleep(0.3)

def crop():
    time.sleep(0.05)

def save_image():
    time.sleep(0.1)
'''


def fake_module(path):
    """Functions whose code claims to be of the zoo's file ``path``, as cProfile keys them."""
    namespace = {}
    exec(compile(FAKE_ZOO, os.path.join("/checkout", path), "exec"), namespace)
    return namespace


def test_the_profile_sees_every_thread_and_takes_crops_out_of_writing(tmp_path):
    runner = fake_module("zoo/inference/runner.py")
    engine = fake_module("zoo/inference/detector.py")
    visualize = fake_module("zoo/inference/visualize.py")
    detect = fake_module("zoo/jobs/detect.py")
    exec(compile("def write_crop(crop, save_image):\n    crop()\n    save_image()\n",
                 "/checkout/zoo/jobs/detect.py", "exec"), detect)

    def job():
        worker = threading.Thread(target=runner["photo"])  # decoding, on a worker
        writer = threading.Thread(target=lambda: (visualize["save_image"](),
                                                  detect["write_crop"](
                                                      detect["crop"],
                                                      visualize["save_image"])))
        worker.start()
        writer.start()
        engine["launch"]()
        worker.join()
        writer.join()
        return "done"

    path = str(tmp_path / "stats.prof")
    assert profile_threads(path, job) == "done"
    import pstats
    seconds = part_seconds(pstats.Stats(path))
    assert list(seconds) == [part for part, _ in large_photos.PARTS]
    assert seconds["decode"] == pytest.approx(0.2, abs=0.15)
    assert seconds["network"] == pytest.approx(0.3, abs=0.15)
    assert seconds["crops"] == pytest.approx(0.15, abs=0.1)  # cut out and encoded
    assert seconds["writing"] == pytest.approx(0.1, abs=0.08)  # the picture alone
    assert seconds["drawing"] == seconds["load model"] == 0


def test_options_are_checked(tmp_path):
    with pytest.raises(OptionsError, match="subjects must be"):
        PhotosBenchmarkOptions(subjects=("zoo-fp32", "tensorflow"))
    with pytest.raises(OptionsError, match="at least 3 photos"):
        PhotosBenchmarkOptions(num_images=2)
    photo = tmp_path / "one.jpg"
    Image.new("RGB", (64, 48)).save(photo)
    with pytest.raises(OptionsError, match="at least 3 photos"):
        PhotosBenchmarkOptions(images=[str(photo)])
    with pytest.raises(OptionsError, match="no such file"):
        PhotosBenchmarkOptions(images=[str(photo), str(photo), str(tmp_path / "missing.jpg")])
    with pytest.raises(OptionsError, match="unknown|registered"):
        PhotosBenchmarkOptions(network="nope")
    assert PhotosBenchmarkOptions(images=[str(photo)] * 3).images == (str(photo),) * 3
