"""Which pixel directions a batch's uploaded gradients constrain: the Gauss-Newton spectrum of the gradient
map x -> (g_1(x), ..., g_T(x)) at the true batch, and where an attack lands that removes its start's error
outside the (near-)null space and keeps it inside, from each start TGIAs-RO takes.

    python scripts/gradient_null_space.py --arch lenet-relu --temporal 1 [--server-lr 0.1] [--batch-size 4]
        [--clients 4 --sample-fraction 1.0]

The trace is TGIAs-RO's (`splitlab hfl --attack tgias-ro --observe rounds`, images by seed). J_t is the
Jacobian of the t-th temporal gradient with respect to the images (forward mode, float64); G = sum_t J_t^T J_t / T.
Directions with an eigenvalue below r x the largest leave every observed gradient unchanged to first order
at the true batch. `ceiling` is the PSNR of the true batch plus the start's error in those directions, clamped
to [0, 1], for each start (`--start` of TGIAs-RO: N(0, 1) on the pixels, N(0, 1) in normalised-MNIST units,
zero; the same seeded draw the attack makes).

What it is and is not: the null space is a property of the gradient, the ceiling a property of the start in
it. On the paper's ReLU LeNet at b = 4 (seed 0) 47% of the 3,136 pixel directions are invisible at T = 1
(max-pooling passes one position per window, a ReLU that is off passes none), and the ceiling is 7.48 dB from
N(0, 1) on the pixels, 12.49 from N(0, 1) in MNIST units, 18.54 from zero. It is not a bound on an attack:
the null space is first order and local, an attack that moves far changes which ReLUs are on and which
positions the pools pass, and DLG from N(0, 1) reached 8.8 dB on seed 0 (tgias-start, 400 iterations), above
its 7.48; nor is it reached: from MNIST units and from zero DLG stayed near the mean image (tgias-start).
DLG's sigmoid LeNet constrains every direction at T = 1. About 10 CPU seconds per temporal gradient at b = 4.
"""
from __future__ import annotations

import argparse

import torch
from torch.func import functional_call, grad, jvp, vmap

from attacks.hfl.experiment import HFLConfig, prepare
from attacks.hfl.tgias.attack import start_images
from attacks.hfl.tgias.settings import STARTS
from attacks.hfl.variables import initial_variables
from attacks.metrics import psnr

THRESHOLDS = (1e-8, 1e-6, 1e-4, 1e-2)


def gram(network, rounds, x: torch.Tensor, labels: torch.Tensor, chunk: int = 196) -> torch.Tensor:
    """sum_t J_t^T J_t / T, (n, n) for the n pixels of the batch, in float64."""
    network = network.double()
    n = x.numel()
    eye = torch.eye(n, dtype=torch.float64)
    total = torch.zeros(n, n, dtype=torch.float64)
    for upload in rounds:
        params = {k: v.double() for k, v in upload.model.params.items()}

        def gradient(images):
            weights = grad(lambda p: torch.nn.functional.cross_entropy(functional_call(network, p, (images,)),
                                                                         labels))(params)
            return torch.cat([w.flatten() for w in weights.values()])

        jacobian = torch.cat([vmap(lambda t: jvp(gradient, (x,), (t,))[1])(eye[i:i + chunk].view(-1, *x.shape))
                              for i in range(0, n, chunk)])
        total += jacobian @ jacobian.T
    return total / len(rounds)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--arch", default="lenet-relu")
    parser.add_argument("--temporal", type=int, default=1)
    parser.add_argument("--batch-size", type=int, default=4)
    parser.add_argument("--server-lr", type=float, default=0.1)
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--sample-fraction", type=float, default=1.0)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    config = HFLConfig.of(attack="tgias-ro", observe="rounds", labels="known", images="seed", arch=args.arch,
                          batch_size=args.batch_size, temporal=args.temporal, server_lr=args.server_lr, seed=args.seed,
                          clients=args.clients, sample_fraction=args.sample_fraction)
    prepared = prepare(config)
    rounds = prepared.observation.rounds[:args.temporal]
    x, labels = prepared.truth.images.double(), prepared.truth.labels
    values, vectors = torch.linalg.eigh(gram(prepared.observation.model.network, rounds, x, labels))
    z = initial_variables(prepared.observation, 1, args.seed, label_logits=False)["x"][0].double()
    n, top = x.numel(), float(values[-1])
    print(f"{args.arch}, b = {args.batch_size}, T = {args.temporal}, server lr {args.server_lr}, clients "
          f"{args.clients} at {args.sample_fraction}, seed {args.seed}: {n} pixel directions; zero image "
          f"{float(psnr(torch.zeros_like(x), x).mean()):.2f} dB")
    for r in THRESHOLDS:
        null = vectors[:, values < r * top]
        ceilings = []
        for kind in STARTS:
            error = (start_images(kind, z) - x).flatten()
            kept = x + (null @ (null.T @ error)).view_as(x)
            ceilings.append(f"{kind} {float(psnr(kept.clamp(0, 1), x).mean()):.2f}")
        print(f"  eigenvalue < {r:g} x max: {null.shape[1]:5d} directions ({null.shape[1] / n:.0%}); "
              f"ceiling from each start (dB): {', '.join(ceilings)}")


if __name__ == "__main__":
    main()
