"""The suite: every check by name, in the paper's order, and the runner the CLI and the tests share."""
from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass
from typing import Callable, Iterator, Sequence

import torch

from theory_checks import convergence, invariance
from theory_checks.bounds import checks as bounds
from theory_checks.records import DTYPES, CheckResult
from vfl.errors import SplitlabError

Check = Callable[..., CheckResult]

CHECKS: dict[str, Check] = {
    "lemma1-sgd": invariance.lemma1_sgd,
    "lemma1-momentum": invariance.lemma1_momentum,
    "lemma1-semi-orthogonal": invariance.lemma1_semi_orthogonal,
    "corollary2-bias-lemma1": invariance.corollary2_bias_lemma1,
    "corollary1-invertible-layer": invariance.corollary1_invertible_layer,
    "lemma2-fake-gradients": invariance.lemma2_fake_gradients,
    "corollary2-bias-lemma2": invariance.corollary2_bias_lemma2,
    "lemma3-cut-layer": invariance.lemma3_cut_layer,
    "remark2-optimal-loss": invariance.remark2_optimal_loss,
    "remark4-adam-dense": invariance.remark4_adam_dense,
    "remark4-adam-permutation": invariance.remark4_adam_permutation,
    "remark4-adam-sign-flip": invariance.remark4_adam_sign_flip,
    "example1-adam-rotation": convergence.example1_adam_rotation,
    "lemma4-preconditioner-bound": convergence.lemma4_preconditioner_bound,
    "lemma5-descent": convergence.lemma5_descent,
    "lemma6-pl-descent": convergence.lemma6_pl_descent,
    "bounds-smoothness": bounds.smoothness,
    "bounds-step-size": bounds.step_size,
    "bounds-power-iteration": bounds.power_method,
    "bounds-autolip-mlp": bounds.autolip_mlp,
    "bounds-autolip-residual": bounds.autolip_residual,
    "bounds-idlg-labels": bounds.idlg_labels,
    "bounds-gamma-nonnegative": bounds.gamma_nonnegative,
    "bounds-fedavg-rate": bounds.fedavg_rate,
}
"""Name -> check. Each check is called as `check(dtype=...)` and returns a `CheckResult` of that name."""


def select_checks(only: Sequence[str] | None) -> list[str]:
    """The names to run, in suite order; an unknown name is an error that lists the valid ones."""
    if not only:
        return list(CHECKS)
    unknown = [name for name in only if name not in CHECKS]
    if unknown:
        raise SplitlabError(f"unknown check {', '.join(map(repr, unknown))}; choose from: {', '.join(CHECKS)}")
    return [name for name in CHECKS if name in set(only)]


def parse_dtype(name: str) -> torch.dtype:
    if name not in DTYPES:
        raise SplitlabError(f"unknown dtype {name!r}; choose one of: {', '.join(DTYPES)}")
    return DTYPES[name]


@contextlib.contextmanager
def one_intra_op_thread() -> Iterator[None]:
    """Run the block with one intra-op thread and restore the caller's setting afterwards.

    The checks multiply matrices of a few dozen entries; on a shared 2-core machine extra intra-op
    threads only add synchronisation (a check measured 0.3 s on one thread, 0.8-17 s on two).
    """
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


@dataclass(frozen=True)
class SuiteResult:
    results: tuple[CheckResult, ...]
    seconds: dict[str, float]

    @property
    def all_matched(self) -> bool:
        return all(r.matched for r in self.results)


def run_checks(names: Sequence[str] | None = None, *, dtype: torch.dtype = torch.float64) -> SuiteResult:
    """Run the named checks (all by default) in `dtype` and time each."""
    results, seconds = [], {}
    with one_intra_op_thread():
        for name in select_checks(names):
            start = time.perf_counter()
            result = CHECKS[name](dtype=dtype)
            seconds[name] = time.perf_counter() - start
            if result.name != name:
                raise RuntimeError(f"check registered as {name!r} returned a record named {result.name!r}")
            results.append(result)
    return SuiteResult(tuple(results), seconds)
