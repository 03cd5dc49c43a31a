"""Scatter labels (prbench.analysis.figures.place_labels): on clustered RMs no two labels' rendered
boxes overlap, and no label covers another RM's marker; the same input gives the same layout."""
from itertools import combinations

import numpy as np
import pandas as pd
import pytest

from prbench.analysis import figures

RMS = [f"reward_model_{c}_long_name" for c in "abcdefgh"]


def _clustered(tmp_path):
    """Seven RMs within 0.004 of each other on both axes and one far away, two benchmarks."""
    rng = np.random.default_rng(0)
    rows = []
    for b in ("personalized", "general"):
        for i, rm in enumerate(RMS):
            x = 0.9 if i == 7 else 0.60 + rng.uniform(0, 0.004)
            rows.append({"rm": rm, "kind": "benchmark", "benchmark": b, "level": "overall", "group": "overall",
                         "value": x, "ci_low": x - 0.02, "ci_high": x + 0.02})
    for i, rm in enumerate(RMS):
        y = 0.2 if i == 7 else 0.50 + rng.uniform(0, 0.004)
        rows.append({"rm": rm, "kind": "downstream", "policy": "pol", "downstream": "ppo", "estimator": "",
                     "measure": "judge_score", "value": y, "ci_low": y - 0.03, "ci_high": y + 0.03})
    cols = ["rm", "kind", "benchmark", "level", "group", "policy", "downstream", "estimator", "measure", "k",
            "value", "ci_low", "ci_high"]
    pd.DataFrame(rows, columns=cols).to_csv(tmp_path / "inputs.csv", index=False)
    corr = [{"benchmark": b, "level": "overall", "group": "overall", "policy": "pol", "downstream": "ppo",
             "estimator": "", "measure": "judge_score", "k": None, "coefficient": c, "value": 0.1}
            for b in ("personalized", "general") for c in ("spearman", "kendall_tau_b")]
    pd.DataFrame(corr).to_csv(tmp_path / "corr.csv", index=False)
    return tmp_path / "inputs.csv", tmp_path / "corr.csv"


def _labels(fig):
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    FigureCanvasAgg(fig)  # plot_scatter closed the figure (pyplot dropped its canvas)
    fig.canvas.draw()
    r = fig.canvas.get_renderer()
    out = []
    for ax in fig.axes:
        texts = [t for t in ax.texts if t.get_text() in RMS]
        out.append((ax, {t.get_text(): t.get_window_extent(r) for t in texts}, texts))
    return out


def test_clustered_labels_do_not_overlap(tmp_path):
    inputs, corr = _clustered(tmp_path)
    fig = figures.plot_scatter(inputs, corr, tmp_path / "s.png", tmp_path / "s.pdf")
    assert (tmp_path / "s.png").stat().st_size > 1000
    panels = _labels(fig)
    assert len(panels) == 2
    r = fig.canvas.get_renderer()
    for ax, boxes, texts in panels:
        assert set(boxes) == set(RMS)  # every RM labelled once
        for (a, ba), (b, bb) in combinations(boxes.items(), 2):
            assert not ba.overlaps(bb), f"labels {a} and {b} overlap: {ba} {bb}"
        # no label covers the centre of a marker
        dots = {t.get_text(): ax.transData.transform(t.xy) for t in texts}
        for name, box in boxes.items():
            for other, (dx, dy) in dots.items():
                assert not box.contains(dx, dy), f"label {name} covers the marker of {other}"
        # the same labels at the old fixed offset (4, 4) pt would overlap: the input is clustered
        fixed = []
        for t in texts:
            t0 = ax.annotate(t.get_text(), t.xy, textcoords="offset points", xytext=(4, 4), fontsize=8)
            fixed.append(t0.get_window_extent(r))
            t0.remove()
        assert any(a.overlaps(b) for a, b in combinations(fixed, 2))


def _clustered_axes():
    import matplotlib.pyplot as plt

    rng = np.random.default_rng(1)
    pts = [(rm, 0.5 + rng.uniform(0, 0.01), 0.5 + rng.uniform(0, 0.01)) for rm in RMS]
    fig, ax = plt.subplots(figsize=(5, 4))
    ax.scatter([p[1] for p in pts], [p[2] for p in pts], s=36)
    ax.set_xlim(0.3, 0.7)
    ax.set_ylim(0.3, 0.7)
    return fig, ax, pts


def test_label_layout_is_deterministic():
    import matplotlib.pyplot as plt

    layouts = []
    for _ in range(2):
        fig, ax, pts = _clustered_axes()
        texts = figures.place_labels(ax, pts)
        layouts.append([(t.get_text(), tuple(np.round(t.xyann, 6))) for t in texts])
        boxes = [t.get_window_extent() for t in texts]
        assert not any(a.overlaps(b) for a, b in combinations(boxes, 2))
        plt.close(fig)
    assert layouts[0] == layouts[1]
    assert len({pos for _, pos in layouts[0]}) == len(RMS)


@pytest.mark.parametrize("n", [1, 2])
def test_few_points_keep_the_default_place(tmp_path, n):
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots()
    pts = [(f"rm{i}", 0.2 + 0.6 * i, 0.3 + 0.4 * i) for i in range(n)]
    ax.scatter([p[1] for p in pts], [p[2] for p in pts])
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1)
    texts = figures.place_labels(ax, pts)
    # well separated points: every label right beside its point (first ring, no leader line)
    assert all(abs(t.xyann[0]) < 10 + t.get_window_extent().width for t in texts)
    assert len(ax.texts) == n
    plt.close(fig)
