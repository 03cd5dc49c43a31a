"""Evaluation of a trained policy (PPO, GRPO: every trained-policy method) and its table.

The trained policy and the untrained base policy answer the same evaluation questions (the first
`ppo.eval_questions_per_subset` of each subset, `prompt_rows.select_eval_prompts`, each showing its
first `ppo.eval_posts` profile posts; one greedy answer, or `ppo.eval_samples` sampled ones when
`ppo.eval_greedy` is false), the cached judge (`prbench.judge`, as for BoN) scores the answers against
each question's rubric aspects (a question's score: the mean over its answers), and each question's
outcome is a win, tie or loss against the base policy. `write_policy_table` summarises
each (policy, rm) over all its questions (subset "all") and per subset: bootstrap mean and CI of
the judge score, base mean, win/tie/loss rates, the count of unparseable judgements, the paired
difference to the base policy on the same questions with its bootstrap CI over questions
(`paired_diff`), and the reward rise of the training log (`prbench.downstream.reward_rise`). With
`ppo.per_subset` a (policy, rm) has one PPO run per subset, each evaluated on its subset's
questions (`eval_prompt_rows(..., subset)`).
Rules: `base_answers`, `eval_policy`, `judged_measures` (rules/evaluation.smk), `ppo_table` / `grpo_table`
(rules/ppo.smk, rules/grpo.smk).
"""
from __future__ import annotations

import logging
import math
from typing import Sequence

import numpy as np
import pandas as pd

from ..config import entry_with_defaults
from ..generation import sampling_settings
from ..io import read_jsonl, write_csv, write_jsonl
from ..judge import JudgeItem, judge_items_cached, load_judge, shard_name
from ..seeding import stable_seed
from ..stats import bootstrap_ci
from . import run_files
from .policy import generate_answers, load_policy_model
from .reward_rise import RISE_COLUMNS, reward_rise_rows

log = logging.getLogger("prbench.downstream.evaluation")


def policy_answers(model_path: str, prompts: Sequence[dict], ppo_cfg: dict, seed: int,
                   trust_remote_code: bool = False, device: str = "auto",
                   revision: str | None = None) -> list[dict]:
    """Answers to each prompt: one greedy answer (`ppo.eval_greedy`), or `ppo.eval_samples` samples
    at `ppo.temperature` and `ppo.eval_top_p` (the authors' evaluation: one sample at 1.0 / 0.9).
    A row holds `answer` (the first) and, with several samples, `answers` (all of them). Sample j of
    a question draws the same noise for every policy (`generate_answers`' seeding), so the trained
    and the base policy's j-th answers are paired, and neither depends on the batch size
    (`ppo.eval_batch_size` prompts a generate call)."""
    ppo_cfg = entry_with_defaults(ppo_cfg, "ppo")  # the job's picked keys; the schema fills the rest
    greedy = bool(ppo_cfg["eval_greedy"])
    n = 1 if greedy else int(ppo_cfg["eval_samples"])
    model, tok = load_policy_model(model_path, trust_remote_code, device, revision=revision)
    answers = generate_answers(model, tok, list(prompts), n=n,
                               **sampling_settings({"temperature": ppo_cfg["temperature"],
                                                    "top_p": ppo_cfg["eval_top_p"]}),
                               max_new_tokens=int(ppo_cfg["eval_max_new_tokens"]),
                               seed=stable_seed(seed, "ppo-eval"), batch_size=int(ppo_cfg["eval_batch_size"]),
                               greedy=greedy)
    if len(answers) != len(prompts):
        raise RuntimeError(f"generate_answers returned {len(answers)} answer lists for {len(prompts)} prompts")
    return [{"question_id": p["question_id"], "subset": p["subset"], "answer": a[0],
             **({"answers": a} if n > 1 else {})} for p, a in zip(prompts, answers)]


def answer_list(row: dict) -> list[str]:
    """A policy-answer row's answers: `answers` (several samples) or its one `answer`."""
    return list(row["answers"]) if "answers" in row else [row["answer"]]


def eval_prompt_rows(eval_prompts: str, ppo_cfg: dict, subset: str | None = None) -> list[dict]:
    """The evaluation prompts: the first `ppo.eval_questions_per_subset` questions of each subset
    (only `subset`'s when given: a per-subset PPO run), each showing its first `ppo.eval_posts`
    profile posts (all when null)."""
    ppo_cfg = entry_with_defaults(ppo_cfg, "ppo")
    from .prompt_rows import limit_posts, load_prompt_rows, select_eval_prompts  # torch (the reward adapter)

    rows = select_eval_prompts(load_prompt_rows(eval_prompts), ppo_cfg["eval_questions_per_subset"])
    if subset is not None:
        rows = [r for r in rows if r["subset"] == subset]
        if not rows:
            raise ValueError(f"{eval_prompts}: no evaluation questions of subset {subset!r}")
    return limit_posts(rows, ppo_cfg["eval_posts"])


def write_base_answers(policy_path: str, eval_prompts: str, out_path: str, ppo_cfg: dict, seed: int,
                       trust_remote_code: bool = False, device: str = "auto", revision: str | None = None) -> int:
    """The base policy's answers; `revision`: policies.<p>.revision (a hub policy)."""
    prompts = eval_prompt_rows(eval_prompts, ppo_cfg)
    return write_jsonl(out_path, policy_answers(policy_path, prompts, ppo_cfg, seed, trust_remote_code, device,
                                                revision=revision))


def load_judge_aspects(path: str) -> dict[str, list[str]]:
    """question_id -> rubric aspect strings (first judge-key row of each question)."""
    out: dict[str, list[str]] = {}
    for i, row in enumerate(read_jsonl(path), 1):
        if "question_id" not in row or "rubric_aspects" not in row:
            raise ValueError(f"{path}:{i}: judge-key row lacks question_id or rubric_aspects")
        if row["question_id"] in out:
            continue
        aspects = [a["aspect"] if isinstance(a, dict) else str(a) for a in row["rubric_aspects"]]
        out[row["question_id"]] = aspects
    return out


def outcome(score: float, base: float) -> float:
    """1 win / 0.5 tie / 0 loss against the base policy (a question's scores: the means over its
    answers when there are several); NaN when either is unscored."""
    if not (math.isfinite(score) and math.isfinite(base)):
        return float("nan")
    return 1.0 if score > base else 0.0 if score < base else 0.5


def judge_policy(answers: Sequence[dict], base_answers: Sequence[dict], aspects: dict[str, list[str]],
                 questions: dict[str, str], judge, cache_dir: str, shard: str,
                 base_source: str = "base answers") -> list[dict]:
    """Judge trained and base answers (same cached judge as BoN; this job writes cache shard
    `shard`) and compare them per question. With several answers per question (`ppo.eval_samples`)
    a question's `score` / `base_score` is the mean of its answers' judge scores (`scores` /
    `base_scores` hold each), each side over its own answers that were scored (a failed judgement
    leaves only that answer out of its side's mean; the sides share their sampling noise, not
    their failures). An unparseable judgement (NaN) leaves that answer unscored (a question with
    none scored is NaN, its comparison too); it is counted in `judge_failures`, the other answers
    and rows stand."""
    base = {r["question_id"]: r for r in base_answers}
    missing = [a["question_id"] for a in answers if a["question_id"] not in base]
    if missing:
        raise ValueError(f"{base_source}: lacks {len(missing)} evaluation questions, e.g. {missing[:3]} "
                         "(rerun rule base_answers with the same ppo evaluation settings)")
    no_key = [a["question_id"] for a in answers if a["question_id"] not in aspects]
    if no_key:
        raise ValueError(f"judge key has no rubric for {len(no_key)} evaluation questions, e.g. {no_key[:3]}")
    pairs = [(a, answer_list(a), answer_list(base[a["question_id"]])) for a in answers]
    for a, own, theirs in pairs:
        if len(own) != len(theirs):
            raise ValueError(f"{base_source}: question {a['question_id']} has {len(theirs)} base answers and "
                             f"{len(own)} trained ones (rerun rule base_answers with the same ppo.eval_samples)")
    items = [JudgeItem(question=questions[a["question_id"]], answer=text, aspects=aspects[a["question_id"]])
             for a, own, theirs in pairs for text in own + theirs]
    res = iter(judge_items_cached(judge, items, cache_dir, shard))
    out = []
    for a, own, theirs in pairs:
        mine, other = [next(res) for _ in own], [next(res) for _ in theirs]
        s, bs = _mean_score(mine), _mean_score(other)
        row = {"question_id": a["question_id"], "subset": a["subset"], "answer": a["answer"],
               "score": s, "base_score": bs, "outcome": outcome(s, bs),
               "base_answer": base[a["question_id"]]["answer"],
               "judge_failures": sum(int(r.failed or not math.isfinite(float(r.score))) for r in mine + other)}
        if len(own) > 1:
            row.update(answers=own, base_answers=theirs, scores=[float(r.score) for r in mine],
                       base_scores=[float(r.score) for r in other])
        out.append(row)
    return out


def _mean_score(results) -> float:
    """The mean judge score of one question's answers over those scored (NaN when none is)."""
    vals = [float(r.score) for r in results if math.isfinite(float(r.score))]
    return float(np.mean(vals)) if vals else float("nan")


def eval_policy(model_dir: str, base_answers_path: str, eval_prompts: str, judge_keys: str, judge_cfg: dict,
                cache_dir: str, out_path: str, ppo_cfg: dict, seed: int, trust_remote_code: bool = False,
                device: str = "auto", subset: str | None = None) -> dict:
    prompts = eval_prompt_rows(eval_prompts, ppo_cfg, subset)
    answers = policy_answers(model_dir, prompts, ppo_cfg, seed, trust_remote_code, device)
    judge = load_judge(judge_cfg, seed)
    rows = judge_policy(answers, read_jsonl(base_answers_path), load_judge_aspects(judge_keys),
                        {p["question_id"]: p["question"] for p in prompts}, judge, cache_dir, shard_name(out_path),
                        base_source=str(base_answers_path))
    write_jsonl(out_path, rows)
    fails = sum(r["judge_failures"] for r in rows)
    if fails:
        log.warning("judge failed on %d of %d trained/base answers", fails,
                    2 * sum(len(answer_list(a)) for a in answers))
    return {"n": len(rows), "judge_failures": fails}


TABLE_COLUMNS = ["policy", "rm", "subset", "n_questions", "mean", "ci_low", "ci_high", "base_mean",
                 "win_rate", "tie_rate", "loss_rate", "judge_failures", "diff_base", "diff_ci_low", "diff_ci_high",
                 *RISE_COLUMNS]
ALL_SUBSETS = "all"  # the `subset` of a (policy, rm)'s row over all its questions


def policy_table_rows(runs: dict[tuple, str | Sequence[str]], n_boot: int, seed: int,
                      train_logs: dict[tuple, dict[str, str]] | None = None) -> pd.DataFrame:
    """Rows per (policy, rm) from its eval_judged.jsonl files (one, or one per subset when PPO
    trains per subset): first over all its questions (`subset` "all": with per-subset runs the
    question-weighted mean over the subsets), then one row per subset. NaN judge scores are
    excluded and counted; judge_failures counts every failed judgement (also those scored 0.0).
    A key (policy, rm, replicate) is one training seed (`ppo.seeds`, `grpo.seeds`; (policy, rm) =
    seed 0): with several seeds a row is over all of them (`_table_row`).
    train_logs: (policy, rm[, replicate]) -> {subset ("" for a run over every subset): train_log.csv}
    gives the reward-rise columns (`prbench.downstream.reward_rise.reward_rise_rows`); NaN for a row
    without a log (and for the subset rows of a run over every subset)."""
    grouped: dict[tuple[str, str], dict[int, list]] = {}
    for key, paths in runs.items():
        policy, rm, rep = (*key, 0) if len(key) == 2 else key
        grouped.setdefault((policy, rm), {})[int(rep)] = run_files(paths)
    out = []
    for (policy, rm), reps in sorted(grouped.items()):
        frames = []
        for rep, paths in sorted(reps.items()):
            frames.append(read_judged(paths, policy, rm).assign(replicate=rep))
        df = pd.concat(frames, ignore_index=True)
        out.append({**_table_row(df, policy, rm, ALL_SUBSETS, n_boot, stable_seed(seed, "ppo-table", policy, rm)),
                    **paired_diff(df, n_boot, stable_seed(seed, "ppo-table-diff", policy, rm))})
        for subset, part in df.groupby("subset", sort=False):
            out.append({**_table_row(part, policy, rm, str(subset), n_boot,
                                     stable_seed(seed, "ppo-table", policy, rm, str(subset))),
                        **paired_diff(part, n_boot, stable_seed(seed, "ppo-table-diff", policy, rm, str(subset)))})
    table = pd.DataFrame(out, columns=[c for c in TABLE_COLUMNS if c not in RISE_COLUMNS])
    rise = reward_rise_rows(train_logs or {}, ALL_SUBSETS).astype({c: float for c in RISE_COLUMNS})
    return table.merge(rise, on=["policy", "rm", "subset"], how="left", validate="one_to_one")[TABLE_COLUMNS]


def read_judged(paths: Sequence[str], policy: str, rm: str) -> pd.DataFrame:
    """One training seed's judged answers: its eval_judged.jsonl files (one, or one per subset with
    ppo.per_subset) as one frame; an empty file, or a question judged in two of them, is an error."""
    parts = [pd.DataFrame(read_jsonl(path)) for path in paths]
    for path, f in zip(paths, parts):
        if f.empty:
            raise ValueError(f"{path}: no judged answers")
    df = pd.concat(parts, ignore_index=True)
    dup = df["question_id"][df["question_id"].duplicated()].unique().tolist()
    if dup:
        raise ValueError(f"{policy}/{rm}: question(s) {dup[:3]} judged in more than one of {list(paths)}")
    return df


def paired_diff(df: pd.DataFrame, n_boot: int, seed: int) -> dict:
    """diff_base: the mean over questions of (trained score - base score) on the same question, over
    the questions where both are scored; diff_ci_low/high: the percentile bootstrap over those
    questions (`bootstrap_ci`, each draw resamples (trained, base) pairs together: a paired CI).
    Over several training seeds a question's trained score is its mean over the seeds that scored it
    (as `mean` in `_table_row`); the base answer is the same for every seed."""
    d = df.assign(score=df["score"].astype(float), base_score=df["base_score"].astype(float))
    per_q = d.groupby("question_id", sort=False).agg(score=("score", "mean"), base=("base_score", "first"))
    diffs = (per_q["score"] - per_q["base"]).dropna().to_numpy()
    est, lo, hi = bootstrap_ci(diffs, n_boot=n_boot, seed=seed)
    return {"diff_base": est, "diff_ci_low": lo, "diff_ci_high": hi}


def _table_row(df: pd.DataFrame, policy: str, rm: str, subset: str, n_boot: int, seed: int) -> dict:
    """One table row. Over several training seeds (column `replicate`): `mean` is the mean over
    questions of each question's mean score over the seeds that scored it, the CI resamples those
    per-question means (the between-seed spread enters only through them; the seeds themselves are
    not resampled), the rates pool every seed's comparisons (= the mean over seeds of each seed's rate
    when no comparison is NaN), n_questions counts distinct questions and judge_failures sums the
    seeds' failures."""
    scores = df["score"].astype(float).to_numpy()
    base = df["base_score"].astype(float).to_numpy()
    oc = df["outcome"].astype(float).to_numpy()
    ok, okb, oko = np.isfinite(scores), np.isfinite(base), np.isfinite(oc)
    if "replicate" in df and df["replicate"].nunique() > 1:
        per_q = df.assign(score=df["score"].astype(float)).groupby("question_id", sort=False)["score"].mean()
        mean, lo, hi = bootstrap_ci(per_q.dropna().to_numpy(), n_boot=n_boot, seed=seed)
        base = df.drop_duplicates("question_id")["base_score"].astype(float).to_numpy()
        okb = np.isfinite(base)
    else:
        mean, lo, hi = bootstrap_ci(scores[ok], n_boot=n_boot, seed=seed)
    n_cmp = int(oko.sum())
    if subset == ALL_SUBSETS and not (ok.all() and okb.all()):
        log.warning("%s/%s: %d trained and %d base answers without a judge score (unparseable): only "
                    "those answers (and their comparisons) are left out; counted in judge_failures",
                    policy, rm, int((~ok).sum()), int((~okb).sum()))
    return {
        "policy": policy, "rm": rm, "subset": subset, "n_questions": int(df["question_id"].nunique()), "mean": mean,
        "ci_low": lo, "ci_high": hi, "base_mean": float(base[okb].mean()) if okb.any() else float("nan"),
        "win_rate": float((oc[oko] == 1.0).mean()) if n_cmp else float("nan"),
        "tie_rate": float((oc[oko] == 0.5).mean()) if n_cmp else float("nan"),
        "loss_rate": float((oc[oko] == 0.0).mean()) if n_cmp else float("nan"),
        # the answers whose judgement failed to parse (under judge.failure zero they are scored 0.0,
        # kept in the means, and still counted here)
        "judge_failures": (int(df["judge_failures"].sum()) if "judge_failures" in df
                           else int((~ok).sum() + (~okb).sum())),
    }


def write_policy_table(runs: dict[tuple[str, str], str | Sequence[str]], out_csv: str, n_boot: int,
                       seed: int, train_logs: dict[tuple, dict[str, str]] | None = None) -> pd.DataFrame:
    df = policy_table_rows(runs, n_boot, seed, train_logs)
    write_csv(out_csv, df)
    return df
