"""Ray integrations: batch detection on a cluster (cluster.py) and HTTP serving (serve.py); imported only by the commands that use them."""
import os


def detect(inputs, checkpoint, address="local", **options):
    """``zoo detect --ray`` from Python: detect ``inputs`` (files, folders, globs, as
    ``zoo detect`` takes them, ``s3://`` URLs, or a ``ray.data.Dataset`` of ``bytes`` and
    ``path`` columns: ``ray.data.read_binary_files(paths, include_paths=True)``) with
    ``checkpoint`` (an artifact prefix, ``.onnx`` or ``.xml``) on the Ray cluster at
    ``address`` (``"local"``: a Ray started on this machine for the run; ``"auto"``,
    ``HOST:PORT``, ``ray://HOST:PORT``: a running one; a dataset's own where this process is
    connected to one already), every other
    :class:`zoo.jobs.detect.DetectOptions` field by name (``output=``, ``crops=``,
    ``resume=``...). Returns the run's :class:`zoo.jobs.detect.DetectSummary`."""
    # Imported here: the job imports this package's cluster module, and `import zoo.ray`
    # stays free of the job (and of Ray) until a run.
    from zoo.jobs.detect import DetectOptions, detect as run
    if not isinstance(inputs, (list, tuple)):  # one path, URL or dataset
        inputs = (inputs,)
    inputs = tuple(os.fspath(spec) if isinstance(spec, os.PathLike) else spec
                   for spec in inputs)
    return run(DetectOptions(checkpoint=checkpoint, inputs=inputs, ray=address, **options))
