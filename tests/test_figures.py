"""Figures: every plot writes a PNG and a PDF from inputs in the other stages' file formats; the
scatter's points and the BoN curves' lines and bands are the values of the tables they were drawn
from, recomputed here from the pairs, curve and judged files (matplotlib's artists' data)."""
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from matplotlib.collections import PathCollection
from scipy import stats
from synthetic_analysis import write_world

from prbench.analysis import figures
from prbench.analysis.correlation import run_correlations

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    w = write_world(tmp_path_factory.mktemp("world"), pairs_per_subset=20, eval_per_subset=10, general_pairs=40)
    t = w["root"] / "results" / "tables"
    run_correlations(w["rms"], w["pair_files"], w["downstream"], t / "correlations.csv",
                     t / "correlation_summary.md", t / "correlation_inputs.csv", n_boot=50, n_perm=50,
                     rbo_p=0.9, ci=0.95, seed=0)
    w["tables"] = t
    return w


def _check(png: Path, pdf: Path, min_w=600, min_h=300):
    """Smoke check only (files written, not blank): the plotted values are checked on the artists."""
    from PIL import Image

    assert png.read_bytes()[:8] == PNG_MAGIC
    assert pdf.read_bytes()[:5] == b"%PDF-"
    with Image.open(png) as im:
        assert im.width >= min_w and im.height >= min_h
        # not a blank canvas: several distinct colours drawn
        assert len(im.convert("RGB").getcolors(maxcolors=1 << 20) or []) > 10


def test_accuracy_figure(world, tmp_path):
    figures.plot_accuracy(world["tables"] / "benchmark_accuracy.csv", tmp_path / "a.png", tmp_path / "a.pdf",
                          rms=world["rms"], benchmarks=["personalized", "general"])
    _check(tmp_path / "a.png", tmp_path / "a.pdf")


@pytest.fixture
def saved_figures(monkeypatch):
    """Every figure saved while the test runs (plot functions that do not return theirs)."""
    import matplotlib.figure

    saved = []
    original = matplotlib.figure.Figure.savefig

    def savefig(self, *args, **kwargs):
        if not saved or saved[-1] is not self:
            saved.append(self)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(matplotlib.figure.Figure, "savefig", savefig)
    return saved


def test_bon_curves_figure(world, tmp_path, saved_figures):
    figures.plot_bon_curves(world["tables"] / "bon.csv", tmp_path / "b.png", tmp_path / "b.pdf", rms=world["rms"])
    _check(tmp_path / "b.png", tmp_path / "b.pdf")
    (fig,) = saved_figures
    (ax,) = fig.axes  # one policy
    names = world["rms"] + ["oracle", "random"]
    assert [line.get_label() for line in ax.lines] == names
    assert len(ax.collections) == len(names)  # one CI band per line
    curves = Path(world["bon_files"][0][2]).parent
    for line, band, rm in zip(ax.lines, ax.collections, names):
        # the curve: per k, the mean over questions of the curve file's judge scores (expected estimator)
        c = pd.read_csv(curves / f"{'_' + rm if rm in ('oracle', 'random') else rm}.csv")
        want = c[c.estimator == "expected"].groupby("k")["judge_score"].mean()
        np.testing.assert_allclose(line.get_xydata(), np.column_stack([want.index, want.to_numpy()]), atol=1e-12)
        # the band: the table's CI at each k (the synthetic table's CIs are mean -+ 0.05)
        t = pd.read_csv(world["tables"] / "bon.csv")
        t = t[(t.rm == rm) & (t.estimator == "expected")].sort_values("k")
        corners = {(k, round(v, 9)) for k, v in band.get_paths()[0].vertices}
        assert corners == {(k, round(v, 9)) for k, lo, hi in zip(t.k, t.ci_low, t.ci_high) for v in (lo, hi)}
        np.testing.assert_allclose(t["ci_high"] - t["ci_low"], 0.1, atol=1e-9)


def test_bon_curves_figure_draws_the_pooled_rows(world, tmp_path, saved_figures):
    """A bon.csv with per-subset rows (subset column): the figure draws the `all` rows only, the same
    lines and bands as the table without them."""
    t = pd.read_csv(world["tables"] / "bon.csv")
    figures.plot_bon_curves(world["tables"] / "bon.csv", tmp_path / "a.png", tmp_path / "a.pdf", rms=world["rms"])
    shifted = [t.assign(subset=s, mean=t["mean"] + d, ci_low=t["ci_low"] + d, ci_high=t["ci_high"] + d)
               for s, d in (("A", 0.3), ("B", -0.2))]
    sub = pd.concat([t.assign(subset="all")] + shifted)
    sub.to_csv(tmp_path / "bon.csv", index=False)
    figures.plot_bon_curves(tmp_path / "bon.csv", tmp_path / "b.png", tmp_path / "b.pdf", rms=world["rms"])
    (ax_a,), (ax_b,) = (f.axes for f in saved_figures)
    assert [ln.get_label() for ln in ax_a.lines] == [ln.get_label() for ln in ax_b.lines]
    for la, lb in zip(ax_a.lines, ax_b.lines):
        np.testing.assert_array_equal(la.get_xydata(), lb.get_xydata())
    for ca, cb in zip(ax_a.collections, ax_b.collections):
        np.testing.assert_array_equal(ca.get_paths()[0].vertices, cb.get_paths()[0].vertices)


def _panel_points(ax) -> np.ndarray:
    return np.vstack([c.get_offsets() for c in ax.collections if isinstance(c, PathCollection)])


def test_scatter_plots_the_accuracies_and_downstream_means(world, tmp_path):
    """Each panel's points: per RM, its accuracy (mean correct over its pairs file) against its BoN
    mean judge score (expected, k=16, from its curve file) or its PPO mean judge score (its judged
    file); each title's rho and tau are scipy's on those points."""
    t = world["tables"]
    fig = figures.plot_scatter(t / "correlation_inputs.csv", t / "correlations.csv", tmp_path / "s.png",
                               tmp_path / "s.pdf", signals={"bon": {"estimator": "expected", "k": 16}})
    rms = world["rms"]
    acc = {b: {} for b in ("personalized", "general")}
    for rm, bench, path in world["pair_files"]:
        acc[bench][rm] = pd.read_json(path, lines=True)["correct"].mean()
    bon, ppo = {}, {}
    for _, rm, path in world["bon_files"]:
        c = pd.read_csv(path)
        bon[rm] = c[(c.estimator == "expected") & (c.k == 16)]["judge_score"].mean()
    for _, rm, path in world["ppo_files"]:
        ppo[rm] = pd.read_json(path, lines=True)["score"].mean()
    axes = fig.axes
    assert len(axes) == 4  # (BoN, PPO) x (personalized, general)
    for ax, (down, bench) in zip(axes, [(bon, "personalized"), (bon, "general"), (ppo, "personalized"),
                                        (ppo, "general")]):
        want = np.array([[acc[bench][rm], down[rm]] for rm in rms])
        np.testing.assert_allclose(_panel_points(ax), want, atol=1e-9, err_msg=ax.get_title())
        m = re.fullmatch(rf"{bench}: ρ = (-?[\d.]+), τ = (-?[\d.]+)", ax.get_title())
        assert m, ax.get_title()
        assert float(m.group(1)) == pytest.approx(stats.spearmanr(want[:, 0], want[:, 1]).statistic, abs=0.005)
        assert float(m.group(2)) == pytest.approx(stats.kendalltau(want[:, 0], want[:, 1]).statistic, abs=0.005)
    assert axes[0].get_ylabel().startswith("BoN (expected, k=16)") and axes[2].get_ylabel().startswith("PPO")
    assert sorted(t.get_text() for t in axes[0].texts if t.get_text()) == sorted(rms)  # every RM labelled


def test_scatter_and_correlation_figures(world, tmp_path):
    t = world["tables"]
    figures.plot_scatter(t / "correlation_inputs.csv", t / "correlations.csv", tmp_path / "s.png", tmp_path / "s.pdf",
                         signals={"bon": {"estimator": "expected", "k": 16}})
    _check(tmp_path / "s.png", tmp_path / "s.pdf")
    figures.plot_correlations(t / "correlations.csv", tmp_path / "c.png", tmp_path / "c.pdf",
                              signals={"bon": {"estimator": "expected", "k": 16}})
    _check(tmp_path / "c.png", tmp_path / "c.pdf")


def test_training_figure(world, tmp_path):
    figures.plot_training(world["train_logs"], tmp_path / "p.png", tmp_path / "p.pdf")
    _check(tmp_path / "p.png", tmp_path / "p.pdf")


def test_figures_report_bad_inputs(world, tmp_path):
    bad = tmp_path / "log.csv"
    pd.DataFrame({"step": [1, 2], "reward": [0.1, 0.2]}).to_csv(bad, index=False)
    with pytest.raises(ValueError, match=r"log\.csv.*kl"):
        figures.plot_training([("pol", "rm", str(bad))], tmp_path / "p.png", tmp_path / "p.pdf")
    with pytest.raises(ValueError, match="no PPO training logs"):
        figures.plot_training([], tmp_path / "p.png", tmp_path / "p.pdf")
    acc = tmp_path / "acc.csv"
    pd.DataFrame({"rm": ["a"], "benchmark": ["personalized"]}).to_csv(acc, index=False)
    with pytest.raises(ValueError, match=r"acc\.csv.*accuracy"):
        figures.plot_accuracy(acc, tmp_path / "a.png", tmp_path / "a.pdf")
