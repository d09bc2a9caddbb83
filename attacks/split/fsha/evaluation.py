"""FSHA's evaluation: what the victim side measures against the ground truth, which the attack never sees.

- the monitor handed to the attack is the victim side's (`attacks.split.session.rounds.RoundLog`, the error of the
  server's reconstruction of each received batch against that batch, the paper's Figure 5);
- `evaluate_private`: the reconstruction of `eval_images` private images and the control decoder(pilot(x));
- `evaluation` and `write_outputs`, the spec's hooks: the training-interval errors, the evaluation and the
  transcript summary in metrics.json; curves.png (Figure 5), reconstruction_control.png (Figures 3-4) and
  reconstruction.pt in the run directory.
"""
from __future__ import annotations

import math
from typing import Any

import torch

from attacks.kit import Client, ImageData, Run, atomic_torch_save, defence_report, image_grid, image_mse
from attacks.split.fsha.attack import TrainedServer
from attacks.split.fsha.images import from_fsha_images, to_dataset_images, to_fsha_images

__all__ = ["evaluate_private", "evaluation", "write_outputs", "curves_figure"]

@torch.no_grad()
def evaluate_private(client: Client, server: TrainedServer, private: ImageData, count: int,
                     device: torch.device) -> dict[str, float]:
    """Ground truth: the server's reconstruction f~^-1(f(x)) of the first `count` private images (client
    inference mode) and the control decoder(pilot(x)), as per-image MSE means on [-1, 1] (`_pm1`), on
    [0, 1] at 3x32x32 (`01`), and `image_mse` as `attacks.metrics.score` means it (the dataset's scale and
    shape, clamped)."""
    n = min(count, len(private))
    sums = torch.zeros(5, device=device)
    shape = tuple(private.images.shape[1:])
    for start in range(0, n, 500):
        original = private.images[start:min(start + 500, n)].to(device)
        x = to_fsha_images(original)
        rec, ctl = server.decode(client.infer(x)), server.control(x)
        sums += torch.stack([image_mse(rec, x).sum(), image_mse(from_fsha_images(rec), from_fsha_images(x)).sum(),
                             image_mse(ctl, x).sum(), image_mse(from_fsha_images(ctl), from_fsha_images(x)).sum(),
                             image_mse(to_dataset_images(rec, shape).clamp(0, 1), original).sum()])
    values = (sums / n).tolist()
    return {"n_images": n, "reconstruction_mse_pm1": values[0], "reconstruction_mse01": values[1],
            "control_mse_pm1": values[2], "control_mse01": values[3], "image_mse": values[4]}


def _interval_summary(rows: list[dict[str, float]], diverged: bool) -> dict[str, Any]:
    """Final (last interval; None after divergence) and best (lowest finite) training-interval errors."""
    def final(name: str) -> float | None:
        return None if diverged or not rows else rows[-1][name]

    def best(name: str) -> float | None:
        values = [r[name] for r in rows if math.isfinite(r[name])]
        return min(values) if values else None

    best_row = min((r for r in rows if math.isfinite(r["reconstruction_mse"])), key=lambda r: r["reconstruction_mse"],
                   default=None)
    return {"training_interval_mse_pm1_final": final("reconstruction_mse"),
            "training_interval_mse_pm1_best": best("reconstruction_mse"),
            "training_interval_mse01_final": final("reconstruction_mse01"),
            "training_interval_mse01_best": best("reconstruction_mse01"),
            "best_iteration": None if best_row is None else best_row["iteration"]}



def evaluation(reconstruction, metrics: dict, truth) -> dict[str, Any]:
    """The spec's `evaluate` hook: the ground-truth measures under metrics.json's `extras`."""
    side, rounds = truth.context["side"], truth.context["rounds"]
    server: TrainedServer = reconstruction.artefacts["server"]
    if reconstruction.extras["interrupted"]:
        if rounds.pending:
            rounds.flush(reconstruction.steps)
        rounds.log(f"interrupted after {reconstruction.steps} of {reconstruction.extras['iterations_asked']} "
                   "iterations; writing what was reached")
    received = side.transcript.received_by_client()
    found = defence_report(side.client)            # what the client's own defences did (a detector's verdict)
    return {**({"defence_report": found} if found else {}), "extras": {
        **metrics["extras"],
        **_interval_summary(rounds.rows, reconstruction.extras["diverged_at"] is not None),
        "eval": evaluate_private(side.client, server, side.private, side.victim.eval_images, side.device),
        "transcript": {"sent_by_client": len(side.transcript.sent_by_client()), "received_by_client": len(received),
                       "received_kinds": sorted({e.kind for e in received})},
        "scale": "*_pm1 and encoder_decoder_* on FSHA's [-1,1] 3x32x32 scale; *_mse01 on [0,1] at 3x32x32; "
                 "image_mse (top level and eval) on the dataset's [0,1] scale and shape, clamped",
        "log": list(rounds.rows),
    }}


def controls(outcome) -> torch.Tensor:
    """decoder(pilot(x)) of the targets, on the dataset's [0,1] scale and shape (CPU)."""
    server: TrainedServer = outcome.reconstruction.artefacts["server"]
    device = next(server.decoder.parameters()).device
    x = to_fsha_images(outcome.targets.to(device))
    return to_dataset_images(server.control(x), tuple(outcome.targets.shape[1:])).cpu()


def write_outputs(run: Run, outcome) -> None:
    """The spec's `write` hook: curves.png (Figure 5), reconstruction_control.png (targets, reconstructions,
    control) and reconstruction.pt, beside the driver's files."""
    m, rec = outcome.metrics, outcome.reconstruction
    label = f"{m['arch']} client, level {m['level']}, {m['dataset']}"
    control = controls(outcome)
    run.save_figure("curves.png", curves_figure([(m["arch"], m["extras"]["log"])]))
    run.save_figure("reconstruction_control.png", image_grid(
        [("private", outcome.targets), ("reconstruction", outcome.shown), ("control f~^-1(f~(x))", control.clamp(0, 1))],
        title=f"FSHA, {label}, after {rec.steps} iterations"))
    atomic_torch_save({"originals": outcome.targets, "reconstructions": rec.images.detach().cpu(),
                       "controls": control}, run.file("reconstruction.pt"))
    e = m["extras"]
    if e["training_interval_mse_pm1_final"] is not None:
        run.log(f"fsha: training-interval reconstruction MSE on [-1,1] final {e['training_interval_mse_pm1_final']:.4f} "
                f"best {e['training_interval_mse_pm1_best']:.4f}; eval {e['eval']['reconstruction_mse_pm1']:.4f}, "
                f"control {e['eval']['control_mse_pm1']:.4f}")


def curves_figure(series: list[tuple[str, list[dict[str, float]] | tuple[dict[str, float], ...]]]):
    """Figure 5: encoder-decoder and reconstruction error (MSE on [-1,1]) per iteration; losses beside."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(11, 4))
    errors, losses = fig.subplots(1, 2)
    for label, log in series:
        its = [r["iteration"] for r in log]
        line, = errors.plot(its, [r["reconstruction_mse"] for r in log], label=f"{label}: reconstruction error")
        errors.plot(its, [r["encoder_decoder_mse"] for r in log], "--", color=line.get_color(),
                    label=f"{label}: encoder-decoder error")
        line, = losses.plot(its, [r["discriminator_loss"] for r in log], label=f"{label}: discriminator loss")
        losses.plot(its, [r["client_loss"] for r in log], ":", color=line.get_color(), label=f"{label}: client loss")
    errors.set(xlabel="iteration", ylabel="MSE on [-1, 1]", yscale="log", title="FSHA errors")
    losses.set(xlabel="iteration", ylabel="loss", title="critic and client losses")
    for ax in (errors, losses):
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    return fig
