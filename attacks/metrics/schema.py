"""The keys of every attack's metrics.json and what each means (also the README's table)."""
from __future__ import annotations

IMAGE_KEYS = ("image_mse", "image_mse_minmax", "psnr", "psnr_max", "psnr_std", "ssim", "lpips", "fid",
              "psnr_best_match", "ssim_global")
"""The image scores of the answer; all null, with the reason, when every trial diverged."""
BASELINE_KEYS = ("image_mse", "psnr", "ssim")
"""The image scores of each baseline (and of each restart under `per_trial`)."""

METRICS_SCHEMA = {
    # key -> meaning; every attack's metrics.json has these keys (null with a reason under `unavailable`)
    "attack": "the attack's name in the lab's registry of attacks (the first part of `preset`)",
    "preset": "the dotted preset the settings started from",
    "n_targets": "number of private images the attack reconstructs (label inference: samples whose labels it infers)",
    "image_mse": "MSE on [0,1] after clamping the reconstruction, per image, then mean over kept targets",
    "image_mse_minmax": "MSE after min-max normalising each reconstruction (the JAST paper's 'MSE X')",
    "psnr": "mean per-image PSNR in dB on [0,1] (capped at 100 dB)",
    "psnr_max": "best per-image PSNR",
    "psnr_std": "population std of per-image PSNR",
    "psnr_best_match": "mean over targets of the PSNR of each target's most similar reconstruction (FedLeak's "
                       "scoring; one reconstruction may serve two targets), never below `psnr`",
    "ssim": "mean per-image SSIM (scikit-image, 7x7 window) on [0,1]",
    "ssim_global": "mean per-image SSIM from whole-image means, variances and covariance (the AWA paper's formula, "
                   "c1 = 0.01^2, c2 = 0.03^2 on [0,1]; no window)",
    "lpips": "mean LPIPS (AlexNet) or null when its weights are not here",
    "fid": "FID between targets and reconstructions or null (weights absent, or fewer than 2 images)",
    "label_accuracy": "accuracy of the labels the attack inferred: as a multiset for a batch reconstructed in any "
                      "order (gradient inversion), per sample for label inference; null when it infers none",
    "leak_auc": "label inference: ROC AUC of the attack's per-sample positive-class score against the private "
                "labels, within each protocol round and averaged over the rounds holding both classes (Li et al.'s "
                "leak AUC; 0.5 is chance); multi-class: one-vs-rest, averaged over classes; null when it infers none",
    "accuracy": "task accuracy: the victim's test accuracy on its task where the experiment trains one (split "
                "learning); null otherwise",
    "baselines": "the same image scores for trivial answers on the same targets: zero image, each target's "
                 "mean as a constant image, the attack's initial guess (label inference, and an image attack "
                 "that infers its labels: the majority class for every sample)",
    "n_trials": "engine trials (restarts, or one per target)",
    "per_target": "whether trial t reconstructs target t (UnSplit, FSHA) or trials are restarts (HFL)",
    "best_trial": "restart attacks: the lowest-loss trial that did not diverge; null otherwise",
    "diverged_trials": "indices of trials stopped by a non-finite loss (never scored)",
    "per_trial": "per trial: loss, diverged, and its image scores where it reconstructs something on its own",
    "per_image": "per target: the image scores of the answer",
    "matched": "whether the answer was paired one-to-one with the targets (Hungarian, per-pair MSE) first",
    "steps": "optimisation steps (or protocol rounds) the attack ran",
    "seconds": "wall time of the attack (device work included)",
    "seconds_per_step": "seconds / steps",
    "trials_mode": "batched, sequential, or the attack's own loop",
    "unavailable": "metric -> why it has no value",
    "extras": "attack-specific quantities under names that say what they are",
}
"""The schema of every attack's metrics.json (also the README's table; tests check commands against it)."""

FEATURE_SCHEMA = {
    # key -> meaning; what a feature-vector answer (tabular data: feature inference, UnSplit on tabular inputs) adds
    "feature_mse": "MSE per feature (column) over the targets, on the features' own scale (tabular columns "
                   "standardised with the training split's statistics; one-hot columns 0/1), averaged over features",
    "feature_mse_per_feature": "that MSE for each feature, in the attacked columns' order",
    "categorical_accuracy": "for one-hot (or embedded) categorical groups: how often the group's argmax in the "
                            "answer is the true category, over every group and target (a target whose category "
                            "another party holds is not counted); null for numerical columns only",
    "categorical_accuracy_per_group": "that accuracy for each categorical group of the attacked columns",
    "baselines.mean": "the training split's mean of each attacked feature as the answer, scored the same way "
                      "(`feature_mse`)",
    "baselines.majority": "the training split's majority category of each group as the answer "
                          "(`categorical_accuracy`; the argmax of the training mean)",
}
"""The keys a feature-vector answer's metrics.json adds to `METRICS_SCHEMA` (its image scores null)."""
