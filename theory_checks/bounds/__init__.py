"""Reconstruction-error bounds for attacks on FedAvg (Theoretically Understanding Data Reconstruction Leakage in Federated Learning).

    E||x - R(w_t)||^2 <= 2 E||x - R(w*)||^2 + 2 L_R^2 / (gamma + t) * (4 B / mu^2 + (gamma + 1) E||w_1 - w*||^2)

(Theorem 1, Eq. 5; Theorem 2 replaces B by B + C). Modules, in the order the bound is assembled:

- `logreg`: l2-regularised logistic regression on scikit-learn's digits (binary, and softmax), w* by Newton.
- `fedavg`: FedAvg with single-sample local SGD at eta_t = 2 / (mu (gamma + t)), full or partial participation.
- `constants`: L, mu (paper formulas and exact eigenvalues), sigma_k, G, Gamma, B, C, Delta_1, v and the bound.
- `lipschitz`: power iteration (Alg. 3), spectral norms, AutoLip over a graph (Alg. 2, Lemma 1).
- `attacks`: DLG, iDLG, Inverting Gradients and GGL (PCA-linear decoder) as Alg. 4 through the engine, on single
  images or batches.
- `surrogate`: the unrolled affine+clip network fitted greedily by least squares, and its L_R.
- `config`: `BoundsConfig`, every option of `splitlab bounds` declared once (the command is generated from it).
- `experiment`: the whole measurement behind `splitlab bounds`; `figures`: bounds.png, trends.png, batch.png;
  `checks`: the component checks in `CHECKS`.
"""
