"""What ``zoo train`` runs, as options: :class:`TrainOptions`, in a module that loads no MXNet,
so that the command line's parser (``zoo train --help``) and ``zoo check-data``'s, which
shares its data flags, build without it. The job itself is :func:`zoo.jobs.train.train`,
whose module hands these options on."""
import os
from dataclasses import dataclass
from typing import Optional, Tuple

__all__ = ["KV_STORES", "TrainOptions"]

KV_STORES = ("local", "device", "dist_sync", "dist_device_sync", "dist_async")


@dataclass(frozen=True)
class TrainOptions:
    network: Optional[str] = None        # registered model name or YAML config path (None:
                                         # init_from's stored config)
    dataset: str = "embedded"            # a kind of zoo.data.factory.KINDS
    data_root: str = os.path.join("output", "shapes")
    train_split: str = "train"
    val_split: str = "val"               # "" for no validation
    data_shape: Optional[int] = None     # None: the config's
    batch_size: int = 16                 # samples per step of this process, over its devices
    epochs: int = 10
    lr: Optional[float] = None           # None: the architecture's recipe lr, scaled
                                         # linearly to the total batch
                                         # (zoo.jobs.train.learning_rate)
    lr_steps: Tuple[float, ...] = ()     # epochs at which the lr drops
    lr_factor: float = 0.1
    warmup_epochs: float = 0.0
    optimizer: str = "sgd"
    momentum: float = 0.9
    wd: float = 5e-4
    clip_gradient: Optional[float] = None
    ctx: str = "cpu"                     # "cpu" or "gpu0,1,..."
    kv_store: str = "local"
    connect_timeout: Optional[float] = None   # dist: None is $ZOO_CONNECT_TIMEOUT, else 120 s
    pretrained_backbone: bool = False
    freeze: str = ""                     # regular expression of parameter names kept fixed
    freeze_bn: str = ""                  # regular expression of BatchNorm layer names frozen
                                         # (running statistics in training, all fixed)
    resume: str = ""                     # an artifact prefix, or "auto" for this run's own
    init_from: str = ""                  # an artifact prefix a new run starts from
                                         # (zoo.engine.finetune)
    init_epoch: Optional[int] = None     # its epoch (None: best validated, else newest)
    overwrite: bool = False              # start afresh over another run's checkpoints
    keep_last: int = 3                   # epochs kept besides the best validated one
    output_dir: str = os.path.join("output", "train")
    data_threads: Optional[int] = None   # None: all cores
    seed: int = 0
    val_interval: int = 1
    max_expand: float = 4.0              # largest zoom-out of SSD's augmentation (1: none)
    crop: bool = True                    # SSD's IoU-constrained random crop
    skip_bad: bool = False
    max_skipped: float = 0.2             # with skip_bad: the largest share of a split's
                                         # images it may drop (more stops the run)
    annotations: Optional[str] = None    # coco: the annotation file ({split}: the split)
    image_dir: Optional[str] = None      # coco: the image folder ({split}: the split)
    memory_saving: bool = False
    progress: bool = True
    health: bool = True                  # the training-health checks (zoo.engine.health)
    reference: str = ""                  # the CSV log of a run to compare with (its prefix
                                         # or folder also do; zoo.engine.health.reference)
    overfit_batch: Optional[int] = None  # at most this many steps on one fixed batch,
                                         # passing once the loss is below
                                         # zoo.choices.OVERFIT_FRACTION of its start
                                         # (zoo.engine.health.overfit); no checkpoint
    dtype: str = "fp32"                  # fp32, bf16 or auto: the layers' precision
                                         # (zoo.engine.precision)
