"""Each registered attack as one `splitlab` command in the setting the fixed-seed checks use, without its preset
(the caller adds `--preset`): what `bench_compile_auto.py` times and `device_check.py` runs on a GPU.

Importing this module imports nothing of torch or the lab, so a plan can be printed in a fraction of a second.
"""
from __future__ import annotations

FEDAVG = ["--observe", "fedavg", "--batch-size", "4", "--local-epochs", "2", "--local-batch-size", "2",
          "--local-lr", "1e-3", "--labels", "known"]
COMMANDS = {
    "dlg": ["hfl", "--attack", "dlg"],
    "idlg": ["hfl", "--attack", "idlg"],
    "invgrad": ["hfl", "--attack", "invgrad", "--arch", "convnet"],
    "gi": ["hfl", "--attack", "gi"],
    "fedleak": ["hfl", "--attack", "fedleak", "--arch", "convnet", "--batch-size", "8", "--labels", "known"],
    "awa": ["hfl", "--attack", "awa", "--arch", "convnet", *FEDAVG],
    "agic": ["hfl", "--attack", "agic", "--arch", "convnet", *FEDAVG],
    "tgias-ro": ["hfl", "--attack", "tgias-ro", "--observe", "rounds", "--batch-size", "4", "--labels", "known"],
    "unsplit": ["attack", "unsplit", "--arch", "cnn", "--epochs", "2"],
}
"""Each engine attack (the ones `--compile` applies to), in the setting the fixed-seed checks use."""
LABELS = ("label-norm", "label-direction", "label-direct", "label-completion", "label-active", "label-unsplit")
VFL = ("bli", "bli-replace", "gr-backdoor", "esa", "grn")
"""The batch-level label, feature-inference and backdoor attacks: their own victim's training, no engine steps."""
SPLIT_ONLY = {"fsha": ["attack", "fsha"], **{name: ["attack", name] for name in LABELS + VFL}}
"""Attacks outside the engine (their own training loop, or a score over the training's messages; no `--compile`)."""
PRESETS = {"label-norm": "label-norm.li", "label-direction": "label-direction.li", "label-direct": "label-direct.fu",
           "label-completion": "label-completion.fu", "label-active": "label-active.fu",
           "label-unsplit": "label-unsplit.original", "bli": "bli.liu", "bli-replace": "bli-replace.liu",
           "gr-backdoor": "gr-backdoor.liu", "esa": "esa.luo", "grn": "grn.luo"}
"""The preset each attack runs where it has no `.quick` one (the label attacks' paper presets take seconds)."""


def with_options(argv: list[str], **options: object) -> list[str]:
    """`argv` with these options set (`iterations=5` sets `--iterations 5`, replacing a value already given;
    True adds a flag, None removes the option)."""
    out = list(argv)
    for key, value in options.items():
        flag = "--" + key.replace("_", "-")
        if flag in out:
            at = out.index(flag)
            takes_value = at + 1 < len(out) and not out[at + 1].startswith("--")
            del out[at:at + 1 + takes_value]
        if value is True:
            out.append(flag)
        elif value is not None and value is not False:
            out += [flag, str(value)]
    return out
