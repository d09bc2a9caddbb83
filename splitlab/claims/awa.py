"""Claims of ... (filled in below)."""
from splitlab.claims.model import Claim

PAPER = "awa"
CITATION = ""
CLAIMS: list[Claim] = []
PAPER_PRESETS: dict = {}
