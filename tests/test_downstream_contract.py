"""The downstream contract (prbench.downstream): a method registered here and writing its measure
table reaches the correlation table, the summary, the figures and the analysis rules' inputs with
no edit to the analysis modules. The toy method is registered by the tests only."""
import numpy as np
import pandas as pd
import pytest
from helpers import REPO, dry_run, snakemake_env
from synthetic_analysis import write_world

from prbench import downstream
from prbench.analysis import figures
from prbench.analysis.correlation import run_correlations

TOY = downstream.Method("toy", "Toy", 50, enabled=lambda cfg: True, unscored="toy answers")


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    return write_world(tmp_path_factory.mktemp("toyworld"), pairs_per_subset=12, eval_per_subset=6,
                       general_pairs=24)


@pytest.fixture
def toy():
    downstream.register(TOY)
    yield TOY
    downstream.unregister("toy")


def _toy_table(world, path, nan_rows=0):
    """Per-question toy measure: the RM's latent personalization skill + question noise."""
    rng = np.random.default_rng(1)
    qs = pd.read_csv(world["downstream"][0][1], dtype={"question_id": str})[["question_id", "subset"]]
    qs = qs.drop_duplicates("question_id")
    rows = []
    for rm, skill in zip(world["rms"], world["pers_skill"]):
        for i, (q, s) in enumerate(zip(qs["question_id"], qs["subset"])):
            v = float(skill + rng.normal(0, 0.05)) if i >= nan_rows else float("nan")
            rows.append({"policy": "demo_policy", "rm": rm, "method": "toy", "estimator": "", "measure": "judge_score",
                         "k": None, "question_id": q, "subset": s, "value": v})
    downstream.write_measures(path, rows)
    return str(path)


def _run(world, tables, out):
    return run_correlations(world["rms"], world["pair_files"], tables, out / "c.csv", out / "s.md", out / "i.csv",
                            n_boot=40, n_perm=40, rbo_p=0.9, ci=0.95, seed=0,
                            runs=[("demo_policy", r) for r in world["rms"]])


def test_registered_toy_method_reaches_tables_summary_and_figures(world, tmp_path, toy):
    tables = world["downstream"] + [("toy", _toy_table(world, tmp_path / "toy.csv", nan_rows=2))]
    res = _run(world, tables, tmp_path)
    t = pd.read_csv(tmp_path / "c.csv", keep_default_na=False, na_values={"k": [""], "value": ["nan"]})
    assert list(dict.fromkeys(t["downstream"])) == ["bon", "ppo", "toy"]  # registry order
    toy_rows = t[(t.downstream == "toy") & (t.benchmark == "personalized") & (t.level == "overall")]
    rho = toy_rows.set_index("coefficient").loc["spearman", "value"]
    assert rho > 0.9  # the toy measure follows the personalization skill
    summary = (tmp_path / "s.md").read_text()
    assert "| Toy judge_score | 7 | personalized |" in summary
    assert "Toy demo_policy/pers_profile: 2 toy answers without a judge score (skipped)" in summary
    inputs = pd.read_csv(tmp_path / "i.csv")
    assert set(inputs.loc[inputs.downstream == "toy", "rm"]) == set(world["rms"])
    # figures: one signal per method found in the data, in registry order
    corr = pd.read_csv(tmp_path / "c.csv")
    corr["estimator"] = corr["estimator"].fillna("")
    labels = [s[0] for s in figures._signals(corr, {"bon": {"estimator": "expected", "k": 16}})]
    assert labels == ["BoN (expected, k=16) demo_policy", "PPO demo_policy", "Toy demo_policy"]
    figures.plot_scatter(tmp_path / "i.csv", tmp_path / "c.csv", tmp_path / "s.png", tmp_path / "s.pdf",
                         signals={"bon": {"estimator": "expected", "k": 16}})
    figures.plot_correlations(tmp_path / "c.csv", tmp_path / "f.png", tmp_path / "f.pdf")
    assert (tmp_path / "s.png").stat().st_size > 0 and (tmp_path / "f.pdf").stat().st_size > 0
    assert set(res.table.loc[res.table.downstream == "toy", "benchmark"]) == {"personalized", "general"}
    assert downstream.enabled({"bon": {}, "ppo": {"enabled": False}}) == ["bon", "toy"]


def test_unregistered_method_is_read_from_the_data(world, tmp_path):
    """A measure table of a method nobody registered still appears (labelled by its name, last)."""
    tables = world["downstream"][:1] + [("toy", _toy_table(world, tmp_path / "toy.csv"))]
    res = _run(world, tables, tmp_path)
    assert list(dict.fromkeys(res.table["downstream"])) == ["bon", "toy"]
    assert "| toy judge_score | 7 |" in res.summary


def test_measure_table_round_trips_exactly(tmp_path):
    vals = [0.1, 1 / 3, 2.0 ** -40, 1.2345678901234567, float("nan")]
    rows = [{"policy": "p", "rm": "r", "method": "m", "estimator": "", "measure": "judge_score", "k": k,
             "question_id": f"00{i}", "subset": "S", "value": v} for i, (v, k) in enumerate(zip(vals, [1, None] * 3))]
    downstream.write_measures(tmp_path / "m.csv", rows)
    got = downstream.read_measures(tmp_path / "m.csv", "m")
    np.testing.assert_array_equal(got["value"].to_numpy(), np.array(vals))  # bit for bit, NaN kept
    assert got["question_id"].tolist() == [f"00{i}" for i in range(5)]  # ids stay strings
    assert got["k"].tolist()[:2] == [1, pd.NA] and got["estimator"].tolist() == [""] * 5


def test_bad_measure_tables_name_file_and_column(tmp_path):
    p = tmp_path / "bad.csv"
    pd.DataFrame({"policy": ["p"], "rm": ["r"], "method": ["m"], "estimator": [""], "measure": ["judge_score"],
                  "k": [""], "replicate": [0], "question_id": ["q"], "subset": ["S"],
                  "value": ["oops"]}).to_csv(p, index=False)
    with pytest.raises(ValueError, match=r"bad\.csv: columns 'value' / 'k' must be numeric"):
        downstream.read_measures(p)
    with pytest.raises(ValueError, match=r"bad\.csv: column 'method' holds \['m'\], expected only 'other'"):
        downstream.read_measures(p, "other")
    pd.read_csv(p).drop(columns=["question_id"]).to_csv(p, index=False)
    with pytest.raises(ValueError, match=r"bad\.csv: downstream measure table lacks column\(s\) \['question_id'\]"):
        downstream.read_measures(p)
    with pytest.raises(ValueError, match="use lower-case"):
        downstream.register(downstream.Method("Bad Name", "x", 0, enabled=lambda c: True))
    with pytest.raises(ValueError, match="no downstream measures"):
        downstream.write_measures(tmp_path / "e.csv", [])


@pytest.mark.dag
def test_analysis_rules_take_a_registered_method_from_the_registry(tmp_path, world):
    """DAG level: a Snakefile that registers the toy method (this module, imported from tests/) and
    includes one toy stage rule; the unchanged analysis rules then ask for results/downstream/toy.csv
    and run the toy stage."""
    import yaml
    from synthetic_analysis import demo_config_for_world

    cfg = demo_config_for_world(yaml.safe_load((REPO / "configs" / "demo.yaml").read_text()))
    cfg["ppo"]["enabled"] = False
    cfg["grpo"]["enabled"] = False
    cfgfile = tmp_path / "cfg.yaml"
    cfgfile.write_text(yaml.safe_dump(cfg))
    (tmp_path / "Snakefile").write_text(
        "from prbench import downstream\nfrom test_downstream_contract import TOY\ndownstream.register(TOY)\n"
        f'report: "{REPO}/report/workflow.rst"\n'
        f'include: "{REPO}/rules/common.smk"\n'
        'rule toy_measures:\n    output: "results/downstream/toy.csv"\n    shell: "touch {output}"\n'
        f'include: "{REPO}/rules/analysis.smk"\n'
        "rule all:\n    input: ALL_TARGETS\n    default_target: True\n")
    out = dry_run(snakefile=tmp_path / "Snakefile", configfile=cfgfile, workdir=world["root"],
                  env=snakemake_env(REPO / "tests", OMP_NUM_THREADS="1")).out
    assert "rule toy_measures" in out and "rule correlations" in out
    assert "results/downstream/toy.csv" in out
