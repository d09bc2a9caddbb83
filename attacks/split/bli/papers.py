"""The batch label inference paper as both its attacks (`bli`, `bli-replace`) cite it, with their shared
deviations."""
from __future__ import annotations

from attacks.kit import Deviation

__all__ = ["BLI_PAPER", "BLI_DATA", "BLI_NUMBERS"]

BLI_PAPER = ("Liu, Zou, Kang, Liu, He, Yi, Yang. Batch Label Inference and Replacement Attacks in Black-Boxed "
             "Vertical Federated Learning. arXiv 2112.05409")
BLI_DATA = Deviation("data", "MNIST and NUS-WIDE on a two-layer MLP, CIFAR-10 and CIFAR-100 on ResNet-18 or -20 "
                     "(the authors' code), two parties each holding part of the features", "mnist5k or wdbc, one passive party holding every feature, the "
                     "label party none", "no download on a fresh machine; the lab's label victim is two-party")
BLI_NUMBERS = Deviation("settings", "the paper's own training and attack settings", "the lab's (CPU-sized) settings, "
                        "named in each preset", "the paper's text was not available to the lab when these attacks "
                        "were written, so its numbers are not sourced here; the method is")
