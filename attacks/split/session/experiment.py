"""FSHA's experiment, the victim's side of its run (not the attack, `attacks.split.fsha`, taken from its registered
spec): build the honest client on the private split, let the malicious server (the attack) run protocol rounds with
it through a `ClientSession` (`vfl.training.malicious_session`), score the decoded targets through the one driver,
and evaluate against the ground truth (the spec's evaluation). `--transport tcp` puts the honest client in a process
of its own and the rounds on the wire (`wire.py`).

Used by `splitlab attack fsha`, `splitlab compare` and the Python API.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any, ClassVar

from attacks.driver import Outcome, Truth, attack_and_score
from attacks.registry import spec as registered
from attacks.split.experiment import Experiment, SplitConfig
from attacks.split.observations import FshaObservation
from attacks.split.session.rounds import RoundLog
from attacks.split.session.victim import FshaVictim, load_split, victim_side
from vfl import data as datasets
from vfl.cli_output import table
from vfl.errors import SplitlabError
from vfl.options import choice, option
from vfl.protocol import Transcript
from vfl.runs import Run
from vfl.runtime import resolve_device, terminate_as_interrupt

__all__ = ["FshaConfig", "victim_for", "run_fsha", "prepare", "execute", "summary", "FSHA_EXPERIMENT"]


def victim_for(settings, **given: Any) -> FshaVictim:
    """The victim the settings' preset was written against (its dataset and client learning rate), sharing the
    attack's batch size and width, with the given fields (None: not given) replaced; checked."""
    preset = next((p for p in registered("fsha").presets if p.name == settings.preset), None)
    base = dict(preset.experiment) if preset is not None else {}
    return FshaVictim(**{**base, "batch_size": settings.batch_size, "width": settings.width,
                         **{k: v for k, v in given.items() if v is not None}})


@dataclass(frozen=True, kw_only=True)
class FshaConfig(SplitConfig):
    """`splitlab attack fsha`: the malicious server's preset and settings, and the victim's options."""
    attack: ClassVar[str] = "fsha"
    victim_options: ClassVar[type] = FshaVictim
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


@dataclass(frozen=True, eq=False)
class Prepared:
    config: Any
    attack: Any
    victim: FshaVictim
    private: Any
    public: Any

    def record(self) -> dict[str, Any]:
        return {"settings": self.attack.settings, "victim": self.victim, "transport": self.config.transport,
                "seed": self.victim.seed,
                "device": str(resolve_device(self.victim.device)), "dataset_provenance": self.private.provenance,
                "private_images": len(self.private), "public_images": len(self.public)}


def prepare(config: FshaConfig) -> Prepared:
    attack = type(config).bound_spec.attack(config.settings)
    private, public = load_split(config.victim_config, attack.settings.batch_size)
    return Prepared(config, attack, config.victim_config, private, public)


def run_fsha(victim: FshaVictim, attack: Any, run: Run | None = None, *, seed: int = 0, lpips=None, fid=None,
             progress: bool = True, interruptible: bool = False, transcript: Transcript | None = None,
             private=None, public=None) -> Outcome:
    """FSHA against an honest client: observe -> attack -> score, evaluate and write (the one driver).

    The victim (client initialisation and private batch order from `victim.seed`) trains with the malicious
    server `attack` (its networks, public batch order and penalty draws from `seed`). The targets are the
    first private image of each class. `interruptible`: Ctrl-C ends the rounds early and what was reached is
    scored and written (`extras.interrupted`); otherwise Ctrl-C propagates, so a caller running several jobs
    (`splitlab compare`) stops as a whole."""
    if private is None:
        private, public = load_split(victim, attack.settings.batch_size)
    side = victim_side(victim, private, public, transcript)
    s = attack.settings
    log = run.log if run is not None else (lambda line: None)
    label = f"fsha {victim.arch} L{victim.level}"
    rounds = RoundLog(side.batches, s.log_every, s.iterations, side.device, log, label)
    log(f"{label} on {victim.dataset} ({private.provenance}); {len(private)} private / {len(public)} public images; "
        f"device {side.device}; preset {s.preset}")
    observation = FshaObservation(public.images.to(side.device), victim.feature_shape, side.session, victim.arch)
    truth = Truth(side.targets, context={"side": side, "rounds": rounds})
    return attack_and_score(registered("fsha"), attack, observation, truth, run=run, seed=seed, progress=progress,
                            lpips=lpips, fid=fid,
                            facts={"arch": victim.arch, "level": victim.level, "dataset": victim.dataset},
                            title=f"FSHA, {victim.arch} client, level {victim.level}, {victim.dataset}",
                            call={"monitor": rounds, "interruptible": interruptible})


def execute(prepared: Prepared, run: Run | None, *, lpips=None, fid=None, progress: bool = True) -> Outcome:
    if prepared.config.transport == "tcp":
        if run is None:
            raise SplitlabError("transport tcp keeps its parties' runs in the run directory: give out=")
        from attacks.split.session.wire import run_fsha_over_tcp

        return run_fsha_over_tcp(prepared.victim, prepared.attack, run, seed=prepared.victim.seed, lpips=lpips,
                                 fid=fid, progress=progress, private=prepared.private, public=prepared.public)
    with terminate_as_interrupt():
        return run_fsha(prepared.victim, prepared.attack, run, seed=prepared.victim.seed, lpips=lpips, fid=fid,
                        progress=progress, interruptible=True, private=prepared.private, public=prepared.public)


def _fmt(value: float | None, digits: int = 4) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def summary(prepared: Prepared, outcome: Outcome, run: Run):
    m, victim, s = outcome.metrics, prepared.victim, prepared.attack.settings
    e = m["extras"]

    def show(console) -> None:
        console.print(table(f"FSHA, {victim.arch} client, level {victim.level}, {victim.dataset}"
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


FSHA_EXPERIMENT = Experiment(FshaConfig, prepare, execute, summary)
"""How `splitlab attack fsha` runs: the honest client's session with the malicious server (in process or over TCP)
and the attack through the one driver."""
