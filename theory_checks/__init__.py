"""Executable checks of the JAST paper's invariance lemmas and bounds, run through the real protocol.

`CHECKS` maps each check's name to a function `check(dtype=...) -> CheckResult`; `run_checks` runs
some or all of them. The modules: `records` (the result record), `transforms` (the matrices U),
`protocol_runs` (train twice through `vfl.protocol` and compare), `invariance` (Lemmas 1-3,
Corollaries 1-2, Remarks 2 and 4), `adam` (the paper's Adam recursion), `convergence` (Example 1,
Lemmas 4-6, the Example 1 figure), `suite`, `cli`.
"""
from theory_checks.records import CheckResult
from theory_checks.suite import CHECKS, SuiteResult, run_checks, select_checks

__all__ = ["CHECKS", "CheckResult", "SuiteResult", "run_checks", "select_checks"]
