"""The training engine: the loop, its hooks, and the one adapter to MXNet's Module internals."""
from zoo import process

# A loop of one's own (zoo.engine.trainer.Trainer) trains as fast as zoo train: the settings
# are MXNet's to read when it loads, which the engine's modules make it do.
process.use_fast_settings()
