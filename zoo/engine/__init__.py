"""The training engine: the loop, its hooks, and the one adapter to MXNet's Module internals."""
