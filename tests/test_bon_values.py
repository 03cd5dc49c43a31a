"""Best-of-N wiring by hand on tiny worlds (prbench.downstream.bon.curves): the random reference's
weights, the input checks and their messages, the failure counts per subset and the warnings that
report them, the table's seeds and bootstrap sizes, several sample sets combined, and the downstream
measure rows (values, area under the curve over log2 k, question order). Fast on purpose: these are
the tests `make mutate` runs against curves.py (perf/mutate.py)."""
import logging
import warnings

import numpy as np
import pandas as pd
import pytest
import test_bon

from prbench.downstream import bon
from prbench.io import write_jsonl
from prbench.seeding import stable_seed
from prbench.stats import bootstrap_ci

LOG = "prbench.downstream.bon"


def test_random_reference_and_argument_messages():
    np.testing.assert_array_equal(bon.random_weights("first_k", 4), [1.0, 0.0, 0.0, 0.0])
    np.testing.assert_array_equal(bon.random_weights("first_k_tieavg", 3), [1.0, 0.0, 0.0])
    np.testing.assert_array_equal(bon.random_weights("expected", 4), [0.25] * 4)
    # the random reference under the authors' estimators is sample 0: judge 1.0, beats 0.0, ties itself
    assert bon.cell("first_k_tieavg", bon.RANDOM, None, [1.0, 3.0, 0.0], 2) == (1.0, pytest.approx(0.5))
    for fn in (bon.first_k_weights, bon.first_k_tieavg_weights, bon.expected_weights):
        with pytest.raises(ValueError, match=r"^k=5 must be between 1 and the number of samples N=4$"):
            fn([1.0, 2.0, 3.0, 4.0], 5)
    with pytest.raises(ValueError, match=r"^unknown best-of-k estimator 'best' \(known: \('first_k', "):
        bon.selection_weights("best", [1.0, 2.0], 1)


def _rows(scores: dict, field="score"):
    return [{"question_id": q, "sample_idx": s, field: v} for q, vals in scores.items() for s, v in enumerate(vals)]


def test_matrix_skips_other_questions_and_names_bad_rows():
    rows = [{"question_id": "other", "sample_idx": 0, "score": 9.0}] + _rows({"q0": [1.0, None], "q1": [2.0, 3.0]})
    np.testing.assert_array_equal(bon.curves._matrix(rows, "score", ["q0", "q1"], 2, "f"), [[1.0, np.nan], [2.0, 3.0]])
    with pytest.raises(ValueError, match=r"^f: sample_idx 2 of question q1 outside 0\.\.1 \(bon.n=2\)$"):
        bon.curves._matrix(rows + [{"question_id": "q1", "sample_idx": 2, "score": 1.0}], "score", ["q0", "q1"], 2, "f")
    with pytest.raises(ValueError, match=r"^f: missing 1 \(question, sample\) rows, e.g. question q1 sample 0$"):
        bon.curves._matrix(rows[:3] + rows[4:], "score", ["q0", "q1"], 2, "f")


def _world():
    """3 questions (qa in subset A; qb, qc in B), 2 samples each, one RM `r`.
    Judge: qa s0 failed but scored 0.0 (judge.failure zero), qb s1 and qc s0 unparseable (None).
    RM: a row of a question not sampled (ignored), qa s1 a fallback score (failed), qb s0 NaN."""
    samples = [{"question_id": q, "subset": sub, "sample_idx": s, "answer": "x"}
               for q, sub in (("qa", "A"), ("qb", "B"), ("qc", "B")) for s in range(2)]
    judged = _rows({"qa": [0.0, 1.0], "qb": [1.0, None], "qc": [None, 0.5]})
    judged[0]["failed"] = True
    rm = [{"question_id": "qx", "sample_idx": 0, "score": 0.0, "failed": True}] + \
        _rows({"qa": [0.2, -1.0], "qb": [None, 0.3], "qc": [0.9, 0.1]})
    rm[2]["failed"] = True
    return samples, judged, {"r": rm}


def test_failure_counts_per_subset_and_their_warnings(caplog):
    caplog.set_level(logging.WARNING, logger=LOG)
    samples, judged, rms = _world()
    curves, table = bon.bon_curves(samples, judged, rms, [1, 2], 2, "pol", n_boot=0)
    t = table[(table.rm == "r") & (table.estimator == "expected") & (table.k == 1)].set_index("subset")
    assert list(t.index) == ["all", "A", "B"]
    assert t["judge_failed_samples"].tolist() == [3, 1, 2]  # qa s0 (failed, scored), qb s1, qc s0 (None)
    assert t["judge_nan_samples"].tolist() == [2, 0, 2]
    assert t["rm_failures"].tolist() == [2, 1, 1]  # qa's fallback, qb's NaN; qx is no question of the run
    assert (table["policy"] == "pol").all()
    # dropped cells: r at k=2 in qb (3 estimators), in qc at k=1 and 2 (first_k, tieavg) and k=2 (expected);
    # the oracle where its pick or the pool fails; the random reference (sample 0) in qc
    msgs = [r.getMessage() for r in caplog.records]
    assert msgs == [
        "policy pol: 3 of 6 samples' judgements failed to parse and were scored by the failure rule "
        "(judge.failure zero: 0.0); bon.csv judge_failed_samples",
        "policy pol: 2 of 6 samples (in 2 of 3 questions) have no judge score (unparseable); "
        "only the cells that need them are dropped",
        "RM r: 1 NaN scores (failures) ranked lowest",
        "RM r: 1 unparseable replies scored with the fallback value (reward.generative_failure_score)",
        "policy pol, r: 8 (question, estimator, k) cells dropped for an unjudged selected sample "
        "(bon.csv judge_dropped)",
        "policy pol, oracle: 4 (question, estimator, k) cells dropped for an unjudged selected sample "
        "(bon.csv judge_dropped)",
        "policy pol, random: 4 (question, estimator, k) cells dropped for an unjudged selected sample "
        "(bon.csv judge_dropped)"]
    assert all(isinstance(c.index, pd.RangeIndex) for c in curves.values())
    # every failed judgement unparseable (None): nothing scored by the failure rule, no such warning
    caplog.clear()
    del judged[0]["failed"]
    judged[0]["score"] = 0.5
    bon.bon_curves(samples, judged, {}, [1], 2, "pol", n_boot=0)
    assert not any("failed to parse" in r.getMessage() for r in caplog.records)


def test_bon_curves_argument_messages():
    samples, judged, rms = _world()
    with pytest.raises(ValueError, match="^bon: no samples$"):
        bon.bon_curves([], judged, rms, [1], 2, "pol")
    with pytest.raises(ValueError, match=r"^config key bon.ks: \[3\] outside 1..bon.n=2$"):
        bon.bon_curves(samples, judged, rms, [1, 3], 2, "pol")
    with pytest.raises(ValueError, match=r"^judged.jsonl: missing 1 "):
        bon.bon_curves(samples, judged[1:], rms, [1], 2, "pol")
    with pytest.raises(ValueError, match=r"^bon: every sample's judge score is NaN \(judge parse failures\); "
                                         r"nothing to evaluate$"):
        bon.bon_curves(samples, [dict(j, score=None) for j in judged], rms, [1], 2, "pol")


def _boot(values, n_boot, seed, policy, subset):
    values = np.asarray(values, dtype=float)
    values = values[~np.isnan(values)]
    s = stable_seed(seed, "bon", policy) if subset == "all" else stable_seed(seed, "bon", policy, subset)
    return bootstrap_ci(values, n_boot=n_boot, seed=s)


def test_table_intervals_use_the_given_seed_and_size():
    samples, judged, rms = _world()
    curves, table = bon.bon_curves(samples, judged, rms, [1, 2], 2, "pol", seed=3, n_boot=9)
    for (rm, est, k, subset), row in table.set_index(["rm", "estimator", "k", "subset"]).iterrows():
        cur = curves[{"oracle": "_oracle", "random": "_random"}.get(rm, rm)]
        cur = cur[(cur.estimator == est) & (cur.k == k) & ((cur.subset == subset) | (subset == "all"))]
        ok = cur["judge_score"].notna()
        assert (row["mean"], row["ci_low"], row["ci_high"]) == \
            pytest.approx(_boot(cur["judge_score"], 9, 3, "pol", subset), nan_ok=True)
        assert (row["win_rate"], row["win_ci_low"], row["win_ci_high"]) == \
            pytest.approx(_boot(cur["win_vs_random"][ok], 9, 3, "pol", subset), nan_ok=True)
    # defaults: seed 0, 1000 resamples
    _, default = bon.bon_curves(samples, judged, rms, [1], 2, "pol")
    _, explicit = bon.bon_curves(samples, judged, rms, [1], 2, "pol", seed=0, n_boot=1000)
    pd.testing.assert_frame_equal(default, explicit)
    assert default["ci_low"].notna().any()


def _write(tmp_path, name, world):
    samples, judged, rms = world
    d = tmp_path / name
    d.mkdir()
    write_jsonl(d / "samples.jsonl", samples)
    write_jsonl(d / "judged.jsonl", judged)
    for rm, rows in rms.items():
        write_jsonl(d / f"{rm}.jsonl", rows)
    return {"samples": d / "samples.jsonl", "judged": d / "judged.jsonl",
            "rm_scores": {rm: d / f"{rm}.jsonl" for rm in rms}, "curves_dir": d / "curves"}


def test_bon_table_passes_its_settings_and_logs_each_set(tmp_path, caplog):
    caplog.set_level(logging.INFO, logger=LOG)
    paths = _write(tmp_path, "s0", _world())
    got = bon.bon_table({"pol": paths, "other": paths}, tmp_path / "bon.csv", ks=[1, 2], n=2, seed=3, n_boot=9)
    _, want = bon.bon_curves(*_world(), [1, 2], 2, "pol", seed=3, n_boot=9)
    pd.testing.assert_frame_equal(got.iloc[:len(want)], want)
    assert isinstance(got.index, pd.RangeIndex) and (got["policy"].iloc[len(want):] == "other").all()
    assert "policy pol, sample set 0: 1 RMs, 3 questions, 2 samples without a judge score" in \
        [r.getMessage() for r in caplog.records]
    default = bon.bon_table({"pol": paths}, tmp_path / "d.csv", ks=[1], n=2)
    _, want = bon.bon_curves(*_world(), [1], 2, "pol", seed=0, n_boot=1000)
    pd.testing.assert_frame_equal(default, want)


def _second_set():
    """The same questions as _world with other scores; qc's sample 0 unjudged again (its first_k k=1
    cell is undefined in both sets), qb judged in full."""
    samples, judged, rms = _world()
    judged = _rows({"qa": [1.0, 0.0], "qb": [0.5, 1.0], "qc": [None, 1.0]})
    rms = {"r": _rows({"qa": [0.5, 0.1], "qb": [0.1, 0.7], "qc": [0.3, 0.2]})}
    return samples, judged, rms


def test_sample_sets_combined_per_question(tmp_path):
    s0, s1 = _write(tmp_path, "s0", _world()), _write(tmp_path, "s1", _second_set())
    both = bon.bon_table({"pol": [s0, s1]}, tmp_path / "two.csv", ks=[1, 2], n=2, seed=3, n_boot=9)
    sets = [bon.bon_curves(*w(), [1, 2], 2, "pol", seed=3, n_boot=9) for w in (_world, _second_set)]
    for _, row in both.iterrows():
        name = {"oracle": "_oracle", "random": "_random"}.get(row["rm"], row["rm"])
        per = []
        for curves, _ in sets:
            c = curves[name]
            c = c[(c.estimator == row["estimator"]) & (c.k == row["k"])]
            per.append(c[(c.subset == row["subset"]) | (row["subset"] == "all")].set_index("question_id"))
        js = pd.concat([p["judge_score"] for p in per], axis=1).mean(axis=1)  # mean over the defined sets
        wr = pd.concat([p["win_vs_random"] for p in per], axis=1).mean(axis=1)
        assert row["n_questions"] == js.notna().sum()
        assert (row["mean"], row["ci_low"], row["ci_high"]) == \
            pytest.approx(_boot(js, 9, 3, "pol", row["subset"]), nan_ok=True)
        assert (row["win_rate"], row["win_ci_low"], row["win_ci_high"]) == \
            pytest.approx(_boot(wr[js.notna()], 9, 3, "pol", row["subset"]), nan_ok=True)
        for col in ("rm_failures", "judge_dropped", "judge_nan_samples", "judge_failed_samples"):
            assert row[col] == sum(t[(t.rm == row["rm"]) & (t.estimator == row["estimator"]) & (t.k == row["k"])
                                     & (t.subset == row["subset"])][col].iloc[0] for _, t in sets), col
    r = both[(both.rm == "r") & (both.estimator == "first_k") & (both.k == 1)].set_index("subset")
    assert r.loc["B", "n_questions"] == 1 and r.loc["all", "n_questions"] == 2  # qc undefined in both sets
    samples, judged, rms = _second_set()
    s2 = _write(tmp_path, "s2", ([s for s in samples if s["question_id"] != "qc"],
                                 [j for j in judged if j["question_id"] != "qc"], rms))
    with pytest.raises(ValueError, match=r"^bon: policy pol: the sample sets' curves of r cover different "
                                         r"questions \(every set must sample the same evaluation questions\)$"):
        bon.bon_table({"pol": [s0, s2]}, tmp_path / "bad.csv", ks=[1], n=2)


def _curve_file(tmp_path, ks, rows):
    df = pd.DataFrame([{"question_id": q, "subset": sub, "estimator": est, "k": k, "judge_score": v,
                        "win_vs_random": v / 2} for q, sub, est, vals in rows for k, v in zip(ks, vals)])
    path = tmp_path / f"c{len(ks)}.csv"
    df.to_csv(path, index=False)
    return path


def test_curve_measures_values_auc_and_order(tmp_path):
    # question ids that read back as numbers, the file's question order not sorted, k from 2: the area
    # over log2 k = 1, 2, 4 by the trapezoid rule, divided by the range 3
    ks = [2, 4, 16]
    path = _curve_file(tmp_path, ks, [(20, "B", "first_k", [1.0, 0.0, 0.5]), (10, "A", "first_k", [0.0, 1.0, 1.0]),
                                      (20, "B", "expected", [0.5, 0.5, 0.5]), (10, "A", "expected", [1.0, 1.0, 0.0])])
    m = bon.curve_measures("pol", "r", path)
    assert (m["policy"] == "pol").all() and (m["rm"] == "r").all() and (m["method"] == "bon").all()
    assert (m["replicate"] == 0).all() and list(m["question_id"].unique()) == ["20", "10"]
    assert dict(zip(m["question_id"], m["subset"])) == {"20": "B", "10": "A"}
    auc = m[m.measure == "auc_judge_score"].set_index(["question_id", "estimator"])["value"]
    assert auc[("20", "first_k")] == pytest.approx(((1.0 + 0.0) / 2 * 1 + (0.0 + 0.5) / 2 * 2) / 3)
    assert auc[("10", "expected")] == pytest.approx(((1.0 + 1.0) / 2 * 1 + (1.0 + 0.0) / 2 * 2) / 3)
    win = m[m.measure == "auc_win_rate"].set_index(["question_id", "estimator"])["value"]
    assert win[("10", "first_k")] == pytest.approx(((0.0 + 0.5) / 2 + (0.5 + 0.5) / 2 * 2) / 3)
    assert m[m.measure == "auc_judge_score"]["k"].isna().all()
    js = m[(m.measure == "judge_score") & (m.estimator == "first_k")].set_index(["question_id", "k"])["value"]
    assert js[("20", 4)] == 0.0 and js[("10", 16)] == 1.0
    # one k: the area is the value itself; a k where every question is NaN stays
    one = bon.curve_measures("pol", "r", _curve_file(tmp_path, [4], [("q", "S", "expected", [0.25])]), replicate=2)
    assert one[one.measure == "auc_judge_score"]["value"].tolist() == [0.25] and (one["replicate"] == 2).all()
    two = bon.curve_measures("pol", "r", _curve_file(tmp_path, [1, 4], [("q", "S", "expected", [0.25, np.nan]),
                                                                      ("p", "S", "expected", [0.25, 0.75])]))
    assert len(two[(two.measure == "judge_score") & (two.k == 4)]) == 2  # k = 4 kept though NaN for q
    assert two[two.measure == "auc_judge_score"].set_index("question_id")["value"]["p"] == pytest.approx(0.5)
    nan_k = bon.curve_measures("pol", "r", _curve_file(tmp_path, [1, 4, 8],
                                                       [("q", "S", "expected", [0.25, np.nan, 0.5])]))
    assert nan_k[nan_k.measure == "judge_score"]["k"].tolist() == [1, 4, 8]  # a k NaN for every question stays
    (tmp_path / "short.csv").write_text("question_id,subset,estimator,k,judge_score\nq,S,expected,4,0.2\n")
    with pytest.raises(ValueError, match=r"short.csv: missing column\(s\) \['win_vs_random'\]$"):
        bon.curve_measures("pol", "r", tmp_path / "short.csv")
    (tmp_path / "empty.csv").write_text(",".join(bon.CURVE_COLUMNS) + "\n")
    with pytest.raises(ValueError, match="empty.csv: no rows$"):
        bon.curve_measures("pol", "r", tmp_path / "empty.csv")
    # the rule's table: the key names policy and RM, a key without a sample set is set 0
    out = bon.write_bon_measures({("pol", "r"): path, ("pol", "s", 1): path}, tmp_path / "m.csv")
    assert sorted(set(zip(out["policy"], out["rm"], out["replicate"]))) == [("pol", "r", 0), ("pol", "s", 1)]
    assert list(out.index) == list(range(len(out)))


def test_defaults_and_subset_seeds_on_a_larger_world(tmp_path):
    """Seed 0 and 1000 resamples by default (bon_curves, bon_table, combine_sample_sets); a subset row of
    combined sets resampled with its own seed. 12 questions: enough values that the seed moves the interval."""
    sets = [_big_world(seed) for seed in (0, 1)]
    ran = [bon.bon_curves(*w, [2], 4, "pol") for w in sets]
    for w, (_, table) in zip(sets, ran):
        pd.testing.assert_frame_equal(table, bon.bon_curves(*w, [2], 4, "pol", seed=0, n_boot=1000)[1])
    assert not table["ci_low"].equals(bon.bon_curves(*sets[1], [2], 4, "pol", seed=1, n_boot=1000)[1]["ci_low"])
    assert not table["ci_low"].equals(bon.bon_curves(*sets[1], [2], 4, "pol", seed=0, n_boot=1001)[1]["ci_low"])
    paths = _write(tmp_path, "big", sets[0])
    pd.testing.assert_frame_equal(bon.bon_table({"pol": paths}, tmp_path / "d.csv", ks=[2], n=4), ran[0][1])
    set_curves, set_tables = [c for c, _ in ran], [t for _, t in ran]
    pd.testing.assert_frame_equal(bon.curves.combine_sample_sets("pol", set_curves, set_tables),
                                  bon.curves.combine_sample_sets("pol", set_curves, set_tables, seed=0, n_boot=1000))
    both = bon.curves.combine_sample_sets("pol", set_curves, set_tables, seed=3, n_boot=50)
    row = both[(both.rm == "good") & (both.estimator == "expected") & (both.subset == "S1")].iloc[0]
    per = [c["good"][(c["good"].estimator == "expected") & (c["good"].subset == "S1")].set_index("question_id")
           for c in set_curves]
    js = pd.concat([p["judge_score"] for p in per], axis=1).mean(axis=1)
    assert (row["mean"], row["ci_low"], row["ci_high"]) == pytest.approx(_boot(js, 50, 3, "pol", "S1"))


def _big_world(seed):
    samples, judged, rms = test_bon._world(n_q=12, n=4, seed=seed)
    return samples, judged, {"good": rms["good"]}


def test_question_curves_equal_each_cell_from_its_definition():
    """question_curves computes a question's judged pool and beat rates once for all its cells: every
    cell equals the cell from the definitions (the selection weights times the judged scores, and
    win_vs_random over the judged samples), NaN judge scores, RM-score ties and NaN RM scores included."""
    rng = np.random.default_rng(5)
    Q, n, ks = 12, 6, (1, 2, 4, 6)
    G = rng.integers(0, 3, (Q, n)).astype(float)
    G[rng.random((Q, n)) < 0.15] = np.nan
    G[0] = np.nan  # a question without a judged sample: every cell excluded, and no warning
    R = rng.integers(0, 4, (Q, n)).astype(float)
    R[rng.random((Q, n)) < 0.1] = np.nan
    for mode in (bon.RANDOM, bon.ORACLE, "rm"):
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            curves = bon.question_curves(R, G, ks, mode)
        assert all(np.isnan(js[0]) and np.isnan(wr[0]) for js, wr in curves.values())
        for (est, k), (js, wr) in curves.items():
            for q in range(Q):
                g = G[q]
                judged = ~np.isnan(g)
                if est == "expected":
                    pool = g[judged]
                    if mode == bon.RANDOM:
                        w = np.full(len(pool), 1 / len(pool)) if len(pool) else None
                    else:
                        w = bon.expected_weights(pool if mode == bon.ORACLE else R[q][judged], k) \
                            if len(pool) >= k else None
                    want = (np.nan, np.nan) if w is None else (w @ pool, bon.win_vs_random(w, pool))
                else:
                    w = bon.random_weights(est, n) if mode == bon.RANDOM else bon.selection_weights(
                        est, g if mode == bon.ORACLE else R[q], k)
                    want = (np.nan, np.nan) if (~judged[w > 0]).any() else (
                        w @ np.where(judged, g, 0.0), bon.win_vs_random(w[judged], g[judged]))
                np.testing.assert_equal((js[q], wr[q]), want, err_msg=f"{mode} {est} k={k} q={q}")
