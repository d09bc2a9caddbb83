"""Claims of JAST: Semenov et al., *Just a Simple Transformation is Enough for Data Protection in Vertical
Federated Learning* (arXiv 2412.11689).

The paper's experiments run on full MNIST, Fashion-MNIST and CIFAR-10; the lab's UnSplit and FSHA sweeps run on
`mnist5k` (4,000 training images), so every measured magnitude is at a reduced scale. The lemmas are checked
exactly (`splitlab theory`): a check's `matched_by_check` flag says it held (or broke) as the paper says.
"""
from splitlab.claims.model import Claim, Measure, Select
from splitlab.claims.rules import AtMost, Beats, Close, Fails, Holds, Trend
from splitlab.claims.stats import FACTOR, POINTS

PAPER = "jast"
ATTACKS = ("unsplit", "fsha")
"""The attacks whose declared deviations belong with this paper's claims (its own and the baselines it runs)."""
CITATION = ("Semenov, Zmushko, Pichugin, Beznosikov. Just a Simple Transformation is Enough for Data Protection "
            "in Vertical Federated Learning. arXiv 2412.11689, 2024.")
DEVIATIONS = ()
"""Deviations that belong to this paper's claims rather than to one attack (the attacks declare their own)."""

MNIST5K = ("mnist5k (4,000 training images, 10 epochs) instead of full MNIST (60,000); UnSplit jast preset "
           "(200 x (20 + 20) Adam steps), cut layer 1, seeds 0-4")
CNN, MLP = Select({"arch": "cnn"}, "CNN client"), Select({"arch": "mlp"}, "MLP client")
RESNET = Select({"arch": "resnet"}, "ResNet client")
SMALL_MLP = Select({}, "SmallMLP client")
"""The one client of jast-small-mlp-unsplit (its arch is fixed there)."""
FSHA_QUICK = "fsha.quick: 1,000 rounds at batch 32, quarter-width networks, mnist5k"
FAILS = ("PSNR of the reconstructions against the best trivial answer of the same targets (the cells' baselines: "
         "the all-zero image, the mean image, the initial guess), mean over seeds")


def _lemma(cid: str, where: str, claim: str, paper_numbers: str, check: str, breaks: bool = False) -> Claim:
    """A lemma or remark checked by `splitlab theory`: its flag reads 1 when the check matched the paper."""
    verb = "broke, as the paper says," if breaks else "held"
    return Claim(cid, PAPER, where, claim, paper_numbers,
                 Measure("jast-lemmas", Holds(Select({}, "theory"), f"matched_by_check.{check}"),
                         f"matched_by_check.{check}: 1 when the check {verb} (float64, tolerance 1e-10)"), exact=True)


CLAIMS: list[Claim] = [
    # --- Table 1: UnSplit against CNN and MLP clients at cut layer 1 -------------------------------------------
    Claim("jast.tab1.mlp-fails", PAPER, "Table 1",
          "UnSplit fails to reconstruct the inputs of a dense (MLP) client: its min-max MSE stays high.",
          "MSE X 0.27 for the MLP client on MNIST (0.19 on F-MNIST); cut layer 1",
          Measure("jast-table1", Fails(MLP), f"{FAILS} 0-4 (the failing MSE X, 0.25, is the min-max scaled "
                  "error, which has no trivial baseline of its own)"),
          reduced=MNIST5K),
    Claim("jast.tab1.cnn-leaks", PAPER, "Table 1",
          "UnSplit reconstructs the inputs of a convolutional client.",
          "MSE X 0.05 for the CNN client on MNIST; cut layer 1",
          Measure("jast-table1", AtMost(CNN, "image_mse_minmax", 0.05, FACTOR, guard="psnr"),
                  "image_mse_minmax of the CNN client, mean over seeds (within a factor 2 of the paper's)"),
          reduced=MNIST5K),
    Claim("jast.tab1.cnn-beats-mlp", PAPER, "Table 1",
          "The CNN client's inputs are reconstructed far better than the MLP client's.",
          "MSE X 0.05 (CNN) vs 0.27 (MLP) on MNIST: a gap of 0.22",
          Measure("jast-table1", Beats(a=CNN, b=MLP, metric="image_mse_minmax", gap=5.4, higher_is_better=False,
                                       scale=FACTOR, guard="psnr"),
                  "paired ratio of image_mse_minmax (lower is better) over seeds 0-4; the paper's is 0.27 / 0.05"),
          reduced=MNIST5K),
    Claim("jast.tab1.mlp-fits-activations", PAPER, "Table 1",
          "Against the MLP client the attack fits the cut-layer activations almost exactly (it recovers some "
          "XU, not X).",
          "MSE Z 3e-8 for the MLP client on MNIST (4e-5 on F-MNIST); the final clone fit",
          Measure("jast-table1", AtMost(MLP, "activation_mse", 3e-8, FACTOR, guard=""),
                  "activation_mse (the final clone fit, MSE Z) of the MLP client, mean over seeds (geometric), "
                  "within a factor 2 of the paper's"),
          reduced=MNIST5K),
    Claim("jast.tab1.mlp-fits-better", PAPER, "Table 1",
          "The dense client's activations are fitted far more closely than the CNN client's, although its "
          "inputs are recovered far worse.",
          "MSE Z 3e-8 (MLP) vs 2e-2 (CNN) on MNIST",
          Measure("jast-table1", Beats(a=MLP, b=CNN, metric="activation_mse", gap=0.02 / 3e-8,
                                       higher_is_better=False, scale=FACTOR, guard=""),
                  "paired ratio of activation_mse (lower is better) over seeds 0-4; the paper's is 2e-2 / 3e-8"),
          reduced=MNIST5K),
    Claim("jast.tab1.mlp-accuracy", PAPER, "Table 1",
          "The MLP client keeps the accuracy of the CNN client.",
          "test accuracy 98.42 % (MLP) vs 98.68 % (CNN) on MNIST, 88.31 vs 89.23 on F-MNIST: 0.26 and 0.92 points",
          Measure("jast-table1", Close(a=MLP, b=CNN, metric="accuracy", margin=0.01, scale=POINTS, one_sided=True),
                  "paired difference of test accuracy (MLP - CNN) after 10 epochs over seeds 0-4: no worse than "
                  "one accuracy point (the paper's MNIST gap, 0.26 points, is inside it)"),
          reduced=MNIST5K),
    Claim("jast.tab1.fmnist", PAPER, "Table 1",
          "On Fashion-MNIST too UnSplit recovers the CNN client's inputs and not the MLP client's.",
          "F-MNIST: MSE X 0.19 (MLP) vs 0.37 (CNN), FID 361 vs 169, accuracy 88.31 vs 89.23",
          reason="dataset: Fashion-MNIST is not in this lab's data root (only the embedded mnist5k is); and "
                 "the paper's CNN-better reading rests on FID, whose Inception weights are not on this machine"),
    Claim("jast.tab1.cifar-mixer", PAPER, "Table 1",
          "An MLP-Mixer client on CIFAR-10 resists UnSplit at nearly the CNN's accuracy.",
          "CIFAR-10: MSE X 1.398 (MLP-Mixer) vs 0.056 (CNN), MSE Z 6e-6 vs 4e-3, accuracy 89.29 vs 93.61 %",
          reason="dataset and time: CIFAR-10 is not in this lab's data root, and the Mixer's 300 training epochs "
                 "took the authors about 2.5 GPU-hours (their notebook log); far more on this 2-core CPU"),
    Claim("jast.sec43.fid", PAPER, "Sec. 4.3, Table 1",
          "FID reflects the attack's success better than MSE: on F-MNIST the CNN's reconstructions have the "
          "higher MSE yet are the better images.",
          "F-MNIST: MSE X 0.37 (CNN) > 0.19 (MLP) while FID 169 (CNN) < 361 (MLP); FID over 10 vs 10 images",
          reason="model weights and dataset: FID needs the Inception-v3 weights (about 100 MB), absent here "
                 "(`splitlab weights`), and Fashion-MNIST is not in the data root"),
    # --- Sec. 4.1, Table 3: the TV prior, cut depth, DP input noise ------------------------------------------
    Claim("jast.sec41.tv-no-rescue", PAPER, "Sec. 4.1",
          "Raising the TV weight up to 100 does not rescue UnSplit against the MLP client.",
          "lambda up to 100 on MNIST and F-MNIST: the attack still fails (no table; Table 1's failing MLP MSE X "
          "is 0.27)",
          Measure("jast-tv-sweep", Fails(Select({"lambda-tv": 100.0}, "MLP client, lambda_tv 100")),
                  f"{FAILS} 0-2, at lambda_tv 100"),
          reduced=MNIST5K.replace("seeds 0-4", "seeds 0-2")),
    Claim("jast.tab3.depth", PAPER, "Table 3",
          "Without noise, UnSplit's reconstructions of the CNN client degrade as the cut moves deeper.",
          "images only (cut layers 1-6 on MNIST, F-MNIST, CIFAR-10); only cut layer 1 reconstructs well",
          Measure("jast-cut-layers", Trend(select=Select({"defence": "none"}, "no noise"), x="cut-layer",
                                           metric="image_mse_minmax", higher_is_better=False, scale=FACTOR,
                                           guard="psnr"),
                  "image_mse_minmax against the cut layer (1-6), mean over seeds 0-2; cut 6 against cut 1 paired"),
          reduced="mnist5k, CNN, seeds 0-2"),
    Claim("jast.tab3.dp-noise", PAPER, "Table 3, App. A.5",
          "Gaussian input noise calibrated for (6, 0.5)-DP hinders UnSplit on the CNN client, though far from "
          "perfectly.",
          "epsilon 6, delta 0.5: sigma 1.6 (MNIST), 2.6 (F-MNIST), 0.25 (CIFAR-10, lowered from 7.1); images only",
          Measure("jast-cut-layers",
                  Beats(a=Select({"defence": "input-dp:epsilon=6,delta=0.5", "cut-layer": 1}, "DP noise"),
                        b=Select({"defence": "none", "cut-layer": 1}, "no noise"), metric="image_mse_minmax",
                        scale=FACTOR, guard="psnr", guard_side="b"),
                  "paired ratio of image_mse_minmax at cut layer 1 (higher: the attack recovers less); the "
                  "undefended arm must leak (PSNR above the trivial images) for the noise to hinder anything"),
          reduced="mnist5k, CNN, seeds 0-2"),
    # --- Appendix C: SmallMLP -------------------------------------------------------------------------------
    Claim("jast.appc.smallmlp-accuracy", PAPER, "App. C",
          "The parameter-matched SmallMLP loses accuracy against the four-layer MLP.",
          "average accuracy 92.6 % (SmallMLP) vs 98.5 % (MLP) on MNIST, 83.8 vs 88.3 on F-MNIST",
          Measure("jast-small-mlp", Beats(a=Select({"arch": "mlp"}, "MLP"), b=Select({"arch": "small-mlp"}, "SmallMLP"),
                                          metric="accuracy", gap=0.059, scale=POINTS),
                  "paired difference of test accuracy (fractions) after 10 epochs, seeds 0-4"),
          reduced="mnist5k (4,000 training images) instead of MNIST"),
    # --- Sec. 4.2: FSHA -------------------------------------------------------------------------------------
    Claim("jast.fig3.fsha-resnet-vs-mlp", PAPER, "Sec. 4.2, Figures 3-4",
          "FSHA fully reconstructs a ResNet client's inputs and fails against a dense client.",
          "images only (MNIST, F-MNIST; the text: 'fully reconstructs ... completely fails')",
          Measure("fsha-clients", Beats(a=RESNET, b=MLP, metric="image_mse_minmax", higher_is_better=False,
                                        scale=FACTOR, guard="psnr"),
                  "paired ratio of image_mse_minmax (lower is better) over seeds 0-2"),
          reduced=FSHA_QUICK + "; the paper's runs use the FSHA code's full-width networks at batch 64"),
    Claim("jast.fig5.fsha-error", PAPER, "Figure 5",
          "FSHA's reconstruction error during training stays far higher for the dense client than for the ResNet "
          "client.",
          "curves only (no numbers in the text); MNIST and F-MNIST",
          Measure("fsha-clients", Beats(a=RESNET, b=MLP, metric="extras.training_interval_mse_pm1_final",
                                        higher_is_better=False, scale=FACTOR, guard=""),
                  "paired ratio of the final training-interval error on [-1, 1] (Figure 5's quantity)"),
          reduced=FSHA_QUICK),
    Claim("jast.fig5.encoder-decoder", PAPER, "Sec. 4.2, Figure 5",
          "FSHA's encoder-decoder error is equally low for both clients: the attack fails against the dense "
          "client in the alignment, not in the autoencoder.",
          "curves only: the encoder-decoder loss is about the same for the ResNet and the MLP client",
          Measure("fsha-clients", Close(a=MLP, b=RESNET, metric="extras.encoder_decoder_mse_pm1_final",
                                        margin=2.0, scale=FACTOR, higher_is_better=False),
                  "paired ratio of the final encoder-decoder error on [-1, 1] over seeds 0-2, within a factor 2"),
          reduced=FSHA_QUICK),
    Claim("jast.appc.smallmlp-resists-unsplit", PAPER, "App. C, Figures 9-10",
          "The parameter-matched SmallMLP client still resists UnSplit.",
          "images only: UnSplit's reconstructions of the SmallMLP client are noise on MNIST and F-MNIST",
          Measure("jast-small-mlp-unsplit", Fails(SMALL_MLP), f"{FAILS} 0-4, SmallMLP client, cut layer 1"),
          reduced=MNIST5K),
    Claim("jast.appc.smallmlp-resists-fsha", PAPER, "App. C, Figures 11-12",
          "The SmallMLP client also resists FSHA.",
          "images only: FSHA's reconstructions of the SmallMLP client are not the private inputs",
          reason="model: the lab's FSHA implements the ResNet and the four-layer MLP client setups only "
                 "(`splitlab attack fsha --arch resnet|mlp`), not the SmallMLP"),
    # --- Figure 8 and Lemma 3: the cut-layer error against the reconstruction error -------------------------------
    Claim("jast.fig8.mlp-cut-below-image", PAPER, "App. C, Figure 8",
          "Against the MLP client UnSplit's cut-layer error is far below its reconstruction error (it fits XU, "
          "not X).",
          "curves only: the MLP's MSE Z falls to about 1e-8 while its MSE X stays near 0.27",
          Measure("jast-table1", Beats(a=MLP, b=MLP, metric="activation_mse", metric_b="image_mse",
                                       higher_is_better=False, scale=FACTOR, guard=""),
                  "paired ratio of the MLP client's activation_mse (MSE Z) to its image_mse over seeds 0-4"),
          reduced=MNIST5K),
    Claim("jast.fig8.cnn-cut-near-image", PAPER, "App. C, Figure 8",
          "Against the CNN client the cut-layer error and the reconstruction error are about equal.",
          "curves only: the CNN's MSE Z and MSE X fall together",
          Measure("jast-table1", Close(a=CNN, b=CNN, metric="activation_mse", metric_b="image_mse", margin=2.0,
                                       scale=FACTOR, higher_is_better=False),
                  "paired ratio of the CNN client's activation_mse to its image_mse over seeds 0-4, within a "
                  "factor 2"),
          reduced=MNIST5K),
    # --- Lemmas, corollaries and remarks (exact checks) --------------------------------------------------------
    _lemma("jast.lem1.sgd", "Lemma 1", "For a linear client trained by (S)GD, (XU, U^T W) sends the same "
           "activations as (X, W) at every step.", "exact equality for any orthogonal U", "lemma1-sgd"),
    _lemma("jast.lem1.semi-orthogonal", "Lemma 1", "The invariance holds for semi-orthogonal U as well.",
           "'(semi)orthogonal transformations' (the proof covers the square case)", "lemma1-semi-orthogonal"),
    _lemma("jast.cor1.invertible-layer", "Corollary 1", "A server that knows an invertible first layer recovers "
           "only XU, not X.", "exact: H W^-1 = XU", "corollary1-invertible-layer"),
    _lemma("jast.lem2.fake-gradients", "Lemma 2", "Against a malicious server sending arbitrary gradients, a fixed "
           "orthogonal pre-transform leaves X identifiable only up to rotation.", "exact equality of the sent "
           "activations for (X, U) and (XV, V^T U)", "lemma2-fake-gradients"),
    _lemma("jast.cor2.bias-lemma1", "Corollary 2", "Lemma 1 holds with a bias in the client layer.",
           "exact equality", "corollary2-bias-lemma1"),
    _lemma("jast.cor2.bias-lemma2", "Corollary 2", "Lemma 2 holds with a bias in the client layer.",
           "exact: H_{k+1} = H_1 - gamma [I + X X^T] sum G_i", "corollary2-bias-lemma2"),
    _lemma("jast.lem3.cut-layer", "Lemma 3", "Activations before a linear cut layer are identifiable only up to an "
           "orthogonal transform: the protocol is unchanged.", "exact equality of H and of the pre-cut weights",
           "lemma3-cut-layer"),
    _lemma("jast.rem2.optimal-loss", "Remark 2", "The optimal loss is the same for every orthogonal transform of "
           "the data.", "L(XU, U^T W*) = L(X, W*)", "remark2-optimal-loss"),
    _lemma("jast.rem4.adam-breaks", "Remark 4", "Adam does not preserve the invariance for a dense orthogonal U.",
           "the preconditioner differs; a discrepancy after the first step", "remark4-adam-dense", breaks=True),
    _lemma("jast.lem1.momentum", "Lemma 1 (proof, A.1)", "The invariance of Lemma 1 holds under heavy-ball "
           "momentum too.", "exact equality of the sent activations", "lemma1-momentum"),
    _lemma("jast.rem4.permutation", "Remark 4", "Adam keeps the invariance for a permutation U (an exception the "
           "remark names).", "Adam is equivariant to permutations", "remark4-adam-permutation"),
    _lemma("jast.rem4.sign-flip", "Remark 4", "Adam keeps the invariance for a sign-flip U (the other exception).",
           "Adam is equivariant to sign flips", "remark4-adam-sign-flip"),
    _lemma("jast.ex1.adam-rotation", "Example 1, Figure 7", "Under Adam the original and the rotated starts of "
           "f(y) = y^2 + 6 sin^2 y end in different minima (Adam is not rotation-invariant).",
           "lr 0.6, U a pi/4 rotation: the losses at the two ends differ", "example1-adam-rotation", breaks=True),
    Claim("jast.ex1.rotated-stuck", PAPER, "Example 1, Figure 7",
          "Under Adam it is the rotated start (UW, UX) that gets stuck in the local minimum.",
          "lr 0.6, U a pi/4 rotation: 'stuck ... if starting from (UW, UX)'",
          Measure("jast-lemmas", Holds(Select({}, "theory"), "paper_reading_by_check.example1-adam-rotation.adam"),
                  "1 when torch's Adam leaves the rotated start stuck and the original converging (the check's "
                  "details; under the paper's own Adam recursion both starts converge)"), exact=True,
          reason="torch's Adam leaves the original start stuck and the rotated one converging; the paper's own "
                 "Adam recursion leaves neither stuck (docs/theory.md)"),
    _lemma("jast.lem4.preconditioner", "Lemma 4", "Adam's preconditioner stays below the gradient bound, whatever U.",
           "alpha I <= D_k <= Gamma I", "lemma4-preconditioner-bound"),
    _lemma("jast.lem5.descent", "Lemma 5", "Adam's one-step descent inequality holds.", "the Lemma 5 inequality",
           "lemma5-descent"),
    _lemma("jast.lem6.pl-descent", "Lemma 6", "Under the PL condition Adam's one-step contraction holds, "
           "independent of U.", "(1 - gamma mu / Gamma) contraction plus the momentum terms", "lemma6-pl-descent"),
]

PAPER_PRESETS: dict = {
    # The paper keeps FSHA's hyperparameters 'from the original implementation' without stating any value in its
    # text (3,000 and 5,000 iterations are read off Figure 5's axes), so it fixes no field of fsha.paper.
    "fsha.paper": {},
}
