"""Every coefficient in correlations.csv recomputed from
correlation_inputs.csv with scipy, sklearn and an independent RBO gives the same value, ties
included; constant inputs give NaN. Runs the real stage (run_correlations) on synthetic files
whose BoN first_k k=1 values are equal across RMs (every RM picks sample 0) and where two RMs
tie at k=2 up to floating-point noise."""
import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats

sklearn_metrics = pytest.importorskip("sklearn.metrics")

from synthetic_analysis import measure_tables, write_world  # noqa: E402

from prbench.analysis.correlation import run_correlations  # noqa: E402


def _rbo_independent(x, y, p):
    """RBO_ext of two complete rankings of the same items by decreasing score, ties as in Webber et
    al. Sec. 4.3: a tie group enters the prefix at its first rank."""
    n = len(x)

    def prefix(v, d):  # items whose tie group starts within the first d ranks
        return {i for i in range(n) if sum(1 for u in v if u > v[i]) < d}

    total = 0.0
    for d in range(1, n + 1):
        a, b = prefix(x, d), prefix(y, d)
        total += 2 * len(a & b) / (len(a) + len(b)) * p**d
    return (1 - p) / p * total + p**n


def _ndcg_sklearn(x, y):
    gain = np.asarray(y) - np.min(y)
    return float(sklearn_metrics.ndcg_score(gain[None], np.asarray(x)[None], ignore_ties=False))


@pytest.fixture(scope="module")
def outputs(tmp_path_factory):
    root = tmp_path_factory.mktemp("recompute")
    w = write_world(root, pairs_per_subset=12, eval_per_subset=6, general_pairs=24, ppo=False)
    for i, (_, _rm, path) in enumerate(w["bon_files"]):
        df = pd.read_csv(path)
        fk = df.estimator == "first_k"
        k1 = fk & (df.k == 1)
        df.loc[k1, "judge_score"] = df.loc[k1, "question_id"].map(lambda q: 0.1 * (hash(q) % 7) + 0.3)
        df.loc[k1, "win_vs_random"] = 0.5
        if i in (0, 1):  # two RMs tie at k=2, up to summation noise
            k2 = fk & (df.k == 2)
            df.loc[k2, "judge_score"] = 1.1 + (1e-15 if i == 1 else 0.0)
        df.to_csv(path, index=False)
    real = {"chat-sub": ["alpacaeval-easy", "mt-bench-med"], "chat_hard-sub": ["llmbar-natural"],
            "safety-sub": ["donotanswer", "xstest-should-respond"], "reasoning-sub": ["math-prm", "hep-go"]}
    for _, bench, path in w["pair_files"]:  # RewardBench's real subset names: the official score applies
        if bench == "general":
            rows = [json.loads(ln) for ln in Path(path).read_text().splitlines()]
            seen = {}
            for r in rows:
                names = real[r["subset"]]
                j = seen[r["subset"]] = seen.get(r["subset"], -1) + 1
                r["subset"] = names[j % len(names)]
            Path(path).write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = root / "out"
    run_correlations(w["rms"], w["pair_files"], measure_tables(root, w["bon_files"]), out / "correlations.csv",
                     out / "summary.md", out / "inputs.csv", n_boot=30, n_perm=100, rbo_p=0.9, ci=0.95, seed=0,
                     bench_kinds={"general": "rewardbench"})
    return (pd.read_csv(out / "correlations.csv"), pd.read_csv(out / "inputs.csv"),
            (out / "summary.md").read_text(), w["rms"])


KEYB = ["benchmark", "level", "group"]
KEYD = ["policy", "downstream", "estimator", "measure", "k"]


def _vectors(inputs, rms, row):
    b = inputs[(inputs.kind == "benchmark")]
    for c in KEYB:
        b = b[b[c] == row[c]]
    d = inputs[inputs.kind == "downstream"]
    for c in KEYD:
        d = d[(d[c] == row[c])] if not pd.isna(row[c]) else d[d[c].isna()]
    x = b.set_index("rm").loc[rms, "value"].to_numpy(float)
    y = d.set_index("rm").loc[rms, "value"].to_numpy(float)
    return x, y


REFS = {
    "spearman": lambda x, y: stats.spearmanr(x, y).statistic,
    "kendall_tau_b": lambda x, y: stats.kendalltau(x, y).statistic,
    "weighted_tau": lambda x, y: stats.weightedtau(x, y).statistic,
    "ndcg": _ndcg_sklearn,
    "rbo": lambda x, y: _rbo_independent(x, y, 0.9),
}


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
@pytest.mark.filterwarnings("ignore:An input array is constant")
def test_every_coefficient_recomputes_from_the_inputs(outputs):
    table, inputs, _, rms = outputs
    checked = nan_checked = tied = 0
    for _, row in table.iterrows():
        x, y = _vectors(inputs, rms, row)
        constant = np.all(x == x[0]) or np.all(y == y[0])
        if constant:
            assert math.isnan(row["value"]), (row.to_dict(), x, y)
            nan_checked += 1
            continue
        expected = REFS[row["coefficient"]](x, y)
        assert row["value"] == pytest.approx(expected, abs=1e-9), (row.to_dict(), x, y)
        tied += len(set(y)) < len(y) or len(set(x)) < len(x)
        checked += 1
    assert checked > 500 and nan_checked > 0 and tied > 0


def test_noise_level_differences_are_ties(outputs):
    table, inputs, _, rms = outputs
    d = inputs[(inputs.kind == "downstream") & (inputs.estimator == "first_k") & (inputs.k == 2)
               & (inputs.measure == "judge_score")].set_index("rm")["value"]
    assert d[rms[0]] == d[rms[1]]  # 1.1 and 1.1 + 1e-15 are one value


def test_summary_names_no_best_for_constant_measures_and_explains_its_statistics(outputs):
    table, _, summary, _ = outputs
    k1 = table[(table.estimator == "first_k") & (table.k == 1) & (table.measure == "judge_score")]
    assert k1["value"].isna().all()
    line = [ln for ln in summary.splitlines() if ln.startswith("| BoN first_k judge_score k=1 |")]
    assert line and all("none: undefined" in ln and "downstream measure is equal across the 7 RMs" in ln
                        for ln in line)
    assert "question sampling only" in summary and "beyond chance" in summary


def test_official_score_is_the_baselines_headline(outputs):
    table, inputs, summary, rms = outputs
    off = inputs[(inputs.kind == "benchmark") & (inputs.level == "official")]
    assert set(off["benchmark"]) == {"general"} and len(off) == len(rms)
    assert off["value"].notna().all()
    pooled = inputs[(inputs.kind == "benchmark") & (inputs.benchmark == "general") & (inputs.level == "overall")]
    assert not np.allclose(off["value"].to_numpy(), pooled["value"].to_numpy())
    o = table[(table.level == "official") & (table.coefficient == "spearman")]
    assert len(o) > 0 and (o["ci_low"].notna() | o["value"].isna()).all()
