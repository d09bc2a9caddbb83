"""FedLeak: partial gradient matching and gradient regularisation (Fan et al., USENIX Security 2025).

    Algorithm (Alg. 1; settings and their sources in `attacks.hfl.fedleak.settings.FedLeakSettings`):
      given theta, the upload u, the batch size B (and, for FedAvg, lr, epochs and mini-batch size)
      g  = u                                   FedSGD
           u / (lr * steps)                    FedAvg: the server's gradient estimate
           (/ k more under secure aggregation of k clients)
      y  = labels inferred from g's final layer (counting rule, or FedLeak's column-sum rule)
      x' ~ U(0, 1)   (and label logits at the inferred labels when they are refined jointly)
      for j in 1..I:
        g'  = grad_theta CE(F(x'; theta), y')
        L   = top-R% |g'| (whole gradient, or per layer), not differentiated
        D   = ||g'[L] - g[L]||_1 + 1 - cos(g'[L], g[L]) + alpha TV(x') + beta sum_l ||ReLU_l(x')||_1
        phi = k grad D / ||grad D||                       (per restart and variable)
        d   = (1 - lambda') grad D(x') + lambda' grad D(x' + phi),  D at the probe on the same L
        x'  <- clip_[0,1](Adam_step(d))
      return x' at the lowest D seen (or, as Alg. 1, the last x': `answer`)

Restarts are engine trials. Presets `fedleak.paper`, `fedleak.quick`.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Mapping

import torch
from torch import nn

from attacks.kit import (L1, QUIET, Adam, Block, BoxClamp, Cosine, EngineOptions, FedAvgObservation, FedAvgUpdate,
                         FedSGDGradient, FedSGDObservation, Objective, Observation, Prior, Reconstruction, Schedule,
                         SplitlabError, Sum, UploadAttack, count_labels, engine_context, fedleak_labels,
                         initial_variables, run, tv_l1, upload_needs)
from attacks.hfl.fedleak.parts import ActivationL1, GlobalTopMagnitude, GradientBlend, TopMagnitude, activation_l1
from attacks.hfl.fedleak.settings import FedLeakSettings

__all__ = ["FedLeak", "estimated_gradient", "infer_labels"]


def local_steps(observation: FedAvgObservation) -> int:
    """SGD steps one client took: epochs x mini-batches of its own batch."""
    per_client = observation.batch_size // observation.clients
    return observation.local_epochs * math.ceil(per_client / observation.local_batch_size)


def estimated_gradient(observation: FedSGDObservation | FedAvgObservation) -> tuple[torch.Tensor, ...]:
    """The mean per-example-batch gradient the server reads off an upload: the FedSGD gradient, or the
    FedAvg update / (lr x local steps); a sum over k securely aggregated clients is divided by k."""
    if observation.kind == "fedsgd":
        scale = 1.0 / observation.clients
        upload = observation.gradient
    else:
        scale = 1.0 / (observation.clients * observation.local_lr * local_steps(observation))
        upload = observation.update
    return tuple(upload) if scale == 1.0 else tuple(t * scale for t in upload)


def infer_labels(observation: FedSGDObservation | FedAvgObservation, rule: str) -> torch.Tensor:
    """Labels from the final layer of the estimated gradient by the counting or FedLeak's rule, shape (B,)."""
    as_gradient = FedSGDObservation(model=observation.model, gradient=estimated_gradient(observation),
                                    batch_size=observation.batch_size, defence=observation.defence)
    return count_labels(as_gradient) if rule == "count" else fedleak_labels(as_gradient)


@dataclass(frozen=True)
class FedLeak(UploadAttack):
    settings: FedLeakSettings = FedLeakSettings(preset="fedleak.paper")
    name = "fedleak"
    requires = upload_needs()

    def check(self, observation: Observation) -> None:
        super().check(observation)
        if self.settings.fedavg == "unroll" and observation.kind == "fedavg" and observation.clients > 1:
            raise SplitlabError("fedleak cannot unroll the local steps of a secure aggregate; use its gradient model")
        if self.settings.beta > 0 and not any(isinstance(m, nn.ReLU) for m in observation.model.network.modules()):
            raise SplitlabError(f"fedleak's activation prior (beta {self.settings.beta}) reads ReLU outputs, and model "
                                f"{observation.model.arch} has none; use --beta 0 or a ReLU model (convnet, resnet10)")

    def __call__(self, observation: FedSGDObservation | FedAvgObservation, *, seed: int = 0,
                 engine: EngineOptions = QUIET, init: Mapping[str, torch.Tensor] | None = None) -> Reconstruction:
        self.check(observation)
        s = self.settings
        network = observation.model.network
        params = dict(observation.model.params)
        if observation.kind == "fedavg" and s.fedavg == "unroll":
            simulator = FedAvgUpdate(network, lr=observation.local_lr, epochs=observation.local_epochs,
                                     batch_size=observation.local_batch_size)
            observed = observation.update
            activations = Prior("activations", "x", ActivationL1(network, params), s.beta)
        else:       # the activation L1 reads the ReLU outputs of the simulator's own forward pass
            simulator = FedSGDGradient(network, record=(nn.ReLU,) if s.beta > 0 else ())
            observed = estimated_gradient(observation)
            activations = Prior("activations", "x", activation_l1, s.beta, on_simulation=True)
        if observation.labels is not None:
            labels, rule, refine = observation.labels, "known", False
        else:
            labels, rule, refine = infer_labels(observation, s.label_rule), s.label_rule, s.refine_labels
        labels = labels.to(observation.model.device)

        subset = GlobalTopMagnitude(s.ratio) if s.selection == "global" else TopMagnitude(s.ratio)
        match = Sum(((1.0, L1(subset=subset, mean=s.l1_mean)),) * s.l1 + ((1.0, Cosine(subset=subset)),) * s.cosine)
        priors = ((Prior("tv", "x", tv_l1, s.alpha),) if s.alpha > 0 else ()) + ((activations,) if s.beta > 0 else ())
        objective = Objective(simulator=simulator, match=match, priors=priors)

        variables = initial_variables(observation, s.restarts, seed, label_logits=False, init=init, images="uniform")
        update = ("x",)
        if refine:
            one_hot = torch.nn.functional.one_hot(labels, observation.model.num_classes)
            variables["label_logits"] = (s.label_logit * one_hot).to(variables["x"].dtype).expand(
                s.restarts, -1, -1).clone()
            update = ("x", "label_logits")
        blend = (GradientBlend(s.blend, s.k, lookahead=s.probe == "lookahead"),) if s.blend > 0 else ()
        schedule = Schedule((Block(update, Adam(s.lr), s.iterations, hooks=blend + (BoxClamp(0.0, 1.0, first=1),)),))
        target = {"observed": list(observed), "context": engine_context(observation, labels)}
        result = run(objective, variables, target, schedule, engine, keep=update)
        answer, loss = result.best, result.best_loss
        if s.answer == "final":                       # Alg. 1's x'_I, ranked by its own D
            answer, loss = result.final, result.final_loss(objective.weights())
        if refine:
            trial_labels, rule = answer["label_logits"].argmax(-1), f"{rule}+joint"
        else:
            trial_labels = labels.expand(s.restarts, -1)
        return Reconstruction(attack=self.name, preset=s.preset, trials=answer["x"], loss=loss,
                              history=result.trace, diverged=result.diverged, seconds=result.seconds,
                              steps=schedule.steps, initial=variables["x"], labels=trial_labels, label_rule=rule,
                              extras={"inferred_labels": labels.tolist()})
