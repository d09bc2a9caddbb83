"""The attacks of Alg. 4 as engine runs: plain GD on the gradient-matching loss, then Clip(0, 1).

    x'_{i+1} = Clip(x'_i - eta grad_{x'} [GML(g_w(x, y), g_w(x', y')) + lam Reg(x')], 0, 1),  i < I

- dlg: soft label y' = softmax(l'), l'_0 ~ N(0, 1), optimised jointly with x'; GML = ||.||^2 (Zhu et al.).
- idlg: the label by iDLG's sign rule (`LogReg.idlg_label`), then the same GML (Zhao et al.).
- invgrad: the sign-rule label, GML = 1 - cos, Reg = TV (anisotropic, `tv_l1`) (Geiping et al.).
- ggl: x' = G(z'), G a PCA-linear decoder (mean + top-k principal directions scaled by sqrt(eigenvalue),
  fitted on all of digits), z'_0 ~ N(0, I_k), the sign-rule label, GML = ||.||^2, Reg = (||z'||^2 - k)^2,
  GD on z', output Clip(G(z'_I), 0, 1), against its own setting's clipping defence T(g, S) = g / max(1, ||g|| / S):
  the client uploads T(g) and GGL matches T of its simulated gradient (`ggl_clip` = S; the paper gives no S,
  we take 1, below most per-sample gradient norms here; 0 turns it off). DEVIATION: the paper uses a
  pretrained GAN generator.

g_w(x, y) = grad_w [CE(F(x; w), y) + lam ||w||^2] is the full per-sample gradient of the clients' loss
(`RegularisedGradient`: the engine's `FedSGDGradient` plus 2 lam w). The attack returns the last iterate
x'_I (Alg. 1 returns x'_I, not the best iterate). Choices where the paper is silent, all settings:
the init N(init_mean, init_std^2) (Alg. 4's N(0, 1) by default; Fig. 1 uses N(1, 1)), Clip(0, 1)
rather than Alg. 4's max(., 0) (Alg. 1's; both are 1-Lipschitz), step sizes, I and the TV and latent weights (§4: not given).
Trials are (weights, sample, init) triples run together by `attacks.engine.run`; the same inits are used
at every weight vector, so R(w_a) - R(w_b) compares one init.

Batches (the paper's App. C.2): a trial's target is B images whose per-sample gradients the client averages
(the mean of the regularised per-sample gradients, 2 lam w included once). The sign rule cannot count the
labels of a binary batch (sum_i (g - 2 lam w)_i mixes both classes), so idlg, invgrad and ggl are given the
batch's labels, slot by slot (what Yin et al.'s rule returns when it is right); dlg optimises B soft labels.
A batch is recovered up to the order of its slots: each trial's error is that of the best assignment of
reconstructed slots to true images (Hungarian), per image, ||X - P X'||^2 / B (the permutation is an
isometry, so Theorem 1 holds for the matched error as for the raw one).
"""
from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Sequence

import torch

from attacks.engine import (SGD, Block, BoxClamp, Cosine, EngineOptions, FedSGDGradient, Hook, Objective, Prior, Schedule,
                            SquaredL2, run, tv_l1)
from theory_checks.bounds.logreg import DTYPE, LogReg, load_digits
from vfl.errors import SplitlabError
from vfl.runtime import generator

ATTACKS = ("dlg", "idlg", "invgrad", "ggl")


def _default_lrs() -> dict[str, float]:
    # The cosine match (invgrad) has gradients about 100x smaller than the squared-L2 ones here.
    return {"dlg": 0.5, "idlg": 0.5, "invgrad": 50.0, "ggl": 0.5}


@dataclass(frozen=True)
class AttackSettings:
    """Alg. 4's free hyperparameters (the paper gives none of them): I gradient-descent steps at a step
    size eta per attack, x0 ~ N(mean, std^2), invgrad's TV weight and GGL's latent prior
    lam (||z||^2 - k)^2 with k PCA components (`latent` = (k, lam)). `init` = (mean, std)."""
    steps: int = 200
    lr: dict[str, float] = field(default_factory=_default_lrs)
    init: tuple[float, float] = (0.0, 1.0)
    tv: float = 1e-2
    latent: tuple[int, float] = (16, 1e-3)
    ggl_clip: float = 1.0
    """S of GGL's clipping defence T(g, S) = g / max(1, ||g|| / S); 0: none."""
    dataset: str = "digits"
    """The images GGL's PCA decoder is fitted on (all ten digits of them)."""


@dataclass(frozen=True)
class RegularisedGradient:
    """g_w(x, y) = FedSGDGradient + 2 lam w: the gradient of the clients' regularised per-sample loss."""
    inner: FedSGDGradient
    lam: float

    def __call__(self, variables, context) -> list[torch.Tensor]:
        return [g + 2 * self.lam * w for g, w in zip(self.inner(variables, context), context["params"].values())]


@dataclass(frozen=True)
class PCADecoder:
    """G(z) = mean + z (sqrt(eig_k) V_k^T): a Gaussian fit of the data, z ~ N(0, I_k) (GGL deviation)."""
    mean: torch.Tensor
    basis: torch.Tensor
    """(k, d)"""

    def __call__(self, z: torch.Tensor) -> torch.Tensor:
        return self.mean + z @ self.basis


@functools.lru_cache(maxsize=4)
def pca_decoder(latent: int, dataset: str = "digits") -> PCADecoder:
    """Fitted on every image of the dataset, all ten digits (the paper's GGL generator is trained on the whole
    dataset): 1,797 digits, or mnist5k's 4,000 train images."""
    x = load_digits(tuple(range(10)), dataset).flat
    mean = x.mean(0)
    _, s, vh = torch.linalg.svd(x - mean, full_matrices=False)
    scale = s[:latent] / (x.shape[0] - 1) ** 0.5
    return PCADecoder(mean, scale[:, None] * vh[:latent])


@dataclass(frozen=True)
class Decoded:
    """The simulator of GGL: x = G(z) reshaped to the image, then the gradient simulator."""
    inner: RegularisedGradient
    decoder: PCADecoder
    shape: tuple[int, ...]

    def __call__(self, variables, context) -> list[torch.Tensor]:
        z = variables["z"]
        return self.inner({"x": self.decoder(z).view(z.shape[0], *self.shape)}, context)


def clip_norm(g: torch.Tensor, bound: float) -> torch.Tensor:
    """T(g, S) = g / max(1, ||g|| / S) over the last dimension (one upload per row)."""
    return g / (g.norm(dim=-1, keepdim=True) / bound).clamp_min(1.0)


@dataclass(frozen=True)
class Clipped:
    """A simulator whose gradient the client clips before uploading it (GGL's defence T)."""
    inner: Decoded
    bound: float

    def __call__(self, variables, context) -> list[torch.Tensor]:
        return [clip_norm(g.flatten(), self.bound).view_as(g) for g in self.inner(variables, context)]


class ClampFirst(BoxClamp):
    """Clip(0, 1) on the block's first variable (the image) only, not on DLG's label logits."""

    def after_step(self, params):
        super().after_step(params[:1])


@dataclass(eq=False)
class Snapshots(Hook):
    """Records a copy of the block's first variable after the steps in `at` (1-based; after the clamp when
    listed after it): the intermediate iterates x'_i the unrolled surrogate is fitted to."""
    at: frozenset[int]
    taken: dict[int, torch.Tensor] = field(default_factory=dict)
    step: int = 0

    def after_step(self, params):
        self.step += 1
        if self.step in self.at:
            self.taken[self.step] = params[0].detach().clone()


@dataclass(frozen=True)
class AttackRun:
    """One attack at P weight vectors, M samples (or batches of B), R inits; a sample's B images flattened
    to one vector of B d. `iterates` (len(steps), P, M, R, B d) at `steps`; `final` (P, M, R, B d) = x'_I;
    `start` (M, R, B d) = x'_0 (GGL: G(z'_0)); `errors` (P, M, R) per image, ||X - P X'_I||^2 / B with the
    best slot assignment P (the identity for B = 1)."""
    attack: str
    steps: tuple[int, ...]
    iterates: torch.Tensor
    final: torch.Tensor
    start: torch.Tensor
    errors: torch.Tensor
    label_accuracy: float | None
    """Share of trials (slots) with the right label: the sign rule's (idlg, invgrad, ggl, B = 1), argmax l'_I
    (dlg); None where the labels were given (B > 1)."""
    seconds: float
    batch: int = 1
    labels: str = "sign rule"
    """Where the labels came from: sign rule, given (B > 1) or optimised (dlg)."""


def as_batches(x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Single samples x (M, C, H, W), y (M,) as batches of one; batches x (M, B, C, H, W), y (M, B) as they are."""
    return (x, y) if y.dim() == 2 else (x.unsqueeze(1), y.unsqueeze(1))


def observe(model: LogReg, weights: torch.Tensor, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """The uploaded gradients for every weight vector and sample (or batch): g_w(x_m, y_m), or the mean of
    g_w over the batch's images; (P, M, p)."""
    x, y = as_batches(x, y)
    return model.sample_grads(weights[:, None, None], x.flatten(2)[None], y[None]).mean(2)


def matched(final: torch.Tensor, truth: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(errors, slots): per trial the squared error per image under the best assignment of the B reconstructed
    slots to the B true images, and which image each slot was assigned. final (P, M, R, B, d), truth (M, B, d);
    errors (P, M, R), slots (P, M, R, B)."""
    B = truth.shape[1]
    cost = (final[..., :, None, :] - truth[None, :, None, None]).square().sum(-1)      # (P, M, R, slot, image)
    if B == 1:
        return cost[..., 0, 0], torch.zeros(cost.shape[:-1], dtype=torch.long)
    from scipy.optimize import linear_sum_assignment

    flat = cost.flatten(0, 2)
    slots = torch.stack([torch.as_tensor(linear_sum_assignment(c.numpy())[1]) for c in flat])
    errors = flat.gather(2, slots[..., None])[..., 0].sum(-1) / B
    return errors.view(cost.shape[:3]), slots.view(cost.shape[:4])


def attack(name: str, model: LogReg, weights: torch.Tensor, x: torch.Tensor, y: torch.Tensor, *, inits: int,
           settings: AttackSettings = AttackSettings(), record: Sequence[int] = (), seed: int = 0) -> AttackRun:
    """Run `name` on the gradients of samples x (M, 1, H, W), labels y (M,), or of batches x (M, B, 1, H, W),
    y (M, B), at weights (P, p), from `inits` starts per sample (the same starts at every weight vector),
    recording iterates after `record` steps."""
    if name not in ATTACKS:
        raise SplitlabError(f"unknown attack {name!r}; choose one of: {', '.join(ATTACKS)}")
    s = settings
    x, y = as_batches(x, y)
    P, M, R, B = weights.shape[0], x.shape[0], inits, x.shape[1]
    image = tuple(x.shape[2:])
    observed = observe(model, weights, x, y)                                   # (P, M, p)
    gen = generator(seed)
    x0 = s.init[0] + s.init[1] * torch.randn(M, R, B, *image, generator=gen, dtype=DTYPE)
    logits0 = torch.randn(M, R, B, model.classes, generator=gen, dtype=DTYPE)
    k, latent_weight = s.latent
    z0 = torch.randn(M, R, B, k, generator=gen, dtype=DTYPE)
    if B == 1:
        labels = model.idlg_label(weights[:, None], observed)[..., None]      # (P, M, 1)
        accuracy, source = float((labels == y[None]).double().mean()), "sign rule"
    else:
        labels, accuracy, source = y[None].expand(P, M, B), None, "given"

    def trials(t: torch.Tensor) -> torch.Tensor:                               # (P, M, ...) -> (P*M*R, ...)
        return t[:, :, None].expand(P, M, R, *t.shape[2:]).flatten(0, 2)

    def starts(t: torch.Tensor) -> torch.Tensor:                               # (M, R, ...) -> (P*M*R, ...)
        return t[None].expand(P, *t.shape).flatten(0, 2)

    gradient = RegularisedGradient(FedSGDGradient(model.network(weights[0])), model.lam)
    context = {"params": {"weight": trials(weights[:, None].expand(P, M, -1))}}
    snapshots = Snapshots(frozenset(record))
    if name == "ggl":
        decoder = pca_decoder(k, s.dataset)
        simulator = Decoded(gradient, decoder, image)
        if s.ggl_clip > 0:
            simulator, observed = Clipped(simulator, s.ggl_clip), clip_norm(observed, s.ggl_clip)
        objective = Objective(simulator, SquaredL2(),
                              (Prior("latent", "z", lambda z: (z.square().sum() - k) ** 2, latent_weight),))
        variables, update, hooks = {"z": starts(z0)}, ("z",), (snapshots,)
    else:
        match = Cosine() if name == "invgrad" else SquaredL2()
        priors = (Prior("tv", "x", tv_l1, s.tv),) if name == "invgrad" else ()
        objective = Objective(gradient, match, priors)
        variables = {"x": starts(x0)}
        if name == "dlg":
            variables["label_logits"] = starts(logits0)
        update = tuple(variables)
        hooks = (ClampFirst(0.0, 1.0), snapshots)
    if name != "dlg":
        context["labels"] = trials(labels)
    target = {"observed": [trials(observed)], "context": context}
    result = run(objective, variables, target, Schedule((Block(update, SGD(s.lr[name]), s.steps, hooks=hooks),)),
                 EngineOptions(description=f"bounds {name}"), per_trial_target=True, keep=update)

    def pixels(t: torch.Tensor) -> torch.Tensor:                               # trial variable -> (P, M, R, d)
        if name == "ggl":
            t = decoder(t).clamp(0.0, 1.0)
        return t.reshape(P, M, R, -1)

    final = pixels(result.final[update[0]])
    steps = tuple(sorted(snapshots.taken))
    iterates = torch.stack([pixels(snapshots.taken[k]) for k in steps]) if steps else final.new_zeros(0, *final.shape)
    start = decoder(z0).reshape(M, R, -1) if name == "ggl" else x0.reshape(M, R, -1)
    errors, slots = matched(final.unflatten(-1, (B, -1)), x.flatten(2))
    if name == "dlg":                                                          # the labels DLG found, slot by slot
        found = result.final["label_logits"].argmax(-1).view(P, M, R, B)
        truth = y[None, :, None].expand(P, M, R, B).gather(3, slots)
        accuracy, source = float((found == truth).double().mean()), "optimised"
    return AttackRun(name, steps, iterates, final, start, errors, accuracy, result.seconds, B, source)
