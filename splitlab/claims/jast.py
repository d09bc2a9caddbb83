"""Claims of ... (filled in below)."""
from splitlab.claims.model import Claim

PAPER = "jast"
CITATION = ""
CLAIMS: list[Claim] = []
PAPER_PRESETS: dict = {}
