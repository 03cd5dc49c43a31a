"""Size and power of the demo's PPO claim (its judge-score side) for a number of answers per question.

The claim's first criterion (prbench.downstream.claim) is a paired difference: per question the mean
over training seeds of the trained policy's answers' judge scores minus the base policy's, with an
interval that counts the questions and the training seeds (`pooled_judge_diff`: the two-way ANOVA's
variance of a grand mean, Satterthwaite's degrees). Sample j of a question draws the same noise for
the base and every trained policy, so the base's j-th answer is shared by all seeds: more seeds do not
average its noise away, more answers do. `--rule questions` decides with the interval the claim used
before, the method table's percentile bootstrap over questions only (`paired_diff`), which leaves the
seeds' own spread out.

This script reads a finished demo's judged answers of the claim's RM (every training seed), estimates
the variance components of d[q, s, j] = trained score - base score (question, question x seed, question
x answer shared by the seeds, the rest; a random-effects ANOVA on the crossed seeds x answers design
within each question, plus the seeds' main effect), then simulates worlds at that level (questions,
seeds, answers; normal components) with a true difference `delta`, and decides each world with the
claim's own functions (`pooled_judge_diff`, then `holds` on its lower end). It prints, for each number
of answers per question, the share of worlds in which the judge-score side holds: at delta 0 that is
its size (nominal 0.025, one-sided), above 0 its power. `--seed-var` replaces the estimated variance
of the seeds' main effect (each seed's own gain), to see the rule's size where seeds differ more.

The judge's scores are not normal: a score is a mean of 0/1/2 ratings, on a grid (steps of 1/3 in the
demo) and mostly 0. `--world relabelled` builds worlds from the run's own scores instead: at each
question and answer slot the base's and the seeds' answers are dealt to the policies at random (no
policy better than another: the size), and a gain is planted on the grid (each trained answer one
step up with probability gain / step: the power), at the run's own number of answers.

    .venv/bin/python perf/claim_power.py <demo run folder> [--worlds 400] [--deltas 0 0.02 0.037] \
        [--seed-var 0 0.0003] [--rule crossed|questions] [--world normal|relabelled]

The reward-rise side is not simulated: it is read from training logs, not from the evaluation's answers.
"""
from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pandas as pd
import yaml

from prbench.downstream.claim import holds, pooled_judge_diff
from prbench.downstream.evaluation import paired_diff
from prbench.io import read_jsonl
from prbench.seeding import stable_seed

REPO = Path(__file__).resolve().parents[1]


def read_scores(run: Path, policy: str, rm: str) -> tuple[np.ndarray, np.ndarray]:
    """(b[q, j], t[q, s, j]): the judge scores of the base policy's answer j of question q and of
    training seed s's answer j, over the questions every seed's file has (the base's answers are the
    same in every seed's file: the first file's are read)."""
    root = run / "results" / "ppo" / policy / rm
    files = [root / "eval_judged.jsonl"] + sorted(root.glob("seed*/eval_judged.jsonl"))
    per_seed = [{r["question_id"]: (np.asarray(r["scores"], float), np.asarray(r["base_scores"], float))
                 for r in read_jsonl(f)} for f in files]
    # the first seed file's order, as the method table's bootstrap (`--rule questions`) sees the questions
    qs = [q for q in per_seed[0] if all(q in p for p in per_seed[1:])]
    for f, p in zip(files[1:], per_seed[1:]):
        differ = [q for q in qs if not np.array_equal(p[q][1], per_seed[0][q][1], equal_nan=True)]
        if differ:
            raise ValueError(f"{f}: base_scores of {len(differ)} question(s), e.g. {differ[0]}, differ from "
                             f"{files[0]}'s: the seeds must be compared with the same base answers")
    base = np.array([per_seed[0][q][1] for q in qs])
    trained = np.array([[p[q][0] for p in per_seed] for q in qs])
    return base, trained


def read_d(run: Path, policy: str, rm: str) -> np.ndarray:
    """d[q, s, j]: trained minus base judge score of answer j of question q, training seed s."""
    base, trained = read_scores(run, policy, rm)
    return trained - base[:, None, :]


def score_step(*scores: np.ndarray) -> float:
    """The judge scores' grid step: the smallest gap between two distinct finite scores."""
    vals = np.unique(np.concatenate([np.ravel(x) for x in scores]))
    gaps = np.diff(vals[np.isfinite(vals)])
    gaps = gaps[gaps > 1e-9]  # one grid value written two ways in its last bits is one value
    if not len(gaps):
        raise ValueError("claim_power: fewer than two distinct judge scores, no grid step")
    return float(gaps.min())


def relabelled_world(base: np.ndarray, trained: np.ndarray, rng: np.random.Generator, gain: float = 0.0,
                     step: float | None = None) -> np.ndarray:
    """d[q, s, j] of a world made of the run's own judge scores, at the level they are made: at each
    question q and answer slot j, the base's and the seeds' j-th answers (which share their sampling
    noise) are dealt to the base and the seeds at random, so that no policy is better than another (a
    null world: the scores' grid, their skew, the questions' and the shared answers' effects kept;
    the seeds' own main effects and their question x seed parts are dealt away with the rest).
    `gain` > 0 plants a gain on the grid: each trained answer rises by one score step with probability
    gain / step (a score at the scale's top may rise past it). NaN scores give NaN differences."""
    X = np.concatenate([base[:, None, :], trained], axis=1)  # (Q, S + 1, J)
    order = rng.random(X.shape).argsort(axis=1)  # a random permutation of the policies per (q, j)
    Y = np.take_along_axis(X, order, axis=1)
    new_base, new_trained = Y[:, 0, :], Y[:, 1:, :]
    if gain:
        step = score_step(base, trained) if step is None else step
        if not 0 < gain <= step:
            raise ValueError(f"claim_power: a planted gain of {gain} needs 0 < gain <= the score step {step}")
        new_trained = new_trained + step * (rng.random(new_trained.shape) < gain / step)
    return new_trained - new_base[:, None, :]


def components(d: np.ndarray) -> dict:
    """Variance components of d (random-effects ANOVA, negative estimates set to 0)."""
    Q, S, J = d.shape
    m = d.mean(axis=(1, 2), keepdims=True)
    ms_s = J * ((d.mean(axis=2, keepdims=True) - m) ** 2).sum() / (Q * (S - 1))
    ms_j = S * ((d.mean(axis=1, keepdims=True) - m) ** 2).sum() / (Q * (J - 1))
    res = d - d.mean(axis=2, keepdims=True) - d.mean(axis=1, keepdims=True) + m
    ms_e = (res ** 2).sum() / (Q * (S - 1) * (J - 1))
    ms_q = S * J * ((m.ravel() - m.mean()) ** 2).sum() / (Q - 1)
    comp = {"question": max((ms_q - ms_s - ms_j + ms_e) / (S * J), 0.0),
            "question_x_seed": max((ms_s - ms_e) / J, 0.0),
            "question_x_answer": max((ms_j - ms_e) / S, 0.0),
            "residual": ms_e, "Q": Q, "S": S, "J": J, "mean": float(d.mean())}
    # the seeds' main effect: the spread of the seeds' means beyond what the components that differ
    # between seeds give them (question x seed and the rest; the question and the shared answers cancel)
    seed_noise = (comp["question_x_seed"] + ms_e / J) / Q
    comp["seed"] = max(float(d.mean(axis=(0, 2)).var(ddof=1)) - seed_noise, 0.0) if S > 1 else 0.0
    return comp


def pooled_diff(d: np.ndarray, n_boot: int, boot_seed: int, rule: str = "crossed") -> dict:
    """The claim's pooled difference of d[q, s, j] (the seed's mean over answers, the base folded into d):
    `crossed`, the claim's `pooled_judge_diff` on the questions x seeds table; `questions`, the
    method table's bootstrap over questions (`paired_diff`, rows per (question, seed))."""
    Q, S, _ = d.shape
    if rule == "crossed":
        return pooled_judge_diff(pd.DataFrame(d.mean(axis=2)))
    df = pd.DataFrame({"question_id": np.repeat(np.arange(Q), S), "score": d.mean(axis=2).ravel(),
                       "base_score": 0.0})
    return paired_diff(df, n_boot, boot_seed)


def simulate(comp: dict, delta: float, answers: int, worlds: int, n_boot: int, boot_seed: int,
             rng: np.random.Generator, rule: str = "crossed") -> tuple[float, float]:
    """(share of worlds whose judge-score side holds, mean interval width) at `answers` per question."""
    Q, S, J = comp["Q"], comp["S"], answers

    def world() -> np.ndarray:
        return (delta + rng.normal(0, np.sqrt(comp["seed"]), (1, S, 1))
                + rng.normal(0, np.sqrt(comp["question"]), (Q, 1, 1))
                + rng.normal(0, np.sqrt(comp["question_x_seed"]), (Q, S, 1))
                + rng.normal(0, np.sqrt(comp["question_x_answer"]), (Q, 1, J))
                + rng.normal(0, np.sqrt(comp["residual"]), (Q, S, J)))
    return decide_worlds(world, worlds, n_boot, boot_seed, rule)


def decide_worlds(world, worlds: int, n_boot: int, boot_seed: int, rule: str) -> tuple[float, float]:
    """(share of `worlds` draws of `world()` whose judge-score side holds, mean interval width)."""
    hits, widths = 0, []
    for _ in range(worlds):
        r = pooled_diff(world(), n_boot, boot_seed, rule)
        hits += holds(r["diff_ci_low"], 1.0)
        widths.append(r["diff_ci_high"] - r["diff_ci_low"])
    return hits / worlds, float(np.mean(widths))


def simulate_relabelled(base: np.ndarray, trained: np.ndarray, gain: float, worlds: int, n_boot: int,
                        boot_seed: int, rng: np.random.Generator, rule: str = "crossed") -> tuple[float, float]:
    """(share of worlds whose judge-score side holds, mean interval width) over `relabelled_world`s."""
    step = score_step(base, trained)
    return decide_worlds(lambda: relabelled_world(base, trained, rng, gain, step), worlds, n_boot, boot_seed, rule)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("run", type=Path, help="a finished demo's folder (its results/ppo/...)")
    ap.add_argument("--config", type=Path, default=REPO / "configs/demo.yaml")
    ap.add_argument("--worlds", type=int, default=400)
    ap.add_argument("--answers", type=int, nargs="+", default=[4, 6, 8, 12, 16])
    ap.add_argument("--deltas", type=float, nargs="+", default=[0.0, 0.02, 0.037])
    ap.add_argument("--seed-var", type=float, nargs="+", default=None,
                    help="variances of the seeds' main effect to simulate instead of the estimated one")
    ap.add_argument("--rule", choices=["crossed", "questions"], default="crossed")
    ap.add_argument("--world", choices=["normal", "relabelled"], default="normal",
                    help="normal: worlds of normal components at the run's estimates; relabelled: the run's own "
                         "judge scores dealt anew at each question and answer slot (relabelled_world), at the "
                         "run's number of answers")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    cfg = yaml.safe_load(args.config.read_text())
    rm, policy = cfg["ppo"]["claim"]["rm"], "demo_policy"
    n_boot, boot_seed = int(cfg["ppo"].get("bootstrap", 1000)), stable_seed(cfg.get("seed", 0), "ppo-table-diff",
                                                                            policy, rm)
    d = read_d(args.run, policy, rm)
    comp = components(d)
    obs = pooled_diff(d, n_boot, boot_seed, args.rule)
    print(f"{args.run}: {comp['Q']} questions, {comp['S']} seeds, {comp['J']} answers; pooled difference "
          f"{obs['diff_base']:+.4f} [{obs['diff_ci_low']:+.4f}, {obs['diff_ci_high']:+.4f}] (width "
          f"{obs['diff_ci_high'] - obs['diff_ci_low']:.4f})")
    names = ("question", "question_x_seed", "question_x_answer", "residual", "seed")
    print("variance components: " + ", ".join(f"{k} {comp[k]:.5f}" for k in names))
    rng = np.random.default_rng(args.seed)
    if args.world == "relabelled":
        base, trained = read_scores(args.run, policy, rm)
        print(f"\nrule {args.rule}, relabelled worlds (score step {score_step(base, trained):.4f}; gains planted on "
              f"the grid): share of {args.worlds} worlds whose judge-score side holds (mean 95% interval width)")
        print(f"{comp['J']} answers | " + " | ".join(
            f"gain {x:+.4f}: {p:.3f} ({w:.4f})" for x in args.deltas
            for p, w in [simulate_relabelled(base, trained, x, args.worlds, n_boot, boot_seed, rng, args.rule)]))
        return
    for seed_var in args.seed_var if args.seed_var is not None else [comp["seed"]]:
        world = dict(comp, seed=seed_var)
        print(f"\nrule {args.rule}, seeds' main effect {seed_var:.5f}: share of {args.worlds} simulated worlds "
              f"whose judge-score side holds (mean 95% interval width)")
        print("answers | " + " | ".join(f"delta {x:+.3f}" for x in args.deltas))
        for j in args.answers:
            cells = [simulate(world, x, j, args.worlds, n_boot, boot_seed, rng, args.rule) for x in args.deltas]
            print(f"{j} | " + " | ".join(f"{p:.3f} ({w:.4f})" for p, w in cells))


if __name__ == "__main__":
    main()
