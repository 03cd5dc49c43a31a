"""RewardBench 2 (issue 46): the adapter keeps best-of-n items whole, the item rules (the tie rule,
Ties), pairwise judges by round robin, the stand-ins, and the official score of saved scores
against an independent implementation of reward-bench's v2 rules written here (and against
reward-bench's own functions where the package is importable offline)."""
import json
import random
from pathlib import Path

import numpy as np
import pytest
from helpers import REPO
from run_values import rewardbench2_official

from prbench.data.checks import DataError, DropLog
from prbench.data.demo_bestof import rewardbench2_split
from prbench.data.rewardbench2 import load_pairs as load_rb2
from prbench.io import read_json, read_jsonl, write_jsonl
from prbench.replica.data import rewardbench2_rows
from prbench.rms.base import CompareOutput, ScoreOutput
from prbench.scoring import bestof
from prbench.scoring.benchmark import accuracy_table, load_pairs, score_benchmark
from prbench.scoring.official import official_stats


def _rows(rows):
    return [("mem", i + 1, r) for i, r in enumerate(rows)]


def _load(rows, name="rewardbench2"):
    drops = DropLog(name)
    return load_rb2("mem", "test", name, drops, rows=_rows(rows)), drops


def _hub(ident, subset, chosen, rejected, prompt="Q?"):
    return {"id": ident, "prompt": prompt, "chosen": chosen, "rejected": rejected, "num_correct": len(chosen),
            "num_incorrect": len(rejected), "total_completions": len(chosen) + len(rejected), "subset": subset,
            "models": ["m"] * (len(chosen) + len(rejected))}


# ---- adapter -------------------------------------------------------------------------------
def test_adapter_keeps_each_item_whole():
    items, drops = _load([_hub("7", "Math", ["a"], ["b", "c", "d"]),
                          _hub("ref:3", "Ties", ["x"], ["y", "z"]),
                          _hub("tied:3", "Ties", ["x", "x2"], ["y", "z", "w"])])
    assert len(items) == 3 and drops.kept == 3
    assert items[0]["chosen"] == ["a"] and items[0]["rejected"] == ["b", "c", "d"]
    assert items[0]["rule"] == "best_of_n" and items[0]["question_id"] == "7" and items[0]["section"] == "Math"
    assert [i["rule"] for i in items[1:]] == ["ties", "ties"]
    assert [i["ties_type"] for i in items[1:]] == ["ref", "tied"]
    assert {i["question_id"] for i in items[1:]} == {"Ties:3"}  # ref and tied of a prompt: one bootstrap unit


@pytest.mark.parametrize("row, msg", [
    ({**_hub("1", "Math", ["a"], ["b"]), "num_correct": 2}, "num_correct"),
    ({**_hub("1", "Math", ["a"], ["b"]), "total_completions": 5}, "total_completions"),
    (_hub("5", "Ties", ["a"], ["b"]), "ref:<n>"),
    (_hub("tied:5", "Ties", ["a"], ["b"]), "at least two correct"),
    (_hub("1", "Math", [], ["b"]), "at least one"),
    (_hub("1", "Math", ["a", 3], ["b"]), "chosen[1]"),
])
def test_adapter_refuses_bad_rows(row, msg):
    with pytest.raises(DataError, match=msg.replace("[", r"\[").replace("]", r"\]")):
        _load([row])


def test_adapter_drops_blank_items_counted():
    items, drops = _load([_hub("1", "Math", ["a"], ["b", " "]), _hub("2", "Math", ["a"], ["b"], prompt=""),
                          _hub("3", "Focus", ["a"], ["b"])])
    assert [i["pair_id"] for i in items] == ["3"]
    assert drops.dropped == {"empty_answer": 1, "empty_question": 1}


# ---- item rules ----------------------------------------------------------------------------
@pytest.mark.parametrize("scores, credit, correct, tie", [
    ([2.0, 1.0, 1.0, 0.5], 1.0, True, False),
    ([1.0, 2.0, 0.0, 0.0], 0.0, False, False),
    ([2.0, 2.0, 0.0, 0.0], 0.5, False, True),       # reward-bench's tie rule: a top shared by k credits 1/k
    ([2.0, 2.0, 2.0, 1.0], 1 / 3, False, True),
    ([2.0, 2.0, 2.0, 2.0], 0.25, False, True),
    ([1.0, 2.0, 2.0, 0.0], 0.0, False, False),      # below a shared top: nothing
])
def test_best_of_n_rule(scores, credit, correct, tie):
    r = bestof.item_result(scores, 1, "best_of_n")
    assert r["credit"] == pytest.approx(credit) and r["correct"] is correct and r["tie"] is tie
    assert r["score_chosen"] == scores[0] and r["score_rejected"] == max(scores[1:])


def test_failures_score_nothing():
    r = bestof.item_result([1.0, float("nan"), 0.0, 0.0], 1, "best_of_n")
    assert r["failure"] and r["credit"] == 0.0 and r["pref"] is None and r["scores"][1] is None
    t = bestof.item_result([3.0, float("nan"), 0.0], 2, "ties")
    assert t["failure"] and t["credit"] == 0.0 and t["gap"] is None


def test_ties_rule():
    r = bestof.item_result([3.0, 2.0, 1.0, 2.0], 2, "ties")  # worst correct 2 vs best incorrect 2: a tie, wrong
    assert r["credit"] == 0.0 and r["tie"] and r["gap"] == 0.0 and r["spread"] == 1.0
    r = bestof.item_result([3.0, 2.5, 1.0, 2.0], 2, "ties")
    assert r["credit"] == 1.0 and r["gap"] == 0.5 and r["spread"] == 0.5
    assert bestof.item_result([3.0, 1.0], 1, "ties")["spread"] is None


def test_win_rates():
    # answers 0..3, answer 0 beats everyone, 1 beats 2 and 3, 2 and 3 tie
    prefs = {(0, 1): 1.0, (0, 2): 1.0, (0, 3): 1.0, (1, 2): 1.0, (1, 3): 1.0, (2, 3): 0.5}
    w = bestof.win_rates(4, [prefs[p] for p in bestof.round_robin(4)])
    assert w == pytest.approx([1.0, 2 / 3, 0.5 / 3, 0.5 / 3])


# ---- scoring an item benchmark with fake RMs ----------------------------------------------
class _Pointwise:
    name, use_profile, pairwise = "fake", False, False

    def __init__(self, fn):
        self.fn = fn

    def score(self, reqs):
        return ScoreOutput(np.asarray([self.fn(r.question, r.answer) for r in reqs], dtype=float))

    def diagnostics(self):
        return {"kind": "fake"}


class _Pairwise:
    name, use_profile, pairwise = "judge", False, True

    def compare(self, pairs, groups=None):
        self.groups = list(groups)
        # prefers the longer answer (ties: 0.5); one pair unparseable under a predict_a-like rule
        prefs = [1.0 if len(p.chosen) > len(p.rejected) else (0.0 if len(p.chosen) < len(p.rejected) else 0.5)
                 for p in pairs]
        return CompareOutput(np.asarray(prefs), details=[{"failed": [i == 0]} for i in range(len(pairs))])

    def diagnostics(self):
        return {"kind": "generative_pairwise"}


def _bench(tmp_path, rows):
    items, _ = _load(rows)
    path = tmp_path / "bench.jsonl"
    write_jsonl(path, items)
    return path


def test_pairwise_judge_by_round_robin(tmp_path):
    bench = _bench(tmp_path, [_hub("1", "Focus", ["longest one"], ["a", "bb", "ccc"]),
                              _hub("2", "Focus", ["x"], ["longer", "yy", "zz"])])
    rm = _Pairwise()
    s = score_benchmark(bench, {"name": "judge"}, tmp_path / "p.jsonl", tmp_path / "a.json", "rewardbench2",
                        scoring={"bootstrap": 0}, rm=rm, bench_kind="rewardbench2")
    res = read_jsonl(tmp_path / "p.jsonl")
    assert len(rm.groups) == 12 and set(rm.groups) == {"Focus"}  # 6 comparisons per 4-answer item
    assert res[0]["scores"] == pytest.approx([1.0, 0.0, 1 / 3, 2 / 3]) and res[0]["credit"] == 1.0
    assert res[1]["credit"] == 0.0
    assert res[0]["failure"] and res[0]["judge_failures"] == 1 and not res[1]["failure"]
    assert s["scoring"]["comparisons"] == 12


def test_load_pairs_refuses_mixed_files(tmp_path):
    items, _ = _load([_hub("1", "Math", ["a"], ["b"])])
    pair = {k: items[0][k] for k in ("pair_id", "subset", "section", "question_id", "question", "profile")}
    write_jsonl(tmp_path / "b.jsonl", [items[0], {**pair, "pair_id": "2", "chosen": "a", "rejected": "b"}])
    with pytest.raises(ValueError, match="mixed"):
        load_pairs(tmp_path / "b.jsonl")


# ---- the official score against an independent implementation of reward-bench's v2 rules --------
# (tests/run_values.py: rewardbench2_official, shared with the DAG runs' checks)


def _coarse_rm(seed):
    """Scores rounded to one decimal: many shared tops, exercising the tie rule and Ties' zero spreads."""
    def fn(question, answer):
        rng = random.Random(f"{seed}/{question}/{answer}")
        return round(rng.random(), 1)
    return _Pointwise(fn)


@pytest.mark.parametrize("world, seed", [("demo", 0), ("demo", 1), ("replica", 0)])
def test_official_score_equals_an_independent_v2_computation(tmp_path, world, seed):
    rows = rewardbench2_split("test", 6, 0) if world == "demo" else rewardbench2_rows(2, 0)
    bench = _bench(tmp_path, rows)
    score_benchmark(bench, {"name": "coarse"}, tmp_path / "p.jsonl", tmp_path / "a.json", "rewardbench2",
                    scoring={"bootstrap": 20}, rm=_coarse_rm(seed), bench_kind="rewardbench2")
    saved = read_jsonl(tmp_path / "p.jsonl")
    assert any(r["tie"] for r in saved)  # the tie rule is exercised
    subsets, overall = rewardbench2_official(saved)
    official = read_json(tmp_path / "a.json")["official"]
    assert set(subsets) == {"Factuality", "Precise IF", "Math", "Safety", "Focus", "Ties"}
    for s, v in subsets.items():
        assert official[s]["accuracy"] == pytest.approx(v, abs=1e-9), s
    assert official["overall"]["accuracy"] == pytest.approx(overall, abs=1e-9)
    # the accuracy table recomputes it from the saved pairs; the correlation stage reads it the same way
    df = accuracy_table([tmp_path / "a.json"], tmp_path / "acc.csv", pairs_paths=[tmp_path / "p.jsonl"], n_boot=20)
    row = df[(df["level"] == "official") & (df["group"] == "all")]
    assert float(row["accuracy"].iloc[0]) == pytest.approx(overall, abs=1e-9)
    from prbench.analysis.inputs import collect
    col = collect(["coarse"], [("coarse", "rewardbench2", str(tmp_path / "p.jsonl"))],
                  bench_kinds={"rewardbench2": "rewardbench2"})
    off = [s for s in col.benchmarks if s.key.get("level") == "official"][0]
    n_units = len(col.units["baseline:rewardbench2"])
    assert float(off.evaluate(np.ones((1, n_units)))[0, 0]) == pytest.approx(overall, abs=1e-9)


def test_official_bootstrap_brackets_the_value(tmp_path):
    bench = _bench(tmp_path, rewardbench2_split("test", 6, 0))
    score_benchmark(bench, {"name": "coarse"}, tmp_path / "p.jsonl", tmp_path / "a.json", "rewardbench2",
                    scoring={"bootstrap": 200}, rm=_coarse_rm(3), bench_kind="rewardbench2")
    st = official_stats("rewardbench2", read_jsonl(tmp_path / "p.jsonl"), n_boot=200, seed=0)
    assert st["overall"]["ci_low"] <= st["overall"]["accuracy"] <= st["overall"]["ci_high"]
    assert st["overall"]["n"] == 42 and st["Ties"]["n"] == 12 and st["Math"]["n"] == 6


def test_ties_needs_paired_prompts():
    rows = [{"pair_id": "tied:1", "question_id": "Ties:1", "subset": "Ties", "credit": 1.0, "scores": [2, 2, 1],
             "num_correct": 2, "ties_type": "tied"}]
    with pytest.raises(ValueError, match="both a ref and a tied"):
        official_stats("rewardbench2", rows, n_boot=0, seed=0)


def test_reward_bench_own_functions_agree(tmp_path):
    """reward-bench's process_single_model and reroll_and_score_dataset on the same saved scores
    (skipped where the package, with its `datasets` dependency, is not importable offline)."""
    utils = pytest.importorskip("rewardbench.utils")
    datasets = pytest.importorskip("datasets")
    bench = _bench(tmp_path, rewardbench2_split("test", 6, 0))
    score_benchmark(bench, {"name": "coarse"}, tmp_path / "p.jsonl", tmp_path / "a.json", "rewardbench2",
                    scoring={"bootstrap": 0}, rm=_coarse_rm(0), bench_kind="rewardbench2")
    saved = read_jsonl(tmp_path / "p.jsonl")
    official = read_json(tmp_path / "a.json")["official"]
    ties = [r for r in saved if r["subset"] == "Ties"]
    ds = datasets.Dataset.from_list([{"id": r["pair_id"], "scores": r["scores"], "num_correct": r["num_correct"],
                                      "subset": "Ties"} for r in ties])
    _, score = utils.process_single_model(ds)
    assert official["Ties"]["accuracy"] == pytest.approx(score, abs=1e-9)
    rest = [r for r in saved if r["subset"] != "Ties"]
    flat = datasets.Dataset.from_list([{"text": str(i), "scores": s, "subset": r["subset"], "id": r["pair_id"]}
                                       for r in rest for i, s in enumerate(r["scores"])])
    rolled = utils.reroll_and_score_dataset(flat, [len(r["scores"]) for r in rest])
    for subset in {r["subset"] for r in rest}:
        res = [x for x, s in zip(rolled["results"], rolled["subset"]) if s == subset]
        assert official[subset]["accuracy"] == pytest.approx(sum(res) / len(res), abs=1e-9)


# ---- stand-ins -------------------------------------------------------------------------------
@pytest.mark.parametrize("rows", [rewardbench2_split("test", 6, 0), rewardbench2_rows(2, 0)],
                         ids=["demo", "replica"])
def test_stand_ins_in_the_hub_schema(rows):
    items, drops = _load(rows)
    assert drops.kept == len(rows) and not drops.dropped
    subsets = {i["subset"] for i in items}
    assert subsets == {"Factuality", "Precise IF", "Math", "Safety", "Focus", "Ties"}
    for i in items:
        n = len(i["chosen"]) + len(i["rejected"])
        assert n >= 4 if i["rule"] == "best_of_n" else n >= 3
        if i["rule"] == "best_of_n":
            assert len(i["chosen"]) == 1 and len(i["rejected"]) == 3  # best-of-4
    ties = [i for i in items if i["rule"] == "ties"]
    assert {i["question_id"] for i in ties if i["ties_type"] == "ref"} == \
        {i["question_id"] for i in ties if i["ties_type"] == "tied"}
    assert len(items) <= 60  # a few dozen items: the demo's time bar


def test_demo_stand_in_is_seeded():
    assert rewardbench2_split("test", 6, 0) == rewardbench2_split("test", 6, 0)
    assert rewardbench2_split("test", 6, 0) != rewardbench2_split("test", 6, 1)


# ---- everywhere the other baselines are -------------------------------------------------------
def test_configs_name_rewardbench2_and_validate():
    from prbench.scoring.one_rm import benchmarks
    from prbench.validation import load_config

    for path, source in (("config.yaml", "allenai/reward-bench-2"),
                         ("configs/replica.yaml", "results/replica/data/rewardbench2")):
        cfg = load_config(str(REPO / path))
        b = cfg["data"]["baselines"]["rewardbench2"]
        assert (b["kind"], b["source"], b["split"], b["train_split"]) == ("rewardbench2", source, "test", None)
        assert "rewardbench2" in benchmarks(cfg)  # make score (prbench.scoring.one_rm) scores it too
        assert cfg["correlation"]["confirmatory"] is None  # the default family: every baseline per method


def test_leaderboard_shows_the_official_score(tmp_path):
    from prbench.scoring.leaderboard import benchmark_board

    pairs = [{"pair_id": f"p{i}", "benchmark": "personalized", "subset": "S", "section": "S", "question_id": f"q{i}",
              "question": "Q?", "profile": [], "chosen": "a" * (i + 2), "rejected": "b" * 3} for i in range(4)]
    write_jsonl(tmp_path / "pers.jsonl", pairs)
    rm = _coarse_rm(5)
    for bench, path, kind in (("personalized", tmp_path / "pers.jsonl", None),
                              ("rewardbench2", _bench(tmp_path, rewardbench2_split("test", 2, 0)), "rewardbench2")):
        score_benchmark(path, {"name": "coarse"}, tmp_path / f"{bench}.p.jsonl", tmp_path / f"{bench}.a.json", bench,
                        scoring={"bootstrap": 10}, rm=rm, bench_kind=kind)
    tidy = accuracy_table([tmp_path / "personalized.a.json", tmp_path / "rewardbench2.a.json"], tmp_path / "acc.csv")
    board = benchmark_board(tidy)
    official = read_json(tmp_path / "rewardbench2.a.json")["official"]["overall"]["accuracy"]
    assert board.loc[0, "rewardbench2"] == pytest.approx(official) and board.loc[0, "rewardbench2_score"] == "official"


def test_default_family_holds_a_cell_per_method_against_each_baseline():
    import pandas as pd

    from prbench.analysis.comparison import confirmatory_mask

    rows = [{"coefficient": c, "headline": h, "downstream": m, "benchmark_b": b, "policy": "p"}
            for m in ("bon", "ppo", "grpo") for b in ("rewardbench", "rmbench", "rewardbench2")
            for c, h in (("spearman", True), ("spearman", False), ("kendall_tau_b", True))]
    table = pd.DataFrame(rows)
    fam = table[confirmatory_mask(table, None)]
    assert len(fam) == 9 and set(fam["benchmark_b"]) == {"rewardbench", "rmbench", "rewardbench2"}
    assert (fam.groupby("downstream").size() == 3).all()


def test_demo_world_writes_the_stand_in_when_a_demo_config_names_it(tmp_path):
    """configs/demo.yaml and configs/test.yaml name RewardBench 2: rule demo_world
    (prbench.data.demo_world.generate) writes its stand-in in the hub schema, beside the general baseline."""
    import copy

    from prbench.data.demo_world import demo_general_dirs, generate
    from prbench.validation import load_config

    for path, per_subset in (("configs/demo.yaml", 12), ("configs/test.yaml", 4)):
        b = load_config(str(REPO / path))["data"]["baselines"]["rewardbench2"]
        assert (b["kind"], b["source"], b["split"]) == ("rewardbench2", "results/demo/raw/rewardbench2", "test")
        assert load_config(str(REPO / path))["demo"]["rewardbench2_per_subset"] == per_subset, path
    cfg = copy.deepcopy(load_config(str(REPO / "configs/demo.yaml")))
    cfg["demo"].update(train_per_subset=4, test_per_subset=4, general_train=4, general_test=4, users_per_subset=4,
                       rewardbench2_per_subset=2)
    dirs = {k: tmp_path / Path(v).relative_to("results") for k, v in demo_general_dirs(cfg).items()}
    generate(cfg, tmp_path / "personalized", dirs)
    rows = [json.loads(line) for line in (dirs["rewardbench2"] / "test.jsonl").read_text().splitlines()]
    assert rows == rewardbench2_split("test", 2, cfg["seed"], "rewardbench2")
    assert (dirs["general"] / f"{cfg['data']['baselines']['general']['split']}.jsonl").is_file()
