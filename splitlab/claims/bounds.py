"""Claims of *Theoretically Understanding Data Reconstruction Leakage in Federated Learning* (anonymous ICLR 2024
submission; later arXiv 2408.12119).

The paper bounds an attack's expected error at the FedAvg model w_t by 2 E||x - R(w*)||^2 + L_R^2 Phi(t) (Theorem
1; Theorem 2 with partial participation), estimates L_R with AutoLip on a 20-layer unrolled surrogate, and reads the
bounds of DLG, iDLG, InvGrad and GGL off figures on MNIST, FMNIST and CIFAR-10 (no numbers in its text). The lab's
`splitlab bounds` runs l2-logistic regression on scikit-learn's 8x8 digits; its proof steps are checked exactly by
`splitlab theory` (the `bounds-*` checks).
"""
from splitlab.claims.model import Claim, Measure, Select
from splitlab.claims.rules import Beats, Holds, Trend
from splitlab.claims.stats import FACTOR

PAPER = "bounds"
ATTACKS = ()
"""The attacks whose declared deviations belong with this paper's claims (its own and the baselines it runs)."""
CITATION = ("Theoretically Understanding Data Reconstruction Leakage in Federated Learning. Anonymous ICLR 2024 "
            "submission (later arXiv 2408.12119).")
DEVIATIONS = ()
"""Deviations of `splitlab bounds` are declared in theory_checks.bounds.deviations."""

DIGITS = ("scikit-learn's 8x8 digits (d = 64), binary l2-LogReg on digits 0 and 1, 100 attacked samples with 10 "
          "starts each, 200 GD steps per attack, the surrogate fit on 1,000 of those trials, GGL with a PCA-linear "
          "decoder; the paper: MNIST, FMNIST and CIFAR-10 at full size, GGL with a pretrained GAN")
SETTING = "l2-LogReg, T = 100 rounds, E = 2 local steps, N = 10 devices; no numbers in the text (log-scale figures)"
EVERY = Select({}, "every cell")
VACUOUS = ("every bound the lab's surrogate gives is vacuous (1e22 to 1e300 against d = 64: its fitted L_R is "
           "1e29 to 1e72, its fits 3 to 60 times worse than the paper's), so whether one holds or which is smaller "
           "is decided by the fit, not by the attacks")
NONVACUOUS = {"any_bound_below_d": True}
"""Cells where some bound says something (below d): there the comparison counts."""
ERRORS = ("mean squared error per image at round T over the 100 samples and 10 starts (attacks.<name>."
          "mean_error_T), paired within each seed's cell")


def _flag(sweep: str, flag: str, what: str, most: bool = False) -> Measure:
    """A yes/no of `splitlab bounds` (1 when it holds), over the sweep's cells."""
    return Measure(sweep, Holds(EVERY, flag, most), f"{flag}: {what}, in every cell" + (" (most)" if most else ""))


def _check(check: str, what: str) -> Measure:
    return Measure("jast-lemmas", Holds(Select({}, "theory"), f"matched_by_check.{check}"),
                   f"matched_by_check.{check}: 1 when {what} (exact, float64)")


def _trend(axis: str, values: tuple, direction: int, symbol: str) -> Measure:
    """Phi(T) of `splitlab bounds`' trend runs (columns trends.<axis>.<value>.phi_T of each seed's cell)."""
    columns = {v: f"trends.{axis}.{v}.phi_T" for v in values}
    return Measure("bounds-surrogate", Trend(select=EVERY, x=axis, metric="phi_T", direction=direction,
                                             scale=FACTOR, columns=columns, guard=""),
                   f"Phi(T), the bound's factor of L_R^2 (the part of Theorem 1 that depends on {symbol}; each "
                   f"attack's bound is 2 err(w*) + L_R^2 Phi(T)), at {axis} = {', '.join(map(str, values))}, the "
                   "ends paired by seed")


def _errors(a: str, b: str, sweep: str = "bounds-surrogate") -> Measure:
    return Measure(sweep, Beats(a=Select({}, a), b=Select({}, b), metric=f"attacks.{a}.mean_error_T",
                                metric_b=f"attacks.{b}.mean_error_T", higher_is_better=False, scale=FACTOR,
                                guard=""), f"{a} / {b}: {ERRORS}")


CLAIMS: list[Claim] = [
    # --- Theorems 1 and 2: the bound holds -------------------------------------------------------------------------
    Claim("bounds.thm1.error-below-bound", PAPER, "Theorem 1, Figures 3-5",
          "Every attack's reconstruction error stays below its Theorem 1 bound in every round.",
          f"single image; DLG, iDLG, InvGrad, GGL; {SETTING}",
          _flag("bounds-surrogate", "all_mean_below_bound", "every attack's mean error is at most its bound in every "
                "evaluated round"),
          reduced=DIGITS, not_comparable=VACUOUS, comparable_if=NONVACUOUS),
    Claim("bounds.thm1.batch-below-bound", PAPER, "Theorem 1, Figures 10-12",
          "The bound also holds for batch reconstruction.",
          "batch 20 (10, 15, 25, 30 in Fig. 9b); N = 15 / 10 / 5 devices for MNIST / FMNIST / CIFAR-10",
          _flag("bounds-batch", "all_mean_below_bound", "every attack's mean batch error is at most its bound"),
          reduced=DIGITS + "; batches of 2, 4, 8", not_comparable=VACUOUS, comparable_if=NONVACUOUS),
    Claim("bounds.thm1.fedavg-rate", PAPER, "Theorem 1 (proof, after Li et al. 2020)",
          "FedAvg's iterates approach w* at the rate the bound uses: E||w_t - w*||^2 <= v / (gamma + t).",
          "eta_t = 2 / (mu (gamma + t)), gamma = max{8L/mu, E}; v <= 4B/mu^2 + (gamma + 1) Delta_1",
          _check("bounds-fedavg-rate", "the mean squared distance over FedAvg seeds stays below v / (gamma + t)"),
          exact=True),
    Claim("bounds.thm2.partial-rate", PAPER, "Theorem 2",
          "With partial participation (K devices drawn with replacement) the rate holds with B + C, C = 4E^2G^2/K.",
          "Assumption 6: K draws proportional to p_k, averaged with 1/K",
          _flag("bounds-surrogate", "convergence.partial.holds", "the partial-participation FedAvg run stays below "
                "v / (gamma + t) at every step"),
          exact=True),
    Claim("bounds.thm1.step-size", PAPER, "Theorem 1 (proof)",
          "The theorem's step sizes meet the proof's conditions eta_1 <= 1/(4L) and eta_t <= 2 eta_{t+E}.",
          "eta_t = 2 / (mu (gamma + t)), gamma = max{8L/mu, E}",
          _check("bounds-step-size", "both conditions hold along the schedule"), exact=True),
    Claim("bounds.sec5.smoothness", PAPER, "Sec. 5, App. C.1.1",
          "The paper's constant L = max_k mean||x||^2 / 4 + 2 gamma bounds the l2-LogReg Hessian.",
          "gamma (the l2 coefficient) = 0.1",
          _check("bounds-smoothness", "the paper's L is at least the Hessian's largest eigenvalue"), exact=True),
    Claim("bounds.lem1.autolip", PAPER, "Lemma 1",
          "For a feed-forward network with 1-Lipschitz activations, AutoLip's bound is the product of the layers' "
          "spectral norms.",
          "L_R <= prod_h ||M_h||_2 over the 20 unrolled layers",
          _check("bounds-autolip-mlp", "AutoLip on an MLP equals the product of its spectral norms"), exact=True),
    # --- Orderings of the attacks -----------------------------------------------------------------------------------
    Claim("bounds.c2.idlg-below-dlg", PAPER, "Sec. 5, Figures 3-8",
          "iDLG's bound is below DLG's: iDLG is intrinsically the stronger attack.",
          f"on MNIST, FMNIST and CIFAR-10, single image; {SETTING}",
          _flag("bounds-surrogate", "idlg_below_dlg_by_bound", "iDLG's bound at round T is below DLG's"),
          reduced=DIGITS, not_comparable=VACUOUS, comparable_if=NONVACUOUS),
    Claim("bounds.c8.idlg-below-dlg-batch", PAPER, "App. C.2, Figures 10-12",
          "For batch reconstruction too, iDLG's bound is below DLG's.",
          "batch 20; N = 15 / 10 / 5 devices for MNIST / FMNIST / CIFAR-10",
          _flag("bounds-batch", "idlg_below_dlg_by_bound", "iDLG's bound at round T is below DLG's"),
          reduced=DIGITS + "; batches of 2, 4, 8", not_comparable=VACUOUS, comparable_if=NONVACUOUS),
    Claim("bounds.c2.idlg-labels", PAPER, "Sec. 5",
          "iDLG's closed-form label is exact for a single sample (the paper's reason for its smaller bound).",
          "'accurate label estimation' makes iDLG's reconstruction more stable",
          _check("bounds-idlg-labels", "the closed-form label is right for every single sample"), exact=True),
    Claim("bounds.c5.ggl-smallest", PAPER, "Sec. 5, Figures 3-8",
          "GGL's bound is much smaller than DLG's, iDLG's and InvGrad's: a learnt generator stabilises the attack.",
          f"single image; {SETTING}",
          _flag("bounds-surrogate", "ordering.bound.ggl_smallest", "GGL's bound at round T is the smallest of the four"),
          reduced=DIGITS,
          not_comparable="the paper's GGL optimises the latent of a pretrained GAN generator; the lab's decodes with "
                         "a PCA-linear map on 8x8 digits, so its L_R is not the paper's; and " + VACUOUS),
    Claim("bounds.sec521.ggl-tight", PAPER, "Sec. 5.2.1",
          "In some cases GGL's bound is close to its best empirical error.",
          f"single image; {SETTING}",
          _flag("bounds-surrogate", "ordering.gap.ggl_tightest", "GGL's bound over its best error is the smallest "
                "ratio of the four", most=True),
          reduced=DIGITS, not_comparable="the lab's GGL decoder is PCA-linear, not a GAN; and " + VACUOUS),
    Claim("bounds.c1.empirical-order", PAPER, "Sec. 5, Figures 3-8",
          "By best empirical error GGL < InvGrad <= iDLG <= DLG in most cases.",
          f"dashed curves on MNIST, FMNIST and CIFAR-10; {SETTING}",
          _flag("bounds-surrogate", "ordering.error.invgrad_below_idlg", "InvGrad's best error is at most iDLG's (the "
                "part of the order that does not rest on GGL's generator)", most=True),
          reduced=DIGITS,
          reason="on 8x8 grey digits 0/1 iDLG's analytic label makes it the strongest attack (its mean error is "
                 "about a twentieth of InvGrad's, bounds.abs.invgrad-complex); the paper's order is read off its "
                 "log-scale figures, clearest on CIFAR-10, which is not in the data root"),
    Claim("bounds.c13.bounds-track-errors", PAPER, "Sec. 6, Figure 9c",
          "The bounds are consistent with the attacks' average empirical errors: ranked by bound, the attacks rank "
          "as by mean error.",
          f"Figure 9c; {SETTING}",
          _flag("bounds-surrogate", "ordering.tau_mean_positive", "Kendall's tau between the bounds and the mean "
                "errors of the four attacks is positive", most=True),
          reduced=DIGITS, reason=VACUOUS),
    Claim("bounds.abs.idlg-vs-dlg", PAPER, "Abstract, Sec. 5",
          "Empirically iDLG is comparable to or slightly better than DLG.",
          f"dashed curves on MNIST, FMNIST and CIFAR-10; {SETTING}",
          _errors("idlg", "dlg"), reduced=DIGITS),
    Claim("bounds.abs.invgrad-complex", PAPER, "Abstract, Sec. 5",
          "On complex data InvGrad beats DLG and iDLG (its TV prior helps).",
          f"CIFAR-10 single images and batches; {SETTING}",
          _errors("invgrad", "idlg"), reduced=DIGITS,
          not_comparable="8x8 grey digits are not the complex data the claim is about (CIFAR-10); on them iDLG's "
                         "exact label makes it the strongest attack"),
    Claim("bounds.c9.invgrad-cifar-batch", PAPER, "App. C.2, Figure 12",
          "On CIFAR-10 batches InvGrad's bound is below DLG's and iDLG's (the TV prior helps on complex data).",
          "CIFAR-10, batch 20, N = 5 devices",
          reason="dataset: CIFAR-10 is not in this lab's data root; the bounds run on 8x8 grey digits"),
    Claim("bounds.figs6-8.linconvnet", PAPER, "Figures 6-8",
          "The bounds and orderings carry over to a convex two-layer linear convolutional network.",
          "2-LinConvNet (Pilanci and Ergen 2020), single image, MNIST, FMNIST, CIFAR-10",
          reason="model: the lab implements only l2-LogReg for the bounds, not the 2-LinConvNet"),
    # --- Trends in E, N, T and the batch size ----------------------------------------------------------------------
    Claim("bounds.c7.local-steps", PAPER, "Sec. 5, Figures 3-5 (a)",
          "The bound grows with the number of local steps E.",
          f"single image; {SETTING}; FedAvg is less stable with larger E",
          _trend("E", (1, 2, 4), 1, "E (through B's 8(E-1)^2 G^2 and gamma)"), reduced=DIGITS),
    Claim("bounds.c7.devices", PAPER, "Sec. 5, Figures 3-5 (b)", "The bound grows with the number of devices N.",
          f"single image; {SETTING}; N ticks 25, 30, 35 in Fig. 5b",
          _trend("N", (5, 10, 20), 1, "N (through Gamma, sigma_k and G)"), reduced=DIGITS),
    Claim("bounds.c7.rounds", PAPER, "Sec. 5, Figures 3-5 (c)",
          "The bound falls as training runs for more rounds T (w_t nears w*).",
          f"single image; {SETTING}",
          _trend("T", (25, 50, 100, 200), -1, "T (through 1 / (gamma + T))"), exact=True),
    Claim("bounds.c12.batch-size", PAPER, "Sec. 6, Figure 9b",
          "Reconstruction errors (and their bounds) grow with the batch size.",
          "MNIST, batch 10, 15, 20, 25, 30; 'matching Geiping et al.'s empirical observations'",
          Measure("bounds-batch", Trend(select=EVERY, x="batch", metric="attacks.idlg.bound_T", scale=FACTOR,
                                        guard=""),
                  "iDLG's bound at round T against the batch size, the ends paired by seed"),
          reduced=DIGITS + "; batches of 2, 4, 8", not_comparable=VACUOUS, comparable_if=NONVACUOUS),
    Claim("bounds.appc2.batch-errors", PAPER, "App. C.2, Figure 9b",
          "Reconstruction errors grow with the batch size.",
          "MNIST, batch 10, 15, 20, 25, 30; batch errors are much larger than single-image ones",
          Measure("bounds-batch", Trend(select=EVERY, x="batch", metric="attacks.idlg.mean_error_T",
                                        higher_is_better=False, scale=FACTOR, guard=""),
                  "iDLG's mean error per image at round T against the batch size, the ends paired by seed"),
          reduced=DIGITS + "; batches of 2, 4, 8"),
    Claim("bounds.fig9a.classes", PAPER, "Figure 9a",
          "The bounds stay stable as the number of classes grows for DLG, iDLG and GGL, and grow for InvGrad.",
          "MNIST, 2, 4, 6, 8 classes, l2-LogReg (multi-class; the lab's: softmax)",
          Measure("bounds-classes", Beats(a=Select({"digits": "0,1,2,3"}, "4 classes"),
                                          b=Select({"digits": "0,1"}, "2 classes"), metric="attacks.invgrad.bound_T",
                                          scale=FACTOR, guard=""),
                  "InvGrad's bound at round T, 4 classes (digits 0-3) over 2 (digits 0-1), paired by seed: the part "
                  "of the claim that moves (the others are claimed stable)"),
          reduced=DIGITS.replace("binary l2-LogReg on digits 0 and 1", "softmax l2-LogReg on digits 0-1 and 0-3"),
          not_comparable=VACUOUS, comparable_if=NONVACUOUS),
    Claim("bounds.fig13.robbing", PAPER, "Figures 13-15",
          "The closed-form Robbing attack has the smallest bounds, below GGL's.",
          f"MNIST, FMNIST, CIFAR-10; {SETTING}",
          reason="model: the lab does not implement the Robbing-the-Fed attack (an imprint module in the model)"),
    Claim("bounds.fig1.initialisation", PAPER, "Figure 1",
          "An attack's error is sensitive to the mean and spread of its random initialisation.",
          "DLG and iDLG over the Gaussian start's mean and std (default 1 and 1 in the caption); no numbers",
          Measure("bounds-init", Trend(select=Select({"init-std": 1.0}, "std 1"), x="init-mean",
                                       metric="attacks.dlg.mean_error_T", higher_is_better=False, scale=FACTOR,
                                       guard=""),
                  "DLG's mean error per image at round T against the start's mean 0, 1, 2 (std 1), the ends paired "
                  "by seed: read as a start farther from the images' [0, 1] range ending worse"),
          reduced=DIGITS.replace("GGL with a PCA-linear decoder", "DLG and iDLG only")
                  + "; seeds 0-2"),
]

PAPER_PRESETS: dict = {}
"""The paper's attacks run inside `splitlab bounds` with its own settings; no registry preset stands for them."""
