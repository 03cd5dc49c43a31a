"""A benchmark scoring job split into parts (prbench.scoring.parts; rules score_benchmark_part and
score_benchmark's join): the parts cover the rows once in order, a pairwise judge draws the orders one
job would (order_rule sequential, continued across parts), the join writes one job's pairs file and
accuracy, refuses parts that do not cover the file, and the plan splits a job above
resources.max_runtime_min (the study's 70-72B RMs under a 48-hour partition)."""
import random

import numpy as np
import pytest
from helpers import REPO
from rm_helpers import make_pairs, tiny_causal_lm, tiny_llama_classifier

from prbench import prompts as P
from prbench.io import read_json, read_jsonl, write_jsonl
from prbench.plan import load_layered
from prbench.plan import resources as R
from prbench.rms.generative import GenerativePairwiseRM
from prbench.scoring.benchmark import score_benchmark
from prbench.scoring.parts import merge_diagnostics, merge_parts, order_offsets, part_rows, score_part

SEQ = {"order_seed": 42, "order_rule": "sequential", "pairwise_parse": "first_result",
       "pairwise_failure": "predict_a", "bootstrap": 50}


@pytest.fixture(autouse=True)
def _templates():
    P.configure({"templates": "compact"})
    yield
    P._ACTIVE = None


@pytest.fixture(scope="module")
def lm_mute(tmp_path_factory):
    return tiny_causal_lm(tmp_path_factory.mktemp("lm") / "mute", "Maybe later.", steps=60)


def _judge(path):
    return {"name": "judge", "kind": "generative_pairwise", "path": str(path), "use_profile": True,
            "max_new_tokens": 4, "progress": False}


def _items(n, seed=0):
    """Best-of-4 items (one chosen, three rejected) in two subsets: a pairwise judge's round robin."""
    rng = random.Random(seed)
    rows = []
    for i, p in enumerate(make_pairs(n, seed=seed)):
        others = [f"Another answer {rng.randint(0, 99)} {j}" for j in range(2)]
        rows.append({**p, "benchmark": "rewardbench2", "chosen": [p["chosen"]], "rejected": [p["rejected"], *others],
                     "rule": "best_of_n", "subset": "S1" if i < n // 2 + 1 else "S2"})
    return rows


def _split_and_join(tmp_path, rows, spec, parts, scoring, rm=None):
    write_jsonl(tmp_path / "bench.jsonl", rows)
    pp = [tmp_path / f"p{i}.pairs.jsonl" for i in range(parts)]
    ip = [tmp_path / f"p{i}.json" for i in range(parts)]
    for i in range(parts):
        score_part(tmp_path / "bench.jsonl", spec, i, parts, pp[i], ip[i], "personalized", seed=0, scoring=scoring,
                   rm=rm)
    merge_parts(tmp_path / "bench.jsonl", pp, ip, spec, tmp_path / "j.pairs.jsonl", tmp_path / "j.acc.json",
                "personalized", seed=0, scoring=scoring)
    score_benchmark(tmp_path / "bench.jsonl", spec, tmp_path / "w.pairs.jsonl", tmp_path / "w.acc.json",
                    "personalized", seed=0, scoring=scoring, rm=rm)
    return pp, ip


def _without_counts(summary):
    return {k: v for k, v in summary.items() if k not in ("scoring", "diagnostics")}


def test_parts_cover_every_row_once_in_order():
    for n in range(0, 40):
        for parts in range(1, 8):
            spans = [part_rows(n, i, parts) for i in range(parts)]
            assert spans[0][0] == 0 and spans[-1][1] == n
            assert all(a[1] == b[0] for a, b in zip(spans, spans[1:]))
            assert max(b - a for a, b in spans) - min(b - a for a, b in spans) <= 1
    with pytest.raises(ValueError, match="parts are numbered"):
        part_rows(10, 3, 3)


def test_order_draws_continue_across_parts():
    """A part's sequential draws, its offsets skipped, are the whole file's draws at its rows."""
    rm = object.__new__(GenerativePairwiseRM)  # _orders reads only the order rule and seeds
    rm.seed, rm.order_seed, rm.order_rule = 0, 42, "sequential"
    rows = make_pairs(23, seed=1)
    groups = [r["subset"] for r in rows]
    whole = rm._orders([None] * len(rows), groups)
    for parts in (2, 3, 5):
        got = []
        for i in range(parts):
            a, b = part_rows(len(rows), i, parts)
            got += rm._orders([None] * (b - a), groups[a:b], order_offsets(rows[:a]))
        assert got == whole
    items = _items(9)
    assert order_offsets(items[:4]) == {"S1": 4 * 6}  # 4 answers: 6 comparisons each


def test_split_pairwise_judge_equals_one_job(lm_mute, tmp_path):
    """The authors' sequential order rule through 3 parts: the same pairs file and accuracy as one
    job (under predict_a every credit is the order drawn, so a wrong draw shows)."""
    rows = make_pairs(14, seed=5)
    for i, r in enumerate(rows):
        r["subset"] = "S1" if i < 9 else "S2"
    _split_and_join(tmp_path, rows, _judge(lm_mute), 3, SEQ)
    assert (tmp_path / "j.pairs.jsonl").read_bytes() == (tmp_path / "w.pairs.jsonl").read_bytes()
    joined, whole = read_json(tmp_path / "j.acc.json"), read_json(tmp_path / "w.acc.json")
    assert _without_counts(joined) == _without_counts(whole)
    assert joined["scoring"]["parts"] == 3 and joined["scoring"]["pairs"] == whole["scoring"]["pairs"] == 14
    assert joined["diagnostics"]["parts"] == 3
    assert joined["diagnostics"]["pairs"] == whole["diagnostics"]["pairs"]
    want = []
    for n in (9, 5):
        random.seed(42)
        want += [[random.random() < 0.5] for _ in range(n)]
    assert [d["judge"]["chosen_is_a"] for d in read_jsonl(tmp_path / "j.pairs.jsonl")] == want


def test_split_pairwise_items_equal_one_job(lm_mute, tmp_path):
    """Best-of-4 items: each part continues the round robin's draws per subset."""
    _split_and_join(tmp_path, _items(7), _judge(lm_mute), 2, SEQ)
    assert (tmp_path / "j.pairs.jsonl").read_bytes() == (tmp_path / "w.pairs.jsonl").read_bytes()
    assert _without_counts(read_json(tmp_path / "j.acc.json")) == _without_counts(read_json(tmp_path / "w.acc.json"))


def test_split_classifier_equals_one_job(tmp_path):
    """A pointwise classifier: the same credits, and scores equal to float precision (a part's
    batches differ from the whole job's)."""
    path = tiny_llama_classifier(tmp_path / "clf")
    spec = {"name": "clf", "kind": "classifier", "path": str(path), "use_profile": True, "progress": False}
    _split_and_join(tmp_path, make_pairs(17, seed=2), spec, 2, {"bootstrap": 50})
    j, w = read_jsonl(tmp_path / "j.pairs.jsonl"), read_jsonl(tmp_path / "w.pairs.jsonl")
    assert [r["pair_id"] for r in j] == [r["pair_id"] for r in w]
    assert [r["credit"] for r in j] == [r["credit"] for r in w]
    for key in ("score_chosen", "score_rejected"):
        np.testing.assert_allclose([r[key] for r in j], [r[key] for r in w], rtol=1e-5, atol=1e-6)
    assert read_json(tmp_path / "j.acc.json")["overall"] == read_json(tmp_path / "w.acc.json")["overall"]


class _Length:
    """A pointwise stand-in RM (the answer's length): no model, exact scores."""
    name, pairwise, kind = "len", False, "length"

    def score(self, reqs):
        from prbench.rms.base import ScoreOutput

        return ScoreOutput(scores=np.array([float(len(r.answer)) for r in reqs]), failures=0)

    def diagnostics(self):
        return {"kind": self.kind, "calls": 1}


def test_join_refuses_parts_that_do_not_cover_the_file(tmp_path):
    rows = make_pairs(10, seed=3)
    spec = {"name": "len", "kind": "length"}
    pp, ip = _split_and_join(tmp_path, rows, spec, 2, {"bootstrap": 20}, rm=_Length())
    assert (tmp_path / "j.pairs.jsonl").read_bytes() == (tmp_path / "w.pairs.jsonl").read_bytes()
    out = (tmp_path / "x.pairs.jsonl", tmp_path / "x.acc.json")
    with pytest.raises(ValueError, match="part 0 of 2 over 10 rows, expected part 0 of 1"):
        merge_parts(tmp_path / "bench.jsonl", pp[:1], ip[:1], spec, *out, "personalized")
    with pytest.raises(ValueError, match=r"p1\.json: part 1 of 2 .* expected part 0 of 2"):
        merge_parts(tmp_path / "bench.jsonl", pp[::-1], ip[::-1], spec, *out, "personalized")
    dropped = read_jsonl(pp[1])[:-1]
    write_jsonl(pp[1], dropped)
    with pytest.raises(ValueError, match=r"p1\.pairs\.jsonl: its pair_ids are not rows 5-10"):
        merge_parts(tmp_path / "bench.jsonl", pp, ip, spec, *out, "personalized")
    assert not out[0].exists() and not out[1].exists()


def test_merged_diagnostics_keep_agreed_values_and_sum_counts():
    got = merge_diagnostics([{"kind": "g", "pairs": 3, "rate": 0.5, "ok": True},
                             {"kind": "g", "pairs": 4, "rate": 0.25, "ok": True}])
    assert got == {"kind": "g", "pairs": 7, "rate": {"per_part": [0.5, 0.25]}, "ok": True, "parts": 2}


def _study(**resources):
    cfg = load_layered([REPO / "config.yaml", REPO / "configs" / "study.yaml"])
    cfg.setdefault("resources", {}).update(resources)
    return cfg


def test_plan_splits_the_jobs_above_the_partition_limit():
    """Without a limit no job is split; under a 48-hour limit every benchmark job's part fits it, and
    the ones split are the ones whose one job would not; an entry's benchmark_parts overrides."""
    free = _study(max_runtime_min=None)
    limited = _study(max_runtime_min=48 * 60)
    benches = ["personalized", *sorted(free["data"].get("baselines") or {})]
    split = {}
    for rm in free["reward_models"]:
        for b in benches:
            assert R.benchmark_parts(free, rm, b) == 1
            whole = R.rm_inference(free, rm, "benchmark", b).runtime_min
            n = R.benchmark_parts(limited, rm, b)
            part = R.rm_inference(limited, rm, "benchmark", b).runtime_min
            assert part <= 48 * 60, (rm, b, part)
            assert (n > 1) == (whole > 48 * 60), (rm, b, whole, n)
            if n > 1:
                split[rm, b] = n
    assert split and all(free["reward_models"][rm]["params_b"] >= 70 for rm, _ in split)
    assert any(b == "rmbench" for _, b in split)
    rm = next(iter(split))[0]
    limited["reward_models"][rm]["benchmark_parts"] = 5
    assert R.benchmark_parts(limited, rm, "personalized") == 5
    assert "in 5 parts" in R.rm_inference(limited, rm, "benchmark").sharding
