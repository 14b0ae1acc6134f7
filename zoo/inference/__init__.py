"""From images to detections: the one batch runner (:mod:`zoo.inference.runner`, no MXNet),
the MXNet :class:`~zoo.inference.detector.Detector`, evaluation on a dataset split, int8
quantization and drawing. Nothing is imported here, so that the ONNX detector runs the
runner without MXNet."""
