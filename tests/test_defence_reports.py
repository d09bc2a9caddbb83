"""What the defences did, in a run's metrics (`defence_report`): with K feature parties each party's own report is
kept (under `party-K`), not merged by key so that the last party's numbers stand for all; one party's report and
the label party's stay as they were."""
from __future__ import annotations

from types import SimpleNamespace

import pytest

from splitlab import api
from vfl.defences import feature_reports, report
from vfl.training import training_metrics

CASE = dict(dataset="wdbc", cut_layer=6, epochs=1, seed=0)          # 455 training rows: quick


def _party(**numbers) -> SimpleNamespace:
    """A party whose one defence reports `numbers`."""
    return SimpleNamespace(defences=(SimpleNamespace(report=lambda: dict(numbers)),))


def test_each_feature_partys_report_is_kept_beside_the_label_partys():
    parties = SimpleNamespace(clients=[_party(dcor=0.25), _party(), _party(dcor=0.75)])
    server = _party(label_dp_epsilon=1.0)
    assert report(parties, server) == {"party-0": {"dcor": 0.25}, "party-2": {"dcor": 0.75}, "label_dp_epsilon": 1.0}
    assert report(_party(dcor=0.25), server) == {"dcor": 0.25, "label_dp_epsilon": 1.0}     # one party: flat
    assert feature_reports([{"dcor": 0.5}]) == {"dcor": 0.5}
    assert feature_reports([{"dcor": 0.5}, {"dcor": 0.6}]) == {"party-0": {"dcor": 0.5}, "party-1": {"dcor": 0.6}}


@pytest.mark.slow                      # a two-party training: about 3 s of CPU
def test_two_nopeek_parties_each_report_their_own_distance_correlation():
    two = training_metrics(api.train("tabular-mlp", parties=2, defence="nopeek:alpha=1", **CASE))["defence_report"]
    assert set(two) == {"party-0", "party-1"}
    assert all(set(r) == {"nopeek_dcor_mean", "nopeek_dcor_last"} for r in two.values())
    assert two["party-0"]["nopeek_dcor_mean"] != two["party-1"]["nopeek_dcor_mean"]     # two strips, two numbers
