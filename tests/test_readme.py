"""The README's code examples run and do what the README says they do."""
import re
from pathlib import Path

import pytest

from attacks.metrics import psnr

README = Path(__file__).resolve().parents[1] / "README.md"


@pytest.mark.slow
def test_the_extending_example_reconstructs_the_image(capsys):
    section = README.read_text().split("## Extending the lab", 1)[1]
    code = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    scope: dict = {}
    exec(compile(code, "README.md (Extending the lab)", "exec"), scope)
    best, x = scope["best"], scope["x"]
    assert best.shape == x.shape and scope["result"].trials == 4
    assert psnr(best, x).item() > 20                            # a recognisable digit, not noise
    assert "PSNR" in capsys.readouterr().out


def test_ci_runs_the_readmes_test_command_as_a_fresh_machine_would():
    quick_start = re.search(r"## Quick start.*?```bash\n(.*?)```", README.read_text(), re.S).group(1).splitlines()
    assert len(quick_start) == 2 and quick_start[1].endswith("pytest -n auto")
    lines = [line for line in (README.parent / ".ci" / "run").read_text().splitlines() if line and line[0] != "#"]
    assert lines[-1] == quick_start[1]                              # the same command, verbatim, last
    setup = "\n".join(lines[:-1])
    # nothing an earlier run cached is found: pip resolves anew, caches and temporary files start empty
    assert "PIP_NO_CACHE_DIR=1" in setup and 'TMPDIR="$fresh/tmp"' in setup and 'XDG_CACHE_HOME="$fresh/cache"' in setup
    assert "set -euo pipefail" in setup                             # pytest's exit 5 (no test ran) fails CI too
