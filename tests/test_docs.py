"""The docs users read are true to the code: generated pages current, the README short, no tracker words."""
import re
from pathlib import Path

from splitlab.docs import stale

ROOT = Path(__file__).resolve().parents[1]


def test_the_generated_docs_are_current():
    assert stale() == [], "run `python -m splitlab.docs` and commit docs/"


def test_the_readme_is_a_short_guide_with_the_two_quick_start_commands():
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) <= 300
    start = readme.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    commands = [line for line in start.split("```bash", 1)[1].split("```", 1)[0].splitlines() if line.strip()]
    assert len(commands) == 2 and commands[1] == (ROOT / ".ci" / "run").read_text().strip().splitlines()[-1]


def test_no_tracker_words_in_code_docs_or_help():
    pattern = re.compile(r"\bissue\s*#?\d|\bthe issue\b|\berrata\b|\bthe issue's\b", re.I)
    files = [p for p in ROOT.rglob("*") if p.suffix in (".py", ".md", ".toml") and ".venv" not in p.parts
             and "runs" not in p.parts and p.is_file()]
    offenders = [f"{p.relative_to(ROOT)}:{i}" for p in files for i, line in enumerate(p.read_text().splitlines(), 1)
                 if pattern.search(line) and p.name != "test_docs.py"]
    assert offenders == []


def test_every_markdown_link_in_the_readme_and_docs_points_at_a_file():
    for page in [ROOT / "README.md", *ROOT.glob("docs/**/*.md")]:
        prose = re.sub(r"```.*?```", "", page.read_text(), flags=re.S)          # code blocks hold no links
        for target in re.findall(r"\]\(([^)#:]+)(?:#[^)]*)?\)", prose):
            assert (page.parent / target).exists(), f"{page.relative_to(ROOT)} links to missing {target}"
