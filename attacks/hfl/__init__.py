"""Horizontal-FL gradient inversion: what an honest-but-curious server observes, label recovery, attacks.

- `observations`: typed, read-only records of what the server sees (FedSGD gradient, FedAvg update,
  a log of (weights, gradient) over rounds) and the client simulator that produces them
  (`observe_fedsgd`, `observe_fedavg`; TGIAs-RO builds its round log from a training trace); attacks declare
  what they need and `check_requirements` refuses observations that lack it.
- `defences`: what the client does to its upload (Gaussian noise with clipping, top-k sparsification,
  quantisation, upload DP), parsed from specs such as `gaussian:sigma=1e-3,clip=4`.
- `labels`: iDLG's analytic rule (batch 1), a counting rule for larger batches, FedLeak's and GI's rules.
- `variables`: the dummy start every attack's trials begin from; `secagg`: secure aggregation of uploads;
  `fedavg`: the FedAvg parts AWA and AGIC share; `trajectory`: scoring images along a run.
- one package per attack, each with its spec (`SPEC`), its settings and presets: `dlg` (DLG and iDLG),
  `invgrad`, `gi`, `fedleak`, `awa`, `agic`, `tgias` (TGIAs-RO); no attack's package imports another's.
- `experiment`: one attack end to end, as `splitlab hfl` runs it; `cli`: the command.

    from attacks import registry
    from attacks.hfl.observations import observe_fedsgd
    obs = observe_fedsgd(model, x, y, arch="lenet")        # the client's upload; x, y stay with the caller
    spec = registry.spec("dlg")
    rec = spec.make(spec.settings_for("dlg.original"))(obs, seed=0)    # an attacks.result.Reconstruction
"""
