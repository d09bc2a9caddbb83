"""Claims of *Theoretically Understanding Data Reconstruction Leakage in Federated Learning* (anonymous ICLR 2024
submission; later arXiv 2408.12119).

The paper bounds an attack's expected error at the FedAvg model w_t by 2 E||x - R(w*)||^2 + L_R^2 Phi(t) (Theorem
1; Theorem 2 with partial participation), estimates L_R with AutoLip on a 20-layer unrolled surrogate, and reads the
bounds of DLG, iDLG, InvGrad and GGL off figures on MNIST, FMNIST and CIFAR-10 (no numbers in its text). The lab's
`splitlab bounds` runs l2-logistic regression on scikit-learn's 8x8 digits; its proof steps are checked exactly by
`splitlab theory` (the `bounds-*` checks).
"""
from splitlab.claims.model import AtLeast, Claim, Measure, Select, Trend

PAPER = "bounds"
ATTACKS = ()
"""The attacks whose declared deviations belong with this paper's claims (its own and the baselines it runs)."""
CITATION = ("Theoretically Understanding Data Reconstruction Leakage in Federated Learning. Anonymous ICLR 2024 "
            "submission (later arXiv 2408.12119).")

DIGITS = ("scikit-learn's 8x8 digits (d = 64), binary l2-LogReg on digits 0 and 1, 100 attacked samples with 10 "
          "starts each, 200 GD steps per attack, the surrogate fit on 1,000 of those trials, GGL with a PCA-linear "
          "decoder; the paper: MNIST, FMNIST and CIFAR-10 at full size, GGL with a pretrained GAN")
SETTING = "l2-LogReg, T = 100 rounds, E = 2 local steps, N = 10 devices; no numbers in the text (log-scale figures)"
EVERY = Select({}, "every cell")


def _flag(sweep: str, flag: str, what: str) -> Measure:
    """A yes/no of `splitlab bounds` (1 when it holds), averaged over the sweep's cells: 1.0 when it holds in all."""
    return Measure(sweep, AtLeast(EVERY, flag, 1.0), f"{flag}: {what}, the share of cells where it holds")


def _check(check: str, what: str) -> Measure:
    return Measure("jast-lemmas", AtLeast(Select({}, "theory"), f"matched_by_check.{check}", 1.0),
                   f"matched_by_check.{check}: 1 when {what} (exact, float64)")


def _trend(axis: str, others: dict, direction: int, symbol: str) -> Measure:
    return Measure("bounds-trends", Trend(Select(others, ", ".join(f"{k} {v}" for k, v in others.items())), axis,
                                          "constants.phi_T", direction),
                   f"Phi(T), the bound's factor of L_R^2 (the part of Theorem 1 that depends on {symbol}; each "
                   f"attack's bound is 2 err(w*) + L_R^2 Phi(T)), against {axis}")


CLAIMS: list[Claim] = [
    # --- Theorems 1 and 2: the bound holds -------------------------------------------------------------------------
    Claim("bounds.thm1.error-below-bound", PAPER, "Theorem 1, Figures 3-5",
          "Every attack's reconstruction error stays below its Theorem 1 bound in every round.",
          f"single image; DLG, iDLG, InvGrad, GGL; {SETTING}",
          _flag("bounds-surrogate", "all_mean_below_bound", "every attack's mean error is at most its bound in every "
                "evaluated round"),
          reduced=DIGITS),
    Claim("bounds.thm1.batch-below-bound", PAPER, "Theorem 1, Figures 10-12",
          "The bound also holds for batch reconstruction.",
          "batch 20 (10, 15, 25, 30 in Fig. 9b); N = 15 / 10 / 5 devices for MNIST / FMNIST / CIFAR-10",
          _flag("bounds-batch", "all_mean_below_bound", "every attack's mean batch error is at most its bound"),
          reduced=DIGITS + "; batches of 2, 4, 8"),
    Claim("bounds.thm1.fedavg-rate", PAPER, "Theorem 1 (proof, after Li et al. 2020)",
          "FedAvg's iterates approach w* at the rate the bound uses: E||w_t - w*||^2 <= v / (gamma + t).",
          "eta_t = 2 / (mu (gamma + t)), gamma = max{8L/mu, E}; v <= 4B/mu^2 + (gamma + 1) Delta_1",
          _check("bounds-fedavg-rate", "the mean squared distance over FedAvg seeds stays below v / (gamma + t)")),
    Claim("bounds.thm2.partial-rate", PAPER, "Theorem 2",
          "With partial participation (K devices drawn with replacement) the rate holds with B + C, C = 4E^2G^2/K.",
          "Assumption 6: K draws proportional to p_k, averaged with 1/K",
          _flag("bounds-trends", "convergence.partial.holds", "the partial-participation run stays below "
                "v / (gamma + t) at every step"),
          reduced=DIGITS),
    Claim("bounds.thm1.step-size", PAPER, "Theorem 1 (proof)",
          "The theorem's step sizes meet the proof's conditions eta_1 <= 1/(4L) and eta_t <= 2 eta_{t+E}.",
          "eta_t = 2 / (mu (gamma + t)), gamma = max{8L/mu, E}",
          _check("bounds-step-size", "both conditions hold along the schedule")),
    Claim("bounds.sec5.smoothness", PAPER, "Sec. 5, App. C.1.1",
          "The paper's constant L = max_k mean||x||^2 / 4 + 2 gamma bounds the l2-LogReg Hessian.",
          "gamma (the l2 coefficient) = 0.1",
          _check("bounds-smoothness", "the paper's L is at least the Hessian's largest eigenvalue")),
    Claim("bounds.lem1.autolip", PAPER, "Lemma 1",
          "For a feed-forward network with 1-Lipschitz activations, AutoLip's bound is the product of the layers' "
          "spectral norms.",
          "L_R <= prod_h ||M_h||_2 over the 20 unrolled layers",
          _check("bounds-autolip-mlp", "AutoLip on an MLP equals the product of its spectral norms")),
    # --- Orderings of the attacks -----------------------------------------------------------------------------------
    Claim("bounds.c2.idlg-below-dlg", PAPER, "Sec. 5, Figures 3-8",
          "iDLG's bound is below DLG's: iDLG is intrinsically the stronger attack.",
          f"on MNIST, FMNIST and CIFAR-10, single image; {SETTING}",
          _flag("bounds-surrogate", "idlg_below_dlg_by_bound", "iDLG's bound at round T is below DLG's"),
          reduced=DIGITS, direction_only=True),
    Claim("bounds.c8.idlg-below-dlg-batch", PAPER, "App. C.2, Figures 10-12",
          "For batch reconstruction too, iDLG's bound is below DLG's.",
          "batch 20; N = 15 / 10 / 5 devices for MNIST / FMNIST / CIFAR-10",
          _flag("bounds-batch", "idlg_below_dlg_by_bound", "iDLG's bound at round T is below DLG's"),
          reduced=DIGITS + "; batches of 2, 4, 8", direction_only=True),
    Claim("bounds.c2.idlg-labels", PAPER, "Sec. 5",
          "iDLG's closed-form label is exact for a single sample (the paper's reason for its smaller bound).",
          "'accurate label estimation' makes iDLG's reconstruction more stable",
          _check("bounds-idlg-labels", "the closed-form label is right for every single sample")),
    Claim("bounds.c5.ggl-smallest", PAPER, "Sec. 5, Figures 3-8",
          "GGL's bound is much smaller than DLG's, iDLG's and InvGrad's: a learnt generator stabilises the attack.",
          f"single image; in some cases GGL's bound is close to its best empirical error; {SETTING}",
          reason="model: the paper's GGL optimises the latent of a pretrained GAN generator for MNIST, FMNIST and "
                 "CIFAR-10; the lab's GGL uses a PCA-linear decoder on 8x8 digits, so its L_R is not the paper's"),
    Claim("bounds.c1.empirical-order", PAPER, "Sec. 5, Figures 3-8",
          "By best empirical error GGL < InvGrad <= iDLG <= DLG in most cases.",
          f"dashed curves on MNIST, FMNIST and CIFAR-10; {SETTING}",
          reason="dataset and model: MNIST, FMNIST and CIFAR-10 at full size are not in this lab's data root (it "
                 "runs 8x8 digits), and GGL's pretrained GAN is replaced by a PCA-linear decoder"),
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
          _trend("local-steps", {"devices": 10, "rounds": 100}, 1, "E (through B's 8(E-1)^2 G^2 and gamma)"),
          reduced=DIGITS, direction_only=True),
    Claim("bounds.c7.devices", PAPER, "Sec. 5, Figures 3-5 (b)", "The bound grows with the number of devices N.",
          f"single image; {SETTING}; N ticks 25, 30, 35 in Fig. 5b",
          _trend("devices", {"local-steps": 2, "rounds": 100}, 1, "N (through Gamma, sigma_k and G)"),
          reduced=DIGITS, direction_only=True),
    Claim("bounds.c7.rounds", PAPER, "Sec. 5, Figures 3-5 (c)",
          "The bound falls as training runs for more rounds T (w_t nears w*).",
          f"single image; {SETTING}",
          _trend("rounds", {"local-steps": 2, "devices": 10}, -1, "T (through 1 / (gamma + T))"),
          reduced=DIGITS, direction_only=True),
    Claim("bounds.c12.batch-size", PAPER, "Sec. 6, Figure 9b",
          "Reconstruction errors (and their bounds) grow with the batch size.",
          "MNIST, batch 10, 15, 20, 25, 30; 'matching Geiping et al.'s empirical observations'",
          Measure("bounds-batch", Trend(EVERY, "batch", "attacks.idlg.err_w_star"),
                  "iDLG's mean squared error at w* (the bound's first term, over 2) against the batch size"),
          reduced=DIGITS + "; batches of 2, 4, 8", direction_only=True),
]

PAPER_PRESETS: dict = {}
"""The paper's attacks run inside `splitlab bounds` with its own settings; no registry preset stands for them."""
