"""Figures: every plot writes a PNG and a PDF from inputs in the other stages' file formats."""
from pathlib import Path

import pandas as pd
import pytest
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


def test_bon_curves_figure(world, tmp_path):
    figures.plot_bon_curves(world["tables"] / "bon.csv", tmp_path / "b.png", tmp_path / "b.pdf", rms=world["rms"])
    _check(tmp_path / "b.png", tmp_path / "b.pdf")


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
