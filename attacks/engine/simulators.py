"""Simulators: map one trial's variables to what the adversary observed (the forward model of an attack).

Every simulator is a pure function of (variables, context) built with `torch.func`, so the engine can
`vmap` it over trials and differentiate through it. `context` holds what the observation fixes
(model weights, labels, local hyperparameters); it is shared by all trials or given per trial.
"""
from __future__ import annotations

import contextlib
import weakref
from dataclasses import dataclass
from typing import Any, Callable, Mapping

import torch
from torch import nn
from torch._C._functorch import peek_interpreter_stack
from torch.func import functional_call, grad

Variables = Mapping[str, object]

_SLOTS: "weakref.WeakKeyDictionary[nn.Module, dict]" = weakref.WeakKeyDictionary()


def _slots(module: nn.Module, names: tuple[str, ...]) -> list[tuple[dict, str]] | None:
    """Where each named tensor lives (its owner's `_parameters` or `_buffers` table and key), found once
    per module and name set; None when the module ties or parametrises tensors (functional_call's case)."""
    per_module = _SLOTS.setdefault(module, {})
    if names not in per_module:
        tied = any(len(list(get(remove_duplicate=False))) != len(list(get()))
                   for get in (module.named_parameters, module.named_buffers))
        parametrised = any(hasattr(m, "parametrizations") for m in module.modules())
        slots = None
        if not (tied or parametrised):
            slots = []
            for name in names:
                prefix, _, key = name.rpartition(".")
                owner = module.get_submodule(prefix)
                table = owner._parameters if key in owner._parameters else owner._buffers
                if key not in table:
                    raise KeyError(f"{type(module).__name__} has no parameter or buffer {name!r}")
                slots.append((table, key))
        per_module[names] = slots
    return per_module[names]


def call(module: nn.Module, tensors: Mapping[str, torch.Tensor], *args: Any) -> Any:
    """`torch.func.functional_call(module, tensors, args)`: run `module` with the named parameters and
    buffers replaced by `tensors`, and put the module's own back afterwards.

    The same swap functional_call makes, with the name lookups done once per module instead of at every
    call: that bookkeeping cost twice a small clone's forward pass (85 of 130 us, measured).
    """
    # Traced by torch.compile: functional_call, which dynamo follows; the slot table would be guarded on.
    slots = None if torch.compiler.is_compiling() else _slots(module, tuple(tensors))
    if slots is None:
        return functional_call(module, dict(tensors), args)
    saved = []
    try:
        for (table, key), tensor in zip(slots, tensors.values()):
            saved.append(table[key])
            table[key] = tensor
        return module(*args)
    finally:
        for (table, key), original in zip(slots, saved):
            table[key] = original


def task_loss(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Mean cross-entropy; `labels` are class indices or per-class probabilities (soft labels).

    The one loss both the simulated client and the attacker use, so their gradients agree.
    """
    return nn.functional.cross_entropy(logits, labels)


def parameter_leaves(params: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Model parameters for a simulator's context, as leaves that require grad, made once per run: the
    unbatched simulators differentiate with respect to them at every evaluation and would otherwise detach
    each one every time (the same values)."""
    return {k: v.detach().requires_grad_(True) for k, v in params.items()}


def _parameter_gradient(loss, params: Mapping[str, torch.Tensor], inputs: tuple[torch.Tensor, ...],
                        has_aux: bool = False):
    """grad_theta loss(theta) at `params`, differentiable with respect to `inputs` (and to `params` where
    they carry a graph, as FedAvg's later local steps do) as `torch.func.grad` would be.

    Under a `torch.func` transform (the engine's batched trials) it is `torch.func.grad`; outside one (a
    single trial) plain autograd with `create_graph` gives the same values bit for bit without the
    transform's per-operation dispatch (about a quarter of a ConvNet step, measured).
    With `has_aux`, `loss` returns (value, aux) and this returns (gradient, aux), aux differentiable in `inputs`.
    """
    if peek_interpreter_stack() is not None:
        return grad(loss, has_aux=has_aux)(dict(params))
    differentiable = torch.is_grad_enabled() and any(t.requires_grad for t in (*inputs, *params.values()))
    leaves = {k: v if v.requires_grad else v.detach().requires_grad_(True) for k, v in params.items()}
    with torch.enable_grad():
        value = loss(leaves)
    value, aux = value if has_aux else (value, None)
    grads = dict(zip(leaves, torch.autograd.grad(value, list(leaves.values()), create_graph=differentiable)))
    return (grads, aux) if has_aux else grads


class Simulated(list):
    """A simulator's output tensors, with `outputs`: what it recorded on the way (module outputs), for
    priors that would otherwise run the same forward pass again (`Prior(on_simulation=True)`)."""

    def __init__(self, tensors, outputs: list[torch.Tensor]):
        super().__init__(tensors)
        self.outputs = outputs


def _output(module, inputs, output):
    return output


class _Taps:
    """Forward hooks left on a model's modules of some kinds, recording only while `seen` is a list: a step
    traced by torch.compile cannot register hooks inside a gradient transform, so it uses these, which an
    eager evaluation installed before (`installing_taps`)."""

    def __init__(self, model: nn.Module, kinds: tuple[type, ...], keep: Callable):
        self.seen: list | None = None
        self.keep = keep
        for m in model.modules():
            if isinstance(m, kinds):
                m.register_forward_hook(self._hook)

    def _hook(self, module, inputs, output):
        if self.seen is not None:
            self.seen.append(self.keep(module, inputs, output))


TAPS = "_splitlab_taps"
_INSTALLING: list[bool] = [False]


@contextlib.contextmanager
def installing_taps():
    """Eager evaluations inside this block leave `_Taps` on the modules they record, for a traced step."""
    _INSTALLING[0] = True
    try:
        yield
    finally:
        _INSTALLING[0] = False


class recording:
    """Collect `keep(module, inputs, output)` (by default the output) of every module of the given kinds
    during the forward passes inside the block; the hooks are removed on leaving it. Traced (torch.compile)
    it switches on the model's installed taps instead."""

    def __init__(self, model: nn.Module, kinds: tuple[type, ...], keep: Callable = _output):
        self.model, self.kinds, self.keep = model, kinds, keep
        self.key = (kinds, getattr(keep, "__code__", keep))      # a keep lambda made per call is one key

    def __enter__(self) -> list:
        seen: list[Any] = []
        if torch.compiler.is_compiling():
            self.taps = getattr(self.model, TAPS)[self.key]
            self.taps.seen = seen
            return seen
        if _INSTALLING[0]:
            taps = self.model.__dict__.setdefault(TAPS, {})
            if self.key not in taps:
                taps[self.key] = _Taps(self.model, self.kinds, self.keep)
        self.handles = [m.register_forward_hook(lambda m, i, out: seen.append(self.keep(m, i, out)))
                        for m in self.model.modules() if isinstance(m, self.kinds)]
        return seen

    def __exit__(self, *exc) -> None:
        if torch.compiler.is_compiling():
            self.taps.seen = None
            return
        for h in self.handles:
            h.remove()


def _labels(variables: Variables, context: Mapping[str, object]) -> torch.Tensor:
    """Soft labels from optimised logits (DLG) when the trial has them, else the known/recovered labels."""
    if "label_logits" in variables:
        return torch.softmax(variables["label_logits"], dim=-1)
    return context["labels"]


@dataclass(frozen=True)
class FedSGDGradient:
    """g = grad_theta CE(F(x; theta), y): the gradient one FedSGD client uploads for its batch.

    `record`: module kinds whose outputs in this forward pass come back as the result's `outputs`
    (`Simulated`), so an activation prior reuses the pass instead of running its own (FedLeak's
    activation L1: a third of its step, measured on the ConvNet at batch 8).
    """
    model: nn.Module
    record: tuple[type, ...] = ()

    def __call__(self, variables: Variables, context: Mapping[str, object]) -> list[torch.Tensor]:
        params, buffers = context["params"], context.get("buffers", {})
        x, y = variables["x"], _labels(variables, context)

        if not self.record:
            def loss(p):
                return task_loss(call(self.model, {**p, **buffers}, x), y)

            return list(_parameter_gradient(loss, params, (x, y)).values())

        def recorded_loss(p):
            with recording(self.model, self.record) as seen:
                logits = call(self.model, {**p, **buffers}, x)
            return task_loss(logits, y), list(seen)

        grads, outputs = _parameter_gradient(recorded_loss, params, (x, y), has_aux=True)
        return Simulated(grads.values(), outputs)


@dataclass(frozen=True)
class FedAvgUpdate:
    """theta_0 - theta_E after `epochs` local epochs of SGD at `lr` over mini-batches of `batch_size`.

    The attacker does not know the client's shuffling, so the batch order is the fixed index order
    every epoch (the update is order-independent only for one batch per epoch).
    """
    model: nn.Module
    lr: float
    epochs: int
    batch_size: int

    def __call__(self, variables: Variables, context: Mapping[str, object]) -> list[torch.Tensor]:
        params0, buffers = dict(context["params"]), context.get("buffers", {})
        x, y = variables["x"], _labels(variables, context)
        params = params0
        for _ in range(self.epochs):
            for start in range(0, x.shape[0], self.batch_size):
                xb, yb = x[start:start + self.batch_size], y[start:start + self.batch_size]

                def loss(p, xb=xb, yb=yb):
                    return task_loss(call(self.model, {**p, **buffers}, xb), yb)

                step = _parameter_gradient(loss, params, (xb, yb))
                params = {k: params[k] - self.lr * step[k] for k in params}
        return [params0[k] - params[k] for k in params0]


@dataclass(frozen=True)
class CutActivations:
    """H = f_clone(x): the cut-layer activations of a clone client with the trial's own clone weights."""
    clone: nn.Module

    def __call__(self, variables: Variables, context: Mapping[str, object]) -> list[torch.Tensor]:
        return [call(self.clone, variables["clone"], variables["x"])]
