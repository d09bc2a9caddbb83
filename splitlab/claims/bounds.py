"""Claims of ... (filled in below)."""
from splitlab.claims.model import Claim

PAPER = "bounds"
CITATION = ""
CLAIMS: list[Claim] = []
PAPER_PRESETS: dict = {}
