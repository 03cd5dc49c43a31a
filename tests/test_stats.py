"""prbench.stats.bootstrap_ci: the vectorised mean replicates are the per-replicate loop's, byte for byte,
and the interval is a percentile bootstrap of the mean, as scipy computes one from the same resamples."""
import numpy as np
import pytest
from scipy import stats as sps

from prbench import stats


@pytest.mark.parametrize("n", [2, 3, 7, 8, 9, 17, 128, 129, 1000, 5001])
def test_mean_fast_path_equals_the_loop(n, monkeypatch):
    rng = np.random.default_rng(n)
    for values in (rng.standard_normal(n), rng.integers(0, 3, n) / 2.0, rng.random(n) * 1e3):
        fast = stats.bootstrap_ci(values, n_boot=500, seed=n)
        loop = stats.bootstrap_ci(values, n_boot=500, seed=n, stat=lambda a: np.mean(a))  # the loop path
        assert fast == loop  # exact: the same bytes, not approximately
        monkeypatch.setattr(stats, "_BLOCK", 3 * n + 1)  # several blocks of rows, one a partial block
        assert stats.bootstrap_ci(values, n_boot=500, seed=n) == loop
        monkeypatch.undo()


def test_interval_is_the_percentile_bootstrap_of_the_mean():
    values = np.random.default_rng(3).standard_normal(40)
    est, lo, hi = stats.bootstrap_ci(values, n_boot=2000, seed=11, ci=0.9)
    idx = np.random.default_rng(11).integers(0, 40, size=(2000, 40))
    res = sps.bootstrap((values,), np.mean, n_resamples=2000, confidence_level=0.9, method="percentile",
                        random_state=np.random.default_rng(0))
    assert est == pytest.approx(values.mean())
    # the same resamples recomputed by hand, and scipy's own percentile interval (other resamples) close by
    boots = values[idx].mean(axis=1)
    assert (lo, hi) == (np.quantile(boots, 0.05), np.quantile(boots, 0.95))
    assert lo == pytest.approx(res.confidence_interval.low, abs=0.05)
    assert hi == pytest.approx(res.confidence_interval.high, abs=0.05)


def test_degenerate_inputs():
    assert np.isnan(stats.bootstrap_ci([1.0], n_boot=100)[1])
    assert np.isnan(stats.bootstrap_ci([1.0, 2.0], n_boot=0)[2])
    assert np.isnan(stats.bootstrap_ci([], n_boot=100)[0])
