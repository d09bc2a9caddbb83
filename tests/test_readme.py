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
