"""Write a deployable format-2 artifact: from a trained artifact (e.g. its portable unfused
graph for GPUs, or one epoch on its own), or from a registered model or YAML config with
freshly initialised parameters."""
import os
from dataclasses import dataclass
from typing import Optional

from .. import artifact
from ..errors import OptionsError
from ..model import build_model
from .train import load_network_config


@dataclass(frozen=True)
class ExportOptions:
    output: str                          # prefix of the new artifact
    checkpoint: Optional[str] = None     # an artifact prefix, or
    network: Optional[str] = None        # a registered model name or YAML config path
    epoch: Optional[int] = None          # of checkpoint; None: best, else newest
    data_shape: Optional[int] = None     # of network; None: the config's
    fused: bool = True                   # MKL-DNN fused graph; False: portable graph


@dataclass(frozen=True)
class ExportResult:
    prefix: str
    epoch: int
    meta_path: str                       # the new epoch's metadata file


def export(options):
    """Write the artifact; exactly one of ``checkpoint`` and ``network`` is set."""
    if (options.checkpoint is None) == (options.network is None):
        raise OptionsError("export takes a checkpoint or a network, exactly one")
    os.makedirs(os.path.dirname(os.path.abspath(options.output)), exist_ok=True)
    if options.network is not None:
        overrides = {"data_shape": options.data_shape} if options.data_shape else {}
        model = build_model(load_network_config(options.network), **overrides)
        artifact.export(model, options.output, fused=options.fused)
        return ExportResult(options.output, 0, artifact.epoch_files(options.output, 0).meta)
    source = artifact.load(options.checkpoint, options.epoch)
    if source.is_int8 and not options.fused:
        raise artifact.ArtifactError("%s-%04d: an int8 graph runs on MKL-DNN only; it has "
                                     "no portable unfused form" % (options.checkpoint,
                                                                   source.epoch))
    # An int8 graph is deployed as it is; an fp32 one is rebuilt fused or portable.
    symbol = source.symbol if source.is_int8 else (
        None if options.fused else source.model.symbol())
    meta_path = artifact.save(options.output, source.epoch, source.model, source.arg_params,
                              source.aux_params, symbol=symbol, precision=source.precision)
    return ExportResult(options.output, source.epoch, meta_path)
