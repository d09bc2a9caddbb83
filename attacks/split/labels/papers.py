"""The label papers as the attacks of each cite them, with the deviations those attacks share (Li et al.'s norm
and direction scoring; Fu et al.'s direct inference and model completion), so no attack package imports
another's."""
from __future__ import annotations

from attacks.spec import Deviation

__all__ = ["LI", "LI_DATA", "LI_MODEL", "FU", "FU_DATA"]

LI = ("Li, Sun, Yang, Gao, Zhang, Xie, Smith, Wang. Label Leakage and Protection in Two-party Split Learning. "
      "ICLR 2022")
LI_DATA = Deviation("data", "click-through data (Criteo, Avazu) and ISIC skin lesions, binary, imbalanced",
                    "mnist5k, one digit against the rest (10% positive)", "no download on a fresh machine")
LI_MODEL = Deviation("model", "a wide-and-deep network (Criteo, Avazu), a CNN (ISIC), cut below the last layers",
                     "the lab's CNN cut after its first dense layer (cut 6, 120 values per example)",
                     "the lab's split architectures")

FU = "Fu, Zhang, Ji, Chen, Wu, Li, Chen, Wang. Label Inference Attacks Against Vertical Federated Learning. " \
     "USENIX Security 2022"
FU_DATA = Deviation("data", "CIFAR-10/100, CINIC-10, Tiny ImageNet, Yahoo Answers, Criteo, breast histopathology; "
                    "two to four parties, each a slice of the features", "mnist5k, one feature party holding the "
                    "whole image", "no download on a fresh machine; the lab's split is two-party")
