"""The topic a uniform picks from unnormalised weights (kernels/_categorical.py), against cumulative sums by hand."""

import numpy as np
import pytest

from jsmf_dask.kernels._categorical import pick

WEIGHTS = np.array([1.0, 0.0, 2.0, 3.0])  # cumulative 1, 1, 3, 6 of total 6


@pytest.mark.parametrize(("u", "topic"), [
    (0.0, 0),            # 1 > 0
    (0.16, 0),           # 1 > 0.96
    (1 / 6, 2),          # 1 is not > 1: topic 1 has no weight, so the next with weight
    (0.4, 2),            # 3 > 2.4
    (0.5, 3),            # 3 is not > 3
    (0.999, 3),          # the last topic
])
def test_the_first_topic_whose_cumulative_weight_exceeds_u_times_total(u, topic):
    assert pick(WEIGHTS, WEIGHTS.sum(), u) == topic


def test_a_topic_without_weight_is_never_picked_and_shares_follow_the_weights():
    u = np.random.default_rng(0).random(60_000)
    picks = np.array([pick(WEIGHTS, 6.0, x) for x in u])
    assert not (picks == 1).any()
    # binomial standard error of a share from 60,000 draws is at most 0.002; allow five
    np.testing.assert_allclose(np.bincount(picks, minlength=4) / u.size, WEIGHTS / 6.0, atol=0.01)
