"""The values options choose from where the modules that act on them load MXNet: here, in a
module that imports nothing, so that the command line's parsers offer them (``zoo train
--help`` lists them) without loading MXNet, which takes seconds. Those modules check
against these; every other option's values stay beside the code that reads them."""

__all__ = ["CALIB_MODES", "COLLECTORS", "OPTIMIZERS", "OVERFIT_FRACTION", "TRAIN_DTYPES"]

OPTIMIZERS = ("sgd", "nag", "adam", "rmsprop")
"""Training's update rules (:class:`zoo.engine.trainer.OptimizerOptions`)."""
TRAIN_DTYPES = ("fp32", "bf16", "auto")
"""``--dtype`` of training (:mod:`zoo.engine.precision`): ``auto`` is bf16 where the CPU runs
it natively, else fp32."""
OVERFIT_FRACTION = 0.1
"""``--overfit-batch`` passes once the loss is below this fraction of its first value
(:mod:`zoo.engine.health.overfit`)."""
CALIB_MODES = ("naive", "entropy")
"""How int8 calibration picks each layer's range (:mod:`zoo.inference.quantization`):
``naive`` the observed min/max, ``entropy`` the KL-optimal threshold."""
COLLECTORS = ("outputs", "monitor")
"""How calibration gathers the calibrated layers' statistics; both give the same thresholds.
``outputs``: one executor whose outputs are the statistics (see
:class:`zoo.inference.quantization.MinMax` and ``Histograms``), run at the speed of
inference. ``monitor``: MXNet's own collector, a Python callback on every input and output
of every operator, each calibrated output reduced by MXNet's slow ``min``/``max`` while the
graph waits; kept to compare with."""
