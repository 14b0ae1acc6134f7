"""The benchmarks behind ``zoo benchmark*``: inference speed (:mod:`zoo.bench.inference`),
the data pipeline, :class:`zoo.Detector`, memory saving and calibration, the per-part
profile and FLOPs counting, all timed by one helper (:mod:`zoo.bench.timing`). Nothing in
the library imports them."""
