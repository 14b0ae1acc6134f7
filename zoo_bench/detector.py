"""Images/s through :class:`zoo.Detector` and through the ``zoo detect`` job (image files in,
decoding included; the job also draws and writes the pictures and the results JSON) against
the pure-inference images/s of the same graph at the same batch size, in one process; and
(:func:`batch_sweep`) seconds per image at several batch sizes on images of mixed
orientations, to show that a larger batch is never slower per image; and
(:func:`busy_detect`) the wall time of ``zoo detect`` as a command beside CPU-bound
processes on two cores against its quiet time: its decoding and writing threads run at
normal priority, so it must get near a fair share of the cores, never starve.

Pure inference is the detector's own :class:`zoo.predictor.Predictor` run on batches
already decoded and preprocessed in memory: the ratio of the two is what decoding,
preprocessing and post-processing cost once they overlap inference. Runs of the two
alternate, and the best of each is reported, so that other load on the machine hurts
neither more than the other. The CPU time that work takes, measured with the graph's passes
taken out (:func:`added_cpu_seconds`), gives the ratio it leaves when it runs beside no
pass (:func:`ceiling`), spread over every core or on one. Only cycles the graph's own
threads leave unused let a run beat the first; where the graph fills every core, runs come
out near the second or a little under it (the second assumes the passes run as fast
beside that work as alone).
"""
import contextlib
import os
import shutil
import statistics
import subprocess
import sys
import time
import cv2
import numpy as np

from zoo import artifact
from zoo.data import embedded
from zoo.data.images import read_image
from zoo.inference.detector import Detector, load_detector
from zoo.inference.runner import ImageList
from zoo.jobs.detect import DetectOptions, detect
from zoo_bench.options import BUSY_CORES, DetectorBenchmarkOptions  # defined without MXNet
from zoo_bench.timing import environment, machine_line, seconds
from zoo.errors import DataError, OptionsError
from zoo.model import get_model

__all__ = ["BUSY_CORES", "DetectorBenchmarkOptions", "batch_sweep", "benchmark_detector",
           "busy_detect", "busy_report", "report", "sweep_report"]

BUSY_TARGET, BUSY_LIMIT = 3.0, 6.0
"""Busy wall time against quiet: about a fair share (four busy processes and the job's
threads on two cores), and at most twice that."""
SKIPS_NAMED = 5
"""Skipped files named in the report; the rest are counted."""
OPENMP_SETTINGS = ("OMP_NUM_THREADS", "OMP_WAIT_POLICY", "GOMP_SPINCOUNT")
"""The environment the ratios depend on: how long MXNet's OpenMP threads spin after a
parallel region decides whether the decoding threads get the second core between passes
(BENCHMARKS.md)."""


def make_detector(options):
    """The detector under test: the checkpoint's, or the network's with random weights."""
    if options.checkpoint is not None:
        return load_detector(options.checkpoint)
    overrides = {} if options.data_shape is None else {"data_shape": options.data_shape}
    model = get_model(options.network, **overrides)
    model.init_params(seed=0)
    return Detector.from_model(model)


def image_paths(options):
    """``(paths, skipped)``: the image files to detect on, ``image_dir``'s or freshly
    generated ones, and ``"name: reason"`` of each file of the folder that is not a
    readable image."""
    folder = options.image_dir
    if folder is None and options.mixed_orientations:
        folder = mixed_images(os.path.join(options.work_dir, "mixed"), options.num_images,
                              options.image_size)
    elif folder is None:
        root = os.path.join(options.work_dir, "shapes")
        embedded.generate(root, num_train=options.num_images, num_val=0,
                          image_size=options.image_size)
        folder = os.path.join(root, "JPEGImages")
    try:
        names = sorted(os.listdir(folder))
    except OSError as err:
        raise OptionsError("--images %s: cannot list the folder: %s"
                           % (folder, err.strerror or err))
    paths, skipped = [], []
    for name in names:
        path = os.path.join(folder, name)
        if not os.path.isfile(path):
            continue  # subfolders are not searched
        problem = unreadable_image(path)
        if problem:
            skipped.append("%s: %s" % (name, problem))
        else:
            paths.append(path)
    if not paths:
        raise OptionsError("--images %s: no readable image files%s"
                           % (folder, " (%s)" % named(skipped) if skipped else ""))
    return paths, skipped


def unreadable_image(path):
    """Why ``path`` is not an image the detector reads (decoded once to know), or None."""
    try:
        read_image(path)
    except DataError as err:
        return str(err).replace(path + ": ", "", 1)
    return None


def named(skipped):
    """The first :data:`SKIPS_NAMED` skipped files, and how many more."""
    more = len(skipped) - SKIPS_NAMED
    return "; ".join(skipped[:SKIPS_NAMED]) + (" and %d more" % more if more > 0 else "")


def mixed_images(folder, count, long_side):
    """``count`` JPEGs of smooth random content in ``folder`` (made afresh), landscape and
    portrait in turn at four aspect ratios, ``long_side`` pixels on their long side, odd
    sizes included, as a phone's folder mixes them."""
    shutil.rmtree(folder, ignore_errors=True)
    os.makedirs(folder)
    rng = np.random.RandomState(0)
    for index in range(count):
        short = int(long_side * (0.5, 0.6, 0.75, 0.8)[index // 2 % 4]) | 1
        height, width = (short, long_side) if index % 2 == 0 else (long_side, short)
        small = rng.randint(0, 256, (max(2, height // 16), max(2, width // 16), 3), np.uint8)
        cv2.imwrite(os.path.join(folder, "%04d.jpg" % index),
                    cv2.resize(small, (width, height), interpolation=cv2.INTER_CUBIC))
    return folder


def preprocessed_inputs(detector, paths, batch_size):
    """The graph's inputs for every batch of ``paths``, decoded and preprocessed ahead."""
    return [detector.model.input_arrays(batch.data, batch.im_info)
            for batch in detector.runner.batches(ImageList(paths), batch_size)]


class CachedRows:
    """An engine giving each batch shape the rows ``engine`` gave its first batch: passes that
    cost nothing, so that a run's CPU time is what it adds to inference."""

    def __init__(self, engine):
        self.engine = engine
        self.rows = {}

    def launch(self, data, im_info):
        if data.shape not in self.rows:
            self.rows[data.shape] = self.engine.fetch(self.engine.launch(data, im_info))
        return self.rows[data.shape]

    def fetch(self, rows):
        return rows


@contextlib.contextmanager
def without_inference(detector):
    """The detector's runner on :class:`CachedRows` of its engine inside the block."""
    engine = detector.runner.engine
    detector.runner.engine = CachedRows(engine)
    try:
        yield
    finally:
        detector.runner.engine = engine


def added_cpu_seconds(detector, runs, *functions):
    """Per function, the CPU seconds (every thread's, best of ``runs``) of one call with the
    graph's passes taken out (:func:`without_inference`): decoding, preprocessing, batching
    and post-processing, and for the ``zoo detect`` job its pictures and JSON."""
    def cpu(function):
        start = time.process_time()
        function()
        return time.process_time() - start
    with without_inference(detector):
        for function in functions:  # warm-up: fills CachedRows
            function()
        return [min(cpu(function) for _ in range(runs)) for function in functions]


def ceiling(inference_speed, added_seconds, cores):
    """The ratio to pure inference when the added CPU seconds per image share no cycle with
    the graph's passes and run on ``cores`` cores between them."""
    per_image = 1.0 / inference_speed
    return per_image / (per_image + added_seconds / cores)


def benchmark_detector(options):
    """Time the three ways over the same images and return ``{"detector_images_per_s",
    "detect_job_images_per_s", "inference_images_per_s", "ratio", "detect_job_ratio",
    "added_ms", "ceilings", "cores", "num_images", "batch_size", "data_shape", "graph",
    "skipped", "machine"}``: ``added_ms`` the CPU milliseconds per image that the Detector and
    the job add to inference (:func:`added_cpu_seconds`), ``ceilings`` their best ratios
    when that work runs beside no pass (:func:`ceiling`), on all ``cores`` and on one."""
    machine = machine_line(environment(*OPENMP_SETTINGS))  # the load before this run's own
    detector = make_detector(options)
    paths, skipped = image_paths(options)
    batch_size = min(options.batch_size, len(paths))
    inputs = preprocessed_inputs(detector, paths, batch_size)

    def through_detector():
        detector(paths, score_threshold=options.score_threshold, batch_size=batch_size)

    def infer():
        for arrays in inputs:
            detector.predictor(**arrays)[0].wait_to_read()

    job = DetectOptions(checkpoint=options.checkpoint or "", inputs=tuple(paths),
                        output=os.path.join(options.work_dir, "detect"), progress=False,
                        threshold=options.score_threshold, batch_size=batch_size,
                        exist_ok=True)

    def run_job():
        detect(job, detector)

    timed = (through_detector, run_job, infer)
    for function in timed:  # warm-up: binds the executor, fills MKL-DNN's caches
        function()
    times = [[] for _ in timed]
    for _ in range(options.runs):  # alternating, so that other load hurts each alike
        for function, spent in zip(timed, times):
            spent.append(seconds(function))
    detector_speed, job_speed, inference_speed = (len(paths) / min(spent) for spent in times)
    added = [spent / len(paths) for spent in added_cpu_seconds(
        detector, min(options.runs, 3), through_detector, run_job)]
    cores = len(os.sched_getaffinity(0))
    return {"added_ms": [1000 * spent for spent in added], "cores": cores,
            "ceilings": {count: [ceiling(inference_speed, spent, count) for spent in added]
                         for count in (cores, 1)},
            "detector_images_per_s": detector_speed, "inference_images_per_s": inference_speed,
            "detect_job_images_per_s": job_speed, "detect_job_ratio": job_speed / inference_speed,
            "ratio": detector_speed / inference_speed, "num_images": len(paths),
            "batch_size": batch_size, "data_shape": detector.transform.data_shape,
            "graph": options.checkpoint or options.network, "skipped": skipped,
            "machine": machine}


def report(result):
    """The result as the lines the tool prints."""
    skipped = result.get("skipped", [])
    notice = ["skipped %d file(s) not readable as images: %s" % (len(skipped), named(skipped))]
    machine = [result["machine"]] if "machine" in result else []
    return "\n".join(machine + (notice if skipped else []) + [
        "%s at %d pixels, batch %d, %d images:" % (
            result["graph"], result["data_shape"], result["batch_size"], result["num_images"]),
        "  %-47s %8.1f images/s" % ("Detector (image files in, decoding included):",
                                        result["detector_images_per_s"]),
        "  %-47s %8.1f images/s" % ("zoo detect (images in, pictures and JSON out):",
                                        result["detect_job_images_per_s"]),
        "  %-47s %8.1f images/s" % ("pure inference (preprocessed, in memory):",
                                        result["inference_images_per_s"]),
        "  ratio: %.3f (Detector), %.3f (zoo detect)" % (result["ratio"],
                                                         result["detect_job_ratio"])]
        + ceiling_lines(result))


def ceiling_lines(result):
    """What the Detector and the job add to inference, and the ratios it leaves."""
    if "added_ms" not in result:
        return []
    cores = result["cores"]
    return [
        "  CPU added to inference per image: %.2f ms (Detector), %.2f ms (zoo detect)"
        % tuple(result["added_ms"]),
        "  ratio if that runs beside no pass, on %d core(s): %.3f (Detector), %.3f (zoo detect)"
        % ((cores,) + tuple(result["ceilings"][cores])),
        "  ratio if that runs beside no pass, on 1 core: %.3f (Detector), %.3f (zoo detect)"
        % tuple(result["ceilings"][1])]


def batch_sweep(options, batch_sizes):
    """Seconds per image through the detector at each of ``batch_sizes`` on the same images
    (best of ``options.runs`` passes each, the batch sizes alternating); returns
    ``{"per_image_s": {batch_size: seconds}, "num_images", "data_shape", "graph"}``."""
    detector = make_detector(options)
    paths, _ = image_paths(options)

    def at(batch_size):
        return lambda: detector(paths, score_threshold=options.score_threshold,
                                batch_size=batch_size)
    runs = {size: at(size) for size in batch_sizes}
    for run in runs.values():  # warm-up: binds an executor per input shape and batch
        run()
    times = {size: [] for size in batch_sizes}
    for _ in range(options.runs):
        for size, run in runs.items():
            times[size].append(seconds(run))
    return {"per_image_s": {size: min(spent) / len(paths) for size, spent in times.items()},
            "num_images": len(paths), "data_shape": detector.transform.data_shape,
            "graph": options.checkpoint or options.network}


def sweep_report(result):
    """The lines the tool prints for :func:`batch_sweep`."""
    smallest = min(result["per_image_s"])
    lines = ["%s at %s pixels, %d images, seconds per image by batch size:"
             % (result["graph"], result["data_shape"], result["num_images"])]
    lines += ["  batch %3d: %8.4f s/image (%.2fx batch %d)"
              % (size, spent, spent / result["per_image_s"][smallest], smallest)
              for size, spent in sorted(result["per_image_s"].items())]
    return "\n".join(lines)


def pinned_to(cores):
    """A ``preexec_fn`` putting the child process (all its threads) on ``cores``."""
    return lambda: os.sched_setaffinity(0, cores)


def start_busy(count, cores):
    """``count`` CPU-bound processes (a Python loop each) on ``cores``."""
    return [subprocess.Popen([sys.executable, "-c", "while True: pass"],
                             preexec_fn=pinned_to(cores)) for _ in range(count)]


def stop_busy(processes):
    for process in processes:
        process.kill()
    for process in processes:
        process.wait()


def detect_command(options, work):
    """The ``zoo detect`` command line timed: the checkpoint (the network exported with
    random weights when none is given) over the benchmark's images, named in a list file."""
    checkpoint = options.checkpoint
    if checkpoint is None:
        overrides = {} if options.data_shape is None else {"data_shape": options.data_shape}
        model = get_model(options.network, **overrides)
        model.init_params(seed=0)
        checkpoint = os.path.join(work, "model")
        artifact.export(model, checkpoint)
    paths, _ = image_paths(options)
    listing = os.path.join(work, "inputs.txt")
    with open(listing, "w") as stream:
        stream.write("".join(os.path.abspath(path) + "\n" for path in paths))
    return [sys.executable, "-m", "zoo", "detect", "--checkpoint", checkpoint, "--list",
            listing, "--output", os.path.join(work, "detect"), "--exist-ok", "--no-progress",
            "--batch-size", str(options.batch_size),
            "--threshold", str(options.score_threshold)], len(paths)


def timed_command(argv, cores):
    """Wall seconds of the command ``argv`` on ``cores``; OptionsError naming its last line
    of stderr if it fails."""
    start = time.perf_counter()
    done = subprocess.run(argv, preexec_fn=pinned_to(cores), stdout=subprocess.DEVNULL,
                          stderr=subprocess.PIPE, text=True)
    spent = time.perf_counter() - start
    if done.returncode != 0:
        raise OptionsError("zoo detect failed (exit %d): %s" % (
            done.returncode, (done.stderr.strip().splitlines() or ["no message"])[-1]))
    return spent


def busy_detect(options, busy):
    """Wall seconds of ``zoo detect`` as a command (process start and model loading
    included) on :data:`BUSY_CORES` cores, quiet and beside ``busy`` CPU-bound processes on
    the same cores, ``options.runs`` times each, alternating after one untimed warm-up;
    returns ``{"quiet_s", "busy_s"}`` (medians), ``"ratio"``, ``"busy"``, ``"cores"``,
    ``"num_images"``, ``"graph"`` and ``"machine"``."""
    machine = machine_line(environment(*OPENMP_SETTINGS))
    cores = sorted(os.sched_getaffinity(0))[:BUSY_CORES]
    work = os.path.join(options.work_dir, "busy")
    os.makedirs(work, exist_ok=True)
    argv, count = detect_command(options, work)
    timed_command(argv, cores)  # warm-up: the files in the page cache
    quiet, loaded = [], []
    for _ in range(options.runs):
        quiet.append(timed_command(argv, cores))
        processes = start_busy(busy, cores)
        try:
            loaded.append(timed_command(argv, cores))
        finally:
            stop_busy(processes)
    quiet_s, busy_s = statistics.median(quiet), statistics.median(loaded)
    return {"quiet_s": quiet_s, "busy_s": busy_s, "ratio": busy_s / quiet_s, "busy": busy,
            "cores": cores, "num_images": count, "machine": machine,
            "graph": options.checkpoint or options.network}


def busy_report(result):
    """The lines the tool prints for :func:`busy_detect`."""
    return "\n".join([
        result["machine"],
        "zoo detect (%s, %d images, a process on cores %s), median wall time:"
        % (result["graph"], result["num_images"], ",".join(map(str, result["cores"]))),
        "  quiet: %8.2f s" % result["quiet_s"],
        "  beside %d busy processes on the same cores: %8.2f s" % (result["busy"],
                                                                    result["busy_s"]),
        "  ratio: %.2fx its quiet time (target about %gx, at most %gx)"
        % (result["ratio"], BUSY_TARGET, BUSY_LIMIT)])
