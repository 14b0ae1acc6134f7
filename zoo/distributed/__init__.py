"""Training on MXNet's parameter server: the cluster's roles, addresses and kvstore
(:mod:`zoo.distributed.cluster`) and the processes of ``zoo launch``
(:mod:`zoo.distributed.launcher`)."""
