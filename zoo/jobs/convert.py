"""Converting format-1 checkpoints into format-2 artifacts (``zoo convert``).

Format 1 named its model (a registered name or a YAML path) instead of storing its config,
so this is the one place that rebuilds a model from the registry or a YAML file; loading an
artifact (:mod:`zoo.artifact`) never does.
"""
import os
from dataclasses import dataclass
from typing import Optional

from zoo.config.loading import load_config
from zoo.config.registry import get_config
from zoo.flags import checkpoint_flag, epoch_flag, flag, options_from

__all__ = ["ConvertOptions", "convert_v1"]


@dataclass(frozen=True)
class ConvertOptions:
    """What ``zoo convert`` rewrites (:func:`convert_v1`'s arguments): each field declares its
    flag (:mod:`zoo.flags`)."""
    checkpoint: str = checkpoint_flag("format-1 checkpoint prefix")
    epoch: Optional[int] = epoch_flag("every format-1 epoch")
    output: Optional[str] = flag(None, "prefix of the artifact (default: the checkpoint's, in "
                                       "place)", metavar="PREFIX")

    @classmethod
    def from_flags(cls, args, **values):
        """The options of ``zoo convert``'s parsed flags, those of ``values`` given."""
        return options_from(cls, args, **values)


def convert_v1(prefix, epoch=None, output=None):
    """Rewrite a format-1 checkpoint (every complete epoch, or ``epoch``) as a format-2
    artifact at ``output`` (default: in place); returns a one-line report.

    Format 1 named its model (a registered name or a YAML path) instead of storing its
    config: this is the one place that rebuilds a model from the registry or a YAML file,
    so run it where the checkpoint was trained. Its pickled optimizer state is never read:
    a converted epoch has none, and in place its ``.states`` file is removed.
    """
    # Imported here, as in each function below: artifacts load MXNet, which the options (and
    # zoo convert --help) do without.
    from zoo import artifact
    chosen = [epoch] if epoch is not None else [
        number for number in artifact.epochs(prefix)
        if "format" not in artifact.read_json(artifact.epoch_files(prefix, number).meta)]
    if not chosen:
        raise artifact.ArtifactError("no complete format-1 checkpoint %s-NNNN.params/.json"
                                     % prefix)
    output = output or prefix
    dropped = []
    for number in chosen:
        files = artifact.epoch_files(prefix, number)
        if os.path.exists(files.states):
            dropped.append(files.states)
        _convert_epoch(prefix, number, output)
    report = "converted %s epoch%s %s to format %d at %s" % (
        prefix, "s" if len(chosen) > 1 else "", ", ".join(map(str, chosen)),
        artifact.FORMAT_VERSION, output)
    if dropped:
        report += ("; the pickled optimizer state%s %s %s not read (a resume from %s starts "
                   "the optimizer afresh)" % ("s" if len(dropped) > 1 else "",
                                              ", ".join(dropped),
                                              "were" if len(dropped) > 1 else "was",
                                              "them" if len(dropped) > 1 else "it"))
    return report


def _convert_epoch(prefix, epoch, output):
    from zoo import artifact
    from zoo.model import build_model
    files = artifact.epoch_files(prefix, epoch)
    meta = artifact.read_json(files.meta)
    if "format" in meta:
        raise artifact.ArtifactError("%s: already format %r" % (files.meta, meta["format"]))
    if "network" not in meta:
        raise artifact.ArtifactError("%s: not a format-1 checkpoint (no 'network' field)"
                                     % files.meta)
    model = build_model(_v1_config(files.meta, meta["network"]), **meta.get("overrides", {}))
    arg_params, aux_params = artifact.read_params(files.params)
    symbol = artifact.read_symbol(prefix)
    calibration = meta.get("quantization")
    precision = ({"dtype": "int8", "calibration": calibration} if calibration
                 else {"dtype": "fp32"})
    training = {k: v for k, v in meta.items()
                if k not in ("network", "overrides", "epoch", "quantization")}
    # In place, artifact.save() also removes the pickled .states: no optimizer state is written.
    artifact.save(output, epoch, model, arg_params, aux_params, symbol=symbol, precision=precision,
         training=training or None)


def _v1_config(meta_path, network):
    from zoo import artifact
    if os.path.exists(network):
        return load_config(network)
    try:
        return get_config(network)
    except KeyError:
        raise artifact.ArtifactError("%s: its model %r is neither a YAML file here nor a "
                                     "registered model; convert it from the folder it was "
                                     "trained in" % (meta_path, network)) from None
