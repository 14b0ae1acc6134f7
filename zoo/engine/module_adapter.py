"""The one module that reaches into MXNet's private attributes (of ``mx.mod.Module``, its
kvstore and optimizer), as small functions, so the rest of the zoo uses only these.

Optimizer state is kept per parameter name, not per MXNet update index: the index is
``parameter position x number of devices + device``, so a state saved on one device
resumes on several and back. Every device's copy of a parameter receives the same summed
gradient, so the first device's state stands for all of them.
"""
import mxnet as mx

from zoo.artifact import OptimizerState

__all__ = ["SETTINGS", "aux_arrays", "current_lr", "executors", "kvstore",
           "mark_params_changed", "module_contexts", "optimizer_state", "param_arrays",
           "set_optimizer_state", "set_update_count"]

SETTINGS = ("lr", "wd", "momentum", "rescale_grad", "clip_gradient")


def optimizer_settings(module):
    """``{"optimizer": class name, "lr", "wd", "momentum", "rescale_grad",
    "clip_gradient"}`` of the optimizer installed on ``module`` (absent settings: None)."""
    optimizer = module._optimizer
    settings = {name: getattr(optimizer, name, None) for name in SETTINGS}
    return dict(settings, optimizer=type(optimizer).__name__.lower())


def _updater(module):
    """The Updater that holds the optimizer state in this process, or None where the
    state lives on parameter servers (a ``dist_*`` kvstore updating on the servers)."""
    if not module._update_on_kvstore:
        return module._updater
    return None if "dist" in module._kvstore.type else module._kvstore._updater


def _slots(module):
    """Parameter name -> the Updater keys of its copies: ``position x devices + device``
    when the workers update, the name itself when a local kvstore does."""
    names = module._exec_group.param_names
    if module._update_on_kvstore:
        return {name: [name] for name in names}
    count = len(module._context)
    return {name: [i * count + k for k in range(count)] for i, name in enumerate(names)}


def _update_count(optimizer, key):
    """How many updates the optimizer counted for Updater key ``key`` (None: never)."""
    for counts in optimizer._all_index_update_counts.values():
        if key in counts:
            return counts[key]
    return None


def _flatten(state, name, arrays):
    """The JSON structure of one parameter's state, adding its arrays to ``arrays`` under
    ``NAME:N``. A state is an NDArray, None, or a tuple/list of states (Adam's mean and
    variance; a multi-precision state's fp32 weight copy)."""
    if state is None:
        return None
    if isinstance(state, mx.nd.NDArray):
        key = "%s:%d" % (name, len(arrays))
        arrays[key] = state.as_in_context(mx.cpu())
        return key
    if isinstance(state, (tuple, list)):
        kind = "tuple" if isinstance(state, tuple) else "list"
        return {kind: [_flatten(part, name, arrays) for part in state]}
    raise TypeError("optimizer state of %s is a %s; only NDArrays, None and tuples/lists "
                    "of them are saved" % (name, type(state).__name__))


def _unflatten(structure, arrays, name, shape):
    """The state that :func:`_flatten` described, its arrays copied from ``arrays``;
    ValueError if an array's shape is not the parameter's ``shape``."""
    if structure is None:
        return None
    if isinstance(structure, str):
        array = arrays[structure]
        if array.shape != shape:
            raise ValueError("the saved optimizer state of %s has shape %s, the parameter %s"
                             % (name, array.shape, shape))
        return array.copy()
    if "tuple" in structure:
        return tuple(_unflatten(part, arrays, name, shape) for part in structure["tuple"])
    return [_unflatten(part, arrays, name, shape) for part in structure["list"]]


def optimizer_state(module):
    """The optimizer state of a bound Module after ``init_optimizer``, or None where it lives
    on parameter servers. Holds no reference to the live arrays (copies on the CPU)."""
    updater = _updater(module)
    if updater is None:
        return None
    optimizer = updater.optimizer
    arrays, parameters = {}, {}
    for name, keys in _slots(module).items():
        if keys[0] in updater.states:
            parameters[name] = {"state": _flatten(updater.states[keys[0]], name, arrays),
                                "updates": _update_count(optimizer, keys[0])}
    info = {"settings": optimizer_settings(module), "num_update": optimizer.num_update,
            "parameters": parameters}
    return OptimizerState(arrays=arrays, info=info)


def set_optimizer_state(module, state):
    """Restore per-parameter states and update counts (which place the learning-rate
    schedule) into ``module``'s optimizer; its settings (learning rate, weight decay,
    gradient scale, ...) stay those of this run. Returns False, restoring nothing, where the
    state lives on parameter servers. Raises ValueError if the optimizer's class differs or
    a parameter's state does not fit its weight."""
    updater = _updater(module)
    if updater is None:
        return False
    saved = state.info["settings"]["optimizer"]
    current = optimizer_settings(module)["optimizer"]
    if saved != current:
        raise ValueError("the saved optimizer state is %s's, this run's optimizer is %s"
                         % (saved, current))
    optimizer = updater.optimizer
    slots = _slots(module)
    weights = dict(zip(module._exec_group.param_names, module._exec_group.param_arrays))
    for name, saved_param in state.info["parameters"].items():
        if name not in slots:
            continue
        for key in slots[name]:
            updater.states[key] = _unflatten(saved_param["state"], state.arrays, name,
                                             weights[name][0].shape)
            # Moved to the weight's device at its next update.
            updater.states_synced[key] = False
            if saved_param["updates"] is not None:
                _set_update_count(module, optimizer, key, saved_param["updates"])
    optimizer.num_update = state.info["num_update"]
    return True


def _set_update_count(module, optimizer, key, count):
    # MXNet keeps one count table per device id and switches to the updating weight's
    # before each update; a local kvstore updates on a device of the module's.
    for device_id in {context.device_id for context in module._context} | {0}:
        optimizer._all_index_update_counts.setdefault(device_id, {})[key] = count


# The trainer's access to a bound Module: its kvstore, device arrays and optimizer.

def kvstore(module):
    """The kvstore ``init_optimizer`` installed (None: one device without one)."""
    return module._kvstore


def module_contexts(module):
    """The devices the module runs on."""
    return list(module._context)


def param_arrays(module):
    """``[(name, [its array on each device])]`` of the trainable parameters, in the order
    Module pushes them (their kvstore keys are the names)."""
    group = module._exec_group
    return list(zip(group.param_names, group.param_arrays))


def aux_arrays(module):
    """``[(name, [its array on each device])]`` of the auxiliary states (batch-norm
    running statistics)."""
    group = module._exec_group
    return list(zip(group.aux_names, group.aux_arrays))


def executors(module):
    """The bound executors of ``module``, one per device."""
    return list(module._exec_group.execs)


def mark_params_changed(module):
    """Tell Module its device arrays were changed behind its back, so that ``get_params``
    copies them again instead of returning its stale host copy."""
    module._params_dirty = True


def current_lr(module):
    """The learning rate of the next update, schedule and warm-up applied."""
    return module._optimizer.learning_rate


def set_update_count(module, num_update):
    """Place the learning-rate schedule after ``num_update`` updates without restoring any
    state (an optimizer of another class starts its state afresh): every parameter's
    update count starts there, as MXNet's ``begin_num_update`` makes it."""
    optimizer = module._optimizer
    optimizer.begin_num_update = optimizer.num_update = num_update
