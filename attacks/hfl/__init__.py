"""Horizontal-FL gradient inversion: what an honest-but-curious server observes, label recovery, attacks.

- `observations`: typed, read-only records of what the server sees (FedSGD gradient, FedAvg update,
  a log of (weights, gradient) over rounds) and the client simulator that produces them
  (`observe_fedsgd`, `observe_fedavg`; TGIAs-RO builds its round log from a training trace); attacks declare what they need and
  `check_requirements` refuses observations that lack it.
- `defences`: what the client does to its upload (Gaussian noise with clipping, top-k
  sparsification, quantisation), parsed from specs such as `gaussian:sigma=1e-3,clip=4`.
- `labels`: iDLG's analytic rule (batch 1) and a counting rule for larger batches.
- `dlg`, `invgrad`: DLG / iDLG and Inverting Gradients as compositions of `attacks.engine` parts;
  their settings are in `settings`, their named presets in the one registry `attacks.presets`.
- `experiment`: one attack end to end, as `splitlab hfl` runs it.

    from attacks.hfl.dlg import DLG
    from attacks.hfl.observations import observe_fedsgd
    from attacks.presets import settings
    obs = observe_fedsgd(model, x, y, arch="lenet")      # the client's upload; x, y stay with the caller
    rec = DLG(settings("dlg.original"))(obs, seed=0)     # an attacks.result.Reconstruction
"""
