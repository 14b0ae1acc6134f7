"""Ray integrations: batch detection on a cluster (cluster.py) and HTTP serving (serve.py); imported only by the commands that use them."""


def detect(inputs, checkpoint, address="local", **options):
    """``zoo detect --ray`` from Python: detect ``inputs`` (files, folders, globs, as
    ``zoo detect`` takes them) with ``checkpoint`` (an artifact prefix, ``.onnx`` or ``.xml``)
    on the Ray cluster at ``address`` (``"local"``: a Ray started on this machine for the run;
    ``"auto"``, ``HOST:PORT``, ``ray://HOST:PORT``: a running one), every other
    :class:`zoo.jobs.detect.DetectOptions` field by name (``output=``, ``crops=``,
    ``resume=``...). Returns the run's :class:`zoo.jobs.detect.DetectSummary`."""
    # Imported here: the job imports this package's cluster module, and `import zoo.ray`
    # stays free of the job (and of Ray) until a run.
    from zoo.jobs.detect import DetectOptions, detect as run
    if isinstance(inputs, str):
        inputs = (inputs,)
    return run(DetectOptions(checkpoint=checkpoint, inputs=tuple(inputs), ray=address,
                             **options))
