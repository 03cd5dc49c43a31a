"""Worlds made at the level the data are made, for checking the verdict rule: RMs that pick their
best-of-N answer from samples shared by all RMs, one judge with noise and few rating levels that
rates every sample once, benchmark pairs shared by all RMs. The very function the run calls
(`verdict.decide_family`, fed `verdict.Cell.from_replicates` with a question and pair bootstrap
as the run's) decides each simulated family, so its false-decision rate in a world with no answer
and its direction in a graded world are measured, not assumed.

The world. Every sample of a question has a personal fit u and a general quality g (independent
N(0, 1)). RM r scores a sample s_r (cos(theta_r) u + sin(theta_r) g) + noise, theta_r uniform on
[0, pi/2] (how much it weighs the user against general quality), s_r log-normal (its strength);
its BoN answer is its top-scored sample. The judge rates each sample once:
w u + (1 - w) g + noise, cut to `judge_levels` levels; `judge_weight` None = a judge unrelated to
both (a fresh N(0, 1) draw per sample). The personalized benchmark's pairs differ mostly in u, each
baseline's mostly in g; RM r is right on a pair when its score of the difference plus noise is > 0.
At w = 0.5 the world is symmetric in (u, g): the population coefficients of the two benchmarks are
equal, so a decision is false; w = 1 plants "personalized", w = 0 "baseline".

`python -m prbench.analysis.worlds` prints these worlds' rates beside the RM-level size grid and
the power of config.yaml's family; tests/test_verdict.py checks them.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from ..seeding import stable_seed
from . import power, verdict


@dataclass(frozen=True)
class WorldSpec:
    n_rms: int = 35
    questions: int = 120
    samples: int = 16
    pairs: int = 300  # per benchmark
    baselines: int = 2  # cells of the family: the personalized benchmark against each baseline
    judge_weight: float | None = 0.5  # w; None = the judge is unrelated to both benchmarks
    judge_noise: float = 1.0
    judge_levels: int = 3
    rm_noise: float = 1.0
    strength_sd: float = 0.5
    pair_margin: float = 0.7
    pair_off: float = 0.3


def _draw(spec: WorldSpec, n_sims: int, rng, n_boot: int) -> list:
    n, Q, N, P = spec.n_rms, spec.questions, spec.samples, spec.pairs
    theta = rng.uniform(0, np.pi / 2, (n_sims, n, 1))
    strength = np.exp(rng.normal(0, spec.strength_sd, (n_sims, n, 1)))
    w_u, w_g = np.cos(theta) * strength, np.sin(theta) * strength
    u = rng.standard_normal((n_sims, 1, Q, N))
    g = rng.standard_normal((n_sims, 1, Q, N))
    score = w_u[..., None] * u + w_g[..., None] * g + spec.rm_noise * rng.standard_normal((n_sims, n, Q, N))
    pick = score.argmax(-1)  # (S, n, Q): each RM's best of the N shared samples
    if spec.judge_weight is None:
        judge = rng.standard_normal((n_sims, 1, Q, N))
    else:
        w = spec.judge_weight
        judge = w * u + (1 - w) * g + spec.judge_noise * rng.standard_normal((n_sims, 1, Q, N))
    if spec.judge_levels:
        judge = power.cut_levels(judge / judge.std(), spec.judge_levels)
    y_q = np.take_along_axis(np.broadcast_to(judge, score.shape), pick[..., None], -1)[..., 0]  # (S, n, Q)

    def credits(personal: bool) -> np.ndarray:  # (S, n, P): right (1) or wrong (0) on each shared pair
        main = np.abs(rng.standard_normal((n_sims, 1, P))) * spec.pair_margin
        off = rng.standard_normal((n_sims, 1, P)) * spec.pair_off
        du, dg = (main, off) if personal else (off, main)
        noise = spec.rm_noise * spec.pair_margin * rng.standard_normal((n_sims, n, P))
        return ((w_u * du + w_g * dg + noise) > 0).astype(float)

    units = [credits(True)] + [credits(False) for _ in range(spec.baselines)] + [y_q]
    point = [x.mean(-1) for x in units]
    reps = [_bootstrap(x, n_boot, rng) for x in units]
    a, ra, y, ry = point[0], reps[0], point[-1], reps[-1]
    return [verdict.Cell.from_replicates(a, b, y, ra, rb, ry) for b, rb in zip(point[1:-1], reps[1:-1])]


def _bootstrap(units: np.ndarray, n_boot: int, rng) -> np.ndarray:
    """(S, n, U) per-unit values -> (S, B, n) means over units resampled with replacement, one
    draw for all RMs (the run's question bootstrap: a unit is shared by every RM)."""
    S, _, U = units.shape
    w = rng.multinomial(U, np.full(U, 1.0 / U), size=(S, n_boot)) / U
    return np.einsum("sbu,snu->sbn", w, units)


def _cells(spec: WorldSpec, n_sims: int, seed: int, n_boot: int = 200, chunk: int = 50) -> list[verdict.Cell]:
    """The family's cells of n_sims families drawn from the world (chunks of `chunk` to bound memory)."""
    rng = np.random.default_rng(stable_seed(seed, "verdict-world", repr(spec)))
    parts = [_draw(spec, min(chunk, n_sims - i), rng, n_boot) for i in range(0, n_sims, chunk)]
    return [verdict.Cell(*(np.concatenate([np.atleast_1d(getattr(p[j], f)) for p in parts])
                           for f in ("xa", "xb", "y", "var_meas"))) for j in range(len(parts[0]))]


def decide(spec: WorldSpec, n_sims: int, seed: int, fdr: float = 0.05, n_boot: int = 200,
           chunk: int = 50) -> verdict.Family:
    """`decide_family` on n_sims families drawn from the world."""
    return verdict.decide_family(_cells(spec, n_sims, seed, n_boot, chunk), fdr)


def rates(spec: WorldSpec, n_sims: int, seed: int, fdr: float = 0.05, n_boot: int = 200) -> dict:
    """Share of families with any cell decided "personalized" / "baseline", and either; `rm_level`:
    the same families decided by the same rule with the measurement variance left out (var_meas 0),
    what the rule without its second level would decide."""
    cells = _cells(spec, n_sims, seed, n_boot)
    fam = verdict.decide_family(cells, fdr)
    rm_only = verdict.decide_family([replace(c, var_meas=0.0) for c in cells], fdr)

    def share(f: verdict.Family, *which: str) -> float:
        return float(np.isin(f.verdict, which).any(-1).mean())

    return {"personalized": share(fam, verdict.PERSONALIZED), "baseline": share(fam, verdict.BASELINE),
            "decided": share(fam, verdict.PERSONALIZED, verdict.BASELINE),
            "rm_level": share(rm_only, verdict.PERSONALIZED, verdict.BASELINE),
            "n_sims": n_sims, "mcse": float(np.sqrt(fdr * (1 - fdr) / n_sims))}


NAMED = {
    "null (judge unrelated), 35 RMs": WorldSpec(judge_weight=None),
    "null (judge unrelated), 12 RMs": WorldSpec(n_rms=12, judge_weight=None),
    "null (symmetric, w 0.5), 35 RMs": WorldSpec(judge_weight=0.5),
    "null (symmetric, w 0.5), 12 RMs": WorldSpec(n_rms=12, judge_weight=0.5),
    "null (judge unrelated), 35 RMs, strong RMs differ": WorldSpec(judge_weight=None, strength_sd=1.5),
    "null (symmetric), 35 RMs, strong RMs differ": WorldSpec(judge_weight=0.5, strength_sd=1.5),
}


def graded(n_rms: int = 35, weights=(0.0, 0.2, 0.4, 0.5, 0.6, 0.8, 1.0)) -> dict:
    return {w: replace(WorldSpec(n_rms=n_rms), judge_weight=w) for w in weights}


def main(argv=None) -> None:  # python -m prbench.analysis.worlds
    import argparse

    ap = argparse.ArgumentParser(description="The verdict rule's size and power, simulated by the function "
                                             "the run calls")
    ap.add_argument("--sims", type=int, default=4000, help="families per size-grid row (default 4000)")
    ap.add_argument("--world-sims", type=int, default=1000, help="families per question-level world (default 1000)")
    args = ap.parse_args(argv)
    print(f"Test: {verdict.TEST_LABEL}; BH over the family at q = 0.05.")
    print(f"1. RM-level values: false-win rate of a family of 3 null cells ({args.sims} draws a row; "
          "levels 3 = both benchmarks cut to 3 levels, ties):")
    print("levels\tn\trho\trho_ab\tany cell\tper cell\tlimit (0.05 + 3 SE)")
    for r in power.size_grid(n_sims=args.sims):
        lim = 0.05 + 3 * r["mcse"]
        flag = "" if r["false_win"] <= lim else "\tABOVE"
        print(f"{r['levels']}\t{r['n']}\t{r['rho']}\t{r['rho_ab']}\t{r['false_win']:.4f}\t{r['per_cell']:.4f}\t"
              f"{lim:.4f}{flag}")
    print(f"2. Question-level worlds (prbench.analysis.worlds; {args.world_sims} families each, 2 cells):")
    print("world\tdecided\tpersonalized\tbaseline\tRM level alone (Williams)")
    for name, spec in NAMED.items():
        r = rates(spec, args.world_sims, seed=0)
        print(f"{name}\t{r['decided']:.3f}\t{r['personalized']:.3f}\t{r['baseline']:.3f}\t{r['rm_level']:.3f}")
    print("   graded world, 35 RMs (judge = w personal + (1 - w) general):")
    for w, spec in graded().items():
        r = rates(spec, args.world_sims // 2, seed=0)
        print(f"w {w}\tpersonalized {r['personalized']:.3f}\tbaseline {r['baseline']:.3f}")
    # config.yaml's family: BoN, PPO, GRPO x RewardBench, RM-Bench = 6 cells, centred between the paper's
    # reported Spearman coefficients (0.257, 0.371), exact values
    rows = power.power_rows([{"center": 0.3, "rho_ab": 0.5, "n": 5, "diff": 0.5}] * 6, 1000, 0.05, seed=0)
    for gap_in in ("all cells", "this cell"):
        need = ", ".join(f"gap {r['gap']:.1f}: {r['n_rms']} RMs" for r in rows[:10]
                         if r["quantity"] == "rms_needed" and r["gap_in"] == gap_in)
        print(f"3. config.yaml's family (6 cells, centre 0.3, rho_ab 0.5, exact values), 80% power, the gap in "
              f"{gap_in}: {need}")


if __name__ == "__main__":
    main()
