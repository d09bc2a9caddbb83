"""Claims of ... (filled in below)."""
from splitlab.claims.model import Claim

PAPER = "tgias"
CITATION = ""
CLAIMS: list[Claim] = []
PAPER_PRESETS: dict = {}
