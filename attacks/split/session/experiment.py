"""FSHA in the one split experiment (`attacks.split.run_split`): what is FSHA's own on the victim's side (not the
attack, `attacks.split.fsha`, taken from its registered spec). The family loads the private and public splits,
builds the honest client and lets the malicious server (the attack) run protocol rounds with it through a
`ClientSession` (the case's training in the malicious role, `vfl.training.malicious_session`); the one experiment
scores the decoded targets through the one driver, with the spec's evaluation against the ground truth.
`--transport tcp` puts the honest client in a process of its own and the rounds on the wire (`wire.py`).

Used by `splitlab attack fsha`, `splitlab compare` and the Python API.
"""
from __future__ import annotations

import functools
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from typing import Any, ClassVar, ContextManager, Iterator, Mapping

from attacks.driver import Outcome
from attacks.registry import spec as registered
from attacks.split.experiment import SplitConfig
from attacks.split.run_split import Observed, Prepared, attack_observed, split_experiment
from attacks.split.session.victim import FshaVictim, VictimSide, load_split, observed, victim_side
from vfl import data as datasets
from vfl.cli_output import table
from vfl.errors import SplitlabError
from vfl.fsha_victim import FSHA_DEFAULTS, FSHA_MEANING, NOT_FSHA, RENAMED
from vfl.options import choice, option, take_renamed
from vfl.protocol import Transcript
from vfl.runs import Run
from vfl.runtime import resolve_device, terminate_as_interrupt

__all__ = ["FshaConfig", "FshaFamily", "victim_for", "observe_local", "run_fsha", "summary", "FSHA_EXPERIMENT"]


def victim_for(settings, **given: Any) -> FshaVictim:
    """The victim the settings' preset was written against (its dataset and client learning rate) over FSHA's
    defaults (`vfl.fsha_victim.FSHA_DEFAULTS`), sharing the attack's batch size and width, with the given fields
    (None: not given; FSHA's earlier names `level` and `lr_client` taken as aliases) replaced; checked."""
    preset = next((p for p in registered("fsha").presets if p.name == settings.preset), None)
    base = dict(preset.experiment) if preset is not None else {}
    return FshaVictim(**{**base, "batch_size": settings.batch_size, "width": settings.width,
                         **take_renamed({k: v for k, v in given.items() if v is not None}, RENAMED)})


@dataclass(frozen=True, kw_only=True)
class FshaConfig(SplitConfig):
    """`splitlab attack fsha`: the malicious server's preset and settings, and the victim's options."""
    attack: ClassVar[str] = "fsha"
    victim_options: ClassVar[type] = FshaVictim
    victim_defaults: ClassVar[Mapping[str, Any]] = FSHA_DEFAULTS
    victim_hidden: ClassVar[tuple[str, ...]] = (*NOT_FSHA, "optimizer")
    victim_help: ClassVar[Mapping[str, str]] = FSHA_MEANING
    renamed: ClassVar[Mapping[str, str]] = RENAMED
    transport: str = option("local", "local (the honest client in this process) or tcp (the malicious server here, "
                            "the honest client a `splitlab client --kind fsha` process on 127.0.0.1; the gradients "
                            "go over the wire).", choice(("local", "tcp")))

    def check(self) -> None:
        super().check()
        self.victim_config

    def check_data(self) -> None:
        datasets.require(self.victim_config.dataset, self.victim_config.data_root)

    @functools.cached_property
    def victim_config(self) -> FshaVictim:
        return victim_for(self.settings, seed=self.seed, device=self.device, data_root=self.data_root,
                          data_draw=self.data_draw, **self.victim)


def observe_local(victim: FshaVictim, attack: Any, run: Run | None = None, *, seed: int = 0,
                  interruptible: bool = False, transcript: Transcript | None = None, private=None,
                  public=None) -> Observed:
    """The honest client in this process and the malicious server's session with it: what FSHA observes
    (`victim.observed`).

    The victim (client initialisation and private batch order from `victim.seed`) trains with the malicious
    server `attack` (its networks, public batch order and penalty draws from `seed`). The targets are the
    first private image of each class. `interruptible`: Ctrl-C ends the rounds early and what was reached is
    scored and written (`extras.interrupted`); otherwise Ctrl-C propagates, so a caller running several jobs
    (`splitlab compare`) stops as a whole."""
    if private is None:
        private, public = load_split(victim, attack.settings.batch_size)
    log = run.log if run is not None else (lambda line: None)
    return observed(victim_side(victim, private, public, transcript), attack, log, seed=seed,
                    interruptible=interruptible)


def run_fsha(victim: FshaVictim, attack: Any, run: Run | None = None, *, seed: int = 0, lpips=None, fid=None,
             progress: bool = True, interruptible: bool = False, transcript: Transcript | None = None,
             private=None, public=None) -> Outcome:
    """FSHA against an honest client in this process (`observe_local`): attack, score, evaluate and write."""
    observed = observe_local(victim, attack, run, seed=seed, interruptible=interruptible, transcript=transcript,
                             private=private, public=public)
    return attack_observed(registered("fsha"), attack, observed, run, lpips=lpips, fid=fid, progress=progress)


class FshaFamily:
    """What FSHA keeps of its own in the one split experiment: its victim's private and public splits, the honest
    client's session with the malicious server (in process or over TCP), its record and its table."""

    def load(self, config: FshaConfig, attack: Any) -> tuple[FshaVictim, tuple]:
        return config.victim_config, load_split(config.victim_config, attack.settings.batch_size)

    @contextmanager
    def observe(self, prepared: Prepared, run: Run | None, progress: bool) -> Iterator[Observed]:
        """The victim side, in this process or in a client process of its own over TCP, and what the attack
        observes of it (`victim.observed`, the same either way); Ctrl-C in process ends the rounds early and
        what was reached is written, over TCP it ends both sides."""
        log = run.log if run is not None else (lambda line: None)
        with terminate_as_interrupt(), self._side(prepared, run) as side:
            yield observed(side, prepared.attack, log, seed=prepared.victim.seed,
                           interruptible=prepared.config.transport == "local")

    @staticmethod
    def _side(prepared: Prepared, run: Run | None) -> ContextManager[VictimSide]:
        victim, (private, public) = prepared.victim, prepared.data
        if prepared.config.transport == "local":
            return nullcontext(victim_side(victim, private, public))
        if run is None:
            raise SplitlabError("transport tcp keeps its parties' runs in the run directory: give out=")
        from attacks.split.session.wire import victim_over_tcp      # the wire's modules, only when it is used

        return victim_over_tcp(victim, run, private=private, public=public,
                               iterations=prepared.attack.settings.iterations)

    def record(self, prepared: Prepared) -> dict[str, Any]:
        private, public = prepared.data
        return {"settings": prepared.attack.settings, "victim": prepared.victim,
                "transport": prepared.config.transport, "seed": prepared.victim.seed,
                "device": str(resolve_device(prepared.victim.device)), "dataset_provenance": private.provenance,
                "private_images": len(private), "public_images": len(public)}

    def summary(self, prepared: Prepared, outcome: Outcome, run: Run):
        return summary(prepared, outcome, run)


def _fmt(value: float | None, digits: int = 4) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def summary(prepared: Prepared, outcome: Outcome, run: Run):
    m, victim, s = outcome.metrics, prepared.victim, prepared.attack.settings
    e = m["extras"]

    def show(console) -> None:
        console.print(table(f"FSHA, {victim.arch} client, level {victim.cut_layer}, {victim.dataset}"
                            f"{', over TCP' if prepared.config.transport == 'tcp' else ''} "
                            "(MSE on [-1,1]; means over each log interval)", e["log"],
                            ["iteration", "encoder_decoder_mse", "reconstruction_mse", "discriminator_loss",
                             "client_loss"]))
        console.print(f"training-interval reconstruction MSE final {_fmt(e['training_interval_mse_pm1_final'])} / "
                      f"best {_fmt(e['training_interval_mse_pm1_best'])} on [-1,1] "
                      f"({_fmt(e['training_interval_mse01_final'])} / {_fmt(e['training_interval_mse01_best'])} "
                      f"on [0,1]); targets: image_mse {_fmt(m['image_mse'])} on [0,1] (zero-image baseline "
                      f"{_fmt((m['baselines'] or {}).get('zero', {}).get('image_mse'))}), PSNR {_fmt(m['psnr'], 2)} dB, "
                      f"SSIM {_fmt(m['ssim'], 3)}; {m['steps']} iterations in {m['seconds']:.1f} s "
                      f"({_fmt(e['iterations_per_second'], 3)} it/s on {e['device']}); run {run.path}")
        if e["interrupted"]:
            console.print(f"interrupted by hand after {m['steps']} of {s.iterations} iterations")
        if e["diverged_at"] is not None:
            console.print(f"diverged by iteration {e['diverged_at']}: no final values reported")
    return show


FSHA_EXPERIMENT = split_experiment(FshaConfig, FshaFamily())
"""How `splitlab attack fsha` runs: the honest client's session with the malicious server (in process or over TCP)
and the attack through the one driver."""
