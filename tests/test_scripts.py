"""The artefact drivers under scripts/ run end to end on a tiny setting."""
import json
import statistics
import subprocess
import sys
from pathlib import Path

SCRIPTS = Path(__file__).resolve().parents[1] / "scripts"


def test_accuracy_seeds_reports_each_seed_and_their_spread(tmp_path):
    out = tmp_path / "seeds"
    done = subprocess.run([sys.executable, str(SCRIPTS / "unsplit_artefacts.py"), "accuracy-seeds", "--archs",
                           "small-mlp", "--seeds", "2", "--epochs", "1", "--device", "cpu", "--out", str(out)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    metrics = json.loads((out / "metrics.json").read_text())
    finals = [row["accuracy"] for row in metrics["per_seed"]]
    assert [row["seed"] for row in metrics["per_seed"]] == [0, 1] and finals[0] != finals[1]
    (summary,) = metrics["summary"]
    assert summary["mean"] == statistics.mean(finals) and summary["std"] == statistics.stdev(finals)
    for seed in (0, 1):                         # each seed's training traceable to its own run directory
        config = json.loads((out / f"small-mlp-seed{seed}" / "config.json").read_text())
        assert config["config"]["train"]["seed"] == seed
    assert (out / "accuracy_seeds.png").exists() and "| small-mlp | 2 |" in (out / "report.md").read_text()
