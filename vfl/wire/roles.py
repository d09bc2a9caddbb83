"""The roles a server process can run, and the hook through which an attack becomes one.

- `honest`: `vfl.protocol.Server`, trains its top model on the task.
- `curious`: `vfl.protocol.CuriousServer`, the same, and it keeps every activation it received with its
  tensor (training rounds and inference queries, the evaluation targets' last) in `role.seen`; the server
  program writes them to `<run>/transcript/` as each epoch finishes (`vfl.transcripts.load_transcript`).
- `malicious`: `vfl.protocol.MaliciousServer`, returns the gradients a callback chooses instead of task
  gradients. The callback comes from a factory named `MODULE:FUNCTION` (`--choose-gradient`), called once
  with a `RoleContext` and returning `choose_gradient(H, step) -> G` (G shaped like H, the parties'
  joined activations). `vfl.wire.roles:shrink_activations` is a built-in example.

From Python, `vfl.wire.server.serve(settings, run, role=...)` takes any object with the `vfl.protocol.Role`
interface instead, e.g. a `CuriousServer` an attack reads afterwards.
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Callable

import torch

from vfl.errors import SplitlabError, lookup
from vfl.protocol import MaliciousServer, Role
from vfl.training import ROLES, SERVER_ROLES, TrainConfig, build_server

ChooseGradient = Callable[[torch.Tensor, int], torch.Tensor]


@dataclass(frozen=True)
class RoleContext:
    """What a malicious role's factory is told: the run's configuration, the shape of one example's joined
    activations (what `choose_gradient` receives, with a batch dimension first) and the server's device."""
    config: TrainConfig
    activation_shape: tuple[int, ...]
    device: torch.device


def check_role(role: str, choose_gradient: str | None) -> None:
    lookup(dict.fromkeys(ROLES), role, "server role")
    if role == "malicious" and not choose_gradient:
        raise SplitlabError("--role malicious needs --choose-gradient MODULE:FUNCTION (e.g. "
                            "vfl.wire.roles:shrink_activations)")
    if role != "malicious" and choose_gradient:
        raise SplitlabError("--choose-gradient is for --role malicious only")
    if choose_gradient:
        load_factory(choose_gradient)


def load_factory(spec: str) -> Callable[[RoleContext], ChooseGradient]:
    """The function named by `MODULE:FUNCTION` (imported here: it is the user's own code)."""
    module_name, sep, name = spec.partition(":")
    if not sep or not module_name or not name.isidentifier():
        raise SplitlabError(f"--choose-gradient {spec!r} is not MODULE:FUNCTION (e.g. vfl.wire.roles:shrink_activations)")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise SplitlabError(f"--choose-gradient {spec}: cannot import {module_name} ({exc}); put it on PYTHONPATH") from None
    except KeyboardInterrupt:
        raise
    except BaseException as exc:            # the user's module failed (or exited) while importing: one line
        first = str(exc).splitlines()[0][:160] if str(exc) else ""
        raise SplitlabError(f"--choose-gradient {spec}: importing {module_name} raised {type(exc).__name__}"
                            f"{': ' + first if first else ''}") from None
    factory = getattr(module, name, None)
    if not callable(factory):
        raise SplitlabError(f"--choose-gradient {spec}: {module_name} has no function {name}")
    return factory


def build_role(config: TrainConfig, role: str, device: torch.device, activation_shape: tuple[int, ...],
               choose_gradient: str | None = None) -> Role:
    """The server role by name: honest and curious train the task; malicious asks its factory for the callback
    and keeps what it receives (tensors included, as an attacker would)."""
    check_role(role, choose_gradient)
    if role in SERVER_ROLES:
        return build_server(config, device, role)
    choose = load_factory(choose_gradient)(RoleContext(config, tuple(activation_shape), device))
    if not callable(choose):
        raise SplitlabError(f"--choose-gradient {choose_gradient} returned {type(choose).__name__}, not a "
                            "choose_gradient(H, step) function")
    return MaliciousServer(choose, keep_tensors=True)


def shrink_activations(context: RoleContext) -> ChooseGradient:
    """A malicious callback for demonstrations: G = H, the gradient of ||H||^2 / 2, so every client step
    pulls its activations towards zero instead of towards the task."""
    return lambda h, step: h.detach().clone()
