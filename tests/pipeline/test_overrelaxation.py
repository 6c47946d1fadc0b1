"""The over-relaxation of CVB0's soft sweeps: the step rule on a given sequence of training likelihoods."""

from __future__ import annotations

import numpy as np

from jsmf_dask.pipeline.refine_sweeps import Overrelaxation


def _steps(likelihoods, growth=1.5, max_step=3.0):
    relaxation = Overrelaxation(growth, max_step)
    counts, steps = np.ones((3, 2)), []
    for entering in likelihoods:
        updated = counts + 1.0  # every sweep moves every count up by 1
        (moved,), step = relaxation.next_counts([counts], [updated], entering)
        np.testing.assert_allclose(moved, counts + step)  # W + s (W' − W)
        steps.append(step)
        counts = moved
    return steps


def test_the_step_grows_after_each_sweep_up_to_its_largest():
    assert _steps([-5.0, -4.0, -3.0, -2.5, -2.4, -2.3]) == [1.0, 1.5, 2.25, 3.0, 3.0, 3.0]


def test_an_extrapolated_state_that_scores_lower_sends_the_step_back_to_one():
    # the third state (extrapolated by 1.5) scores below the second: the next counts are that sweep's own update
    assert _steps([-5.0, -4.0, -4.1, -3.9, -3.8]) == [1.0, 1.5, 1.0, 1.5, 2.25]


def test_a_plain_state_that_scores_lower_does_not_reset_anything():
    # the fourth state (plain, after the reset) scores below the third: CVB0's own wobble, not an extrapolation's,
    # so the step grows on
    assert _steps([-5.0, -4.0, -4.1, -4.2, -4.0]) == [1.0, 1.5, 1.0, 1.5, 2.25]


def test_every_group_s_counts_move_by_the_same_step():
    relaxation = Overrelaxation(1.5, 3.0)
    start = [np.full((2, 2), 1.0), np.full((2, 2), 4.0)]
    relaxation.next_counts(start, start, -5.0)  # the first sweep: step 1
    moved, step = relaxation.next_counts(start, [np.full((2, 2), 2.0), np.full((2, 2), 3.0)], -4.0)
    assert step == 1.5
    np.testing.assert_allclose(moved[0], 2.5)  # 1 + 1.5 (2 − 1)
    np.testing.assert_allclose(moved[1], 2.5)  # 4 + 1.5 (3 − 4)
