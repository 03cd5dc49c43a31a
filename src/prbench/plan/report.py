"""`python -m prbench.plan`: the plan of a config, printed (prbench.plan's docstring)."""
from __future__ import annotations

import argparse
import sys

import yaml

from ..downstream.ppo.memory import resource_limits
from . import ASSUMPTIONS, decidable, downstream_rms, family_power, job_counts, load_layered, method_rm_count, unpinned
from . import resources as RES
from .cost import SIZE_CLASSES, TEST_QUESTIONS, TRAIN_QUESTIONS, UNIT, stage_group, stages, u


def print_jobs(paths, directory) -> None:
    counts = job_counts(paths, directory)
    where = directory or "a fresh work folder"
    print(f"1. jobs (snakemake -n --configfiles {' '.join(map(str, paths))}, in {where}): {counts['total']} in all")
    for rule, n in counts.items():
        if rule != "total":
            print(f"   {rule:28s} {n:6d}")


def print_cost(cfg: dict) -> None:
    rows = stages(cfg, dict(TRAIN_QUESTIONS))
    total = sum(r["gpu_h"] for r in rows)
    print(f"2. H100 GPU-hours (prbench.plan.cost): total {total:.0f}")
    groups: dict = {}
    for r in rows:
        groups.setdefault(stage_group(r["stage"]), []).append(r)
    for g, rs in groups.items():
        n = f" ({len(rs)} RMs)" if rs[0]["rm"] else ""
        print(f"   per stage: {g + n:36s} {sum(r['gpu_h'] for r in rs):9.1f}")
    for _, label in SIZE_CLASSES:
        rs = [r for r in rows if r["size_class"] == label]
        if rs:
            rms, h = len({r["rm"] for r in rs}), sum(r["gpu_h"] for r in rs)
            print(f"   per RM size class {label:7s} ({rms:2d} RMs, their scoring and training) {h:9.1f}")
    shared = sum(r["gpu_h"] for r in rows if not r["rm"])
    print(f"   shared stages (retrieval, BoN sampling and judging, evaluation) {shared:9.1f}")
    used = list(dict.fromkeys(k for r in rows for k in r["units"]))
    for k in used:
        print(f"   unit {k} = {u(k):g}: {UNIT[k][1]}")
    n_test = sum(TEST_QUESTIONS[s] for s in cfg["data"]["personalized"]["subsets"])
    print(f"   data: personalized test {n_test:,} questions (measured: perf/bench_judge_cost.py); LaMP-QA train "
          f"prompts ASSUMED (prbench.plan.cost.TRAIN_QUESTIONS); benchmark token lengths partly ASSUMED (same module)")


def print_demo_cost(cfg: dict) -> None:
    print("2. GPU-hours: none. A demo config (demo.enabled) runs every job on the CPU, the models it trains "
          "included; its CPU time per stage, measured on both CPU kinds: perf/README.md (perf/demo_job_seconds.py "
          "on a finished run's job_times/)")


def print_demo_resources(cfg: dict) -> None:
    print(f"5. resources per job: 0 GPUs; the model jobs resources.cpu_mem_mb ({cfg['resources']['cpu_mem_mb']} MB) "
          "and 30 minutes (rules/common.smk), the tables and figures their rules' fixed 0.5-2 GB and 5-15 minutes")


def print_power(cfg: dict, n_sims: int | None) -> bool:
    cells, rows = family_power(cfg, n_sims)
    sims = rows[0]["n_sims"] if rows else 0
    print(f"3. power of the confirmatory family ({len(cells)} cells) under the verdict rule "
          f"(prbench.analysis.power.power_rows, {sims} simulations a point, 80% power, BH at q = "
          f"{cfg['correlation']['fdr']}); planning assumptions (no run yet):")
    for m, (v, src) in ASSUMPTIONS["center"].items():
        print(f"   centre {m}: {v} ({src})")
    for key in ("rho_ab", "var_meas"):
        print(f"   {key}: {ASSUMPTIONS[key][0]} ({ASSUMPTIONS[key][1]})")
    per = len(rows) // len(cells) if cells else 0
    for j, (c, _ok, why) in enumerate(decidable(cfg, cells)):
        mine = rows[j * per:(j + 1) * per]
        gap = {r["gap_in"]: r["gap"] for r in mine if r["quantity"] == "min_gap"}
        need = ", ".join(f"{r['gap']:.1f}: {_n(r['n_rms'])}" for r in mine
                         if r["quantity"] == "rms_needed" and r["gap_in"] == "all cells")
        print(f"   {c['policy']} {c['downstream']} personalized vs {c['baseline']}: {c['n']} RMs; "
              f"{why or 'decidable'}; smallest Spearman gap detected: {_g(gap.get('all cells'))} "
              f"(in every cell), {_g(gap.get('this cell'))} (this cell alone); RMs needed for gap {need}")
    can = bool(cells) and all(ok for _, ok, _ in decidable(cfg, cells))
    print("   verdict: " + ("the family CAN be decided at these RMs" if can else
                             "this configuration CANNOT DECIDE the paper's question: "
                             + ("no confirmatory cell" if not cells else
                                "; ".join(sorted({w for _, ok, w in decidable(cfg, cells) if not ok})))))
    return can


def _n(v) -> str:
    return "> 500" if v != v else str(int(v))


def _g(v) -> str:
    return "none up to 2.0" if v is None or v != v else f"{v:.2f}"


def print_unpinned(cfg: dict) -> None:
    rows = unpinned(cfg)
    print(f"4. hub entries with no pinned revision: {len(rows)} (`make lock` records the commit each loads)")
    for r in rows:
        print(f"   {r['key']}: {r['ref']} ({'locked ' + r['locked'] if r['locked'] else 'not locked'})")


def print_resources(cfg: dict) -> None:
    gpu_mem, _ = resource_limits(cfg)
    rows = RES.table(cfg)
    print(f"5. resources per job (prbench.plan.resources, what rules/common.smk requests), resources.gpu_mem_gb "
          f"{gpu_mem:g}; per job class and RM size class, the largest job (GPU GB: the job's planned GPU memory, in "
          "all for a sharded RM, the peak GPU for PPO and GRPO; time h: its SLURM runtime at the first attempt):")
    head = f"{'job class':18s} {'RM size':7s} {'RMs':>3s} {'GPUs':>5s} {'GPU GB':>7s} {'host GB':>7s} {'time h':>6s}"
    print(f"   {head}  sharding (RMs)  [largest]")
    for r in rows:
        gpus = "-".join(map(str, (r["gpus"][0], r["gpus"][-1]) if len(r["gpus"]) > 1 else r["gpus"])) or "-"
        modes = ", ".join(f"{m} ({n})" for m, n in r["sharding"].items()) or "-"
        print(f"   {r['job']:18s} {r['size']:7s} {r['rms']:3d} {gpus:>5s} {r['need_gb']:7.1f} {r['mem_gb']:7.0f} "
              f"{r['runtime_h']:6.1f}  {modes}  [{r['largest']}]")
        for p in r["refused"]:
            print(f"   refused: {p.why}")
    out = RES.outside_methods(cfg)
    for method, groups in out.items():
        for mode, names in groups.items():
            print(f"   {method} reward, downstream RMs outside {method.lower()}.rms that {mode}: {len(names)} "
                  f"({', '.join(names)})")
    print("   the judge's and the policy's jobs (prbench.plan.resources.shared_job; eval_policy: a pooled run's):")
    for p in RES.shared_jobs(cfg):
        print(f"   {p.job:18s} {p.model + ',':22s} {p.params_b:5.1f}B: {p.gpus} GPU(s), {p.need_gb:6.1f} GPU GB, "
              f"{p.mem_mb / 1000:4.0f} GB host, {(p.runtime_min or 0) / 60:5.1f} h, {p.sharding}")
    limit = RES.max_runtime(cfg)
    if limit is not None:
        over = [p for p in [*RES.plans(cfg), *RES.shared_jobs(cfg)] if (p.runtime_min or 0) > limit]
        print(f"   resources.max_runtime_min {limit:g}: every request capped at it; benchmark jobs above it split "
              f"into parts; other jobs planned above it: {', '.join(f'{p.job} {p.model}' for p in over) or 'none'}")
    for k, v in RES.MEMORY_SOURCES.items():
        print(f"   {k}: {v}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m prbench.plan", description=__doc__)
    ap.add_argument("--configfiles", "--configfile", nargs="+", default=["config.yaml"],
                    help="config files, layered in order (as snakemake --configfiles)")
    ap.add_argument("--directory", help="count the jobs left in this work folder (default: a fresh one, the whole run)")
    ap.add_argument("--sims", type=int, help="power simulations a point (default: correlation.power_simulations)")
    ap.add_argument("--no-jobs", action="store_true", help="skip the dry run")
    ap.add_argument("--merged", help="also write the layered, validated config here (for make prefetch / lock)")
    a = ap.parse_args(argv)
    cfg = load_layered(a.configfiles)
    down = downstream_rms(cfg)
    print(f"plan of {' + '.join(a.configfiles)}: {len(cfg['reward_models'])} reward models, {len(down)} downstream "
          f"(BoN); PPO {method_rm_count(cfg, 'ppo')}, GRPO {method_rm_count(cfg, 'grpo')}")
    if not a.no_jobs:
        print_jobs(a.configfiles, a.directory)
    if cfg["demo"]["enabled"]:
        print_demo_cost(cfg)
    else:
        print_cost(cfg)
    print_power(cfg, a.sims)
    print_unpinned(cfg)
    if cfg["demo"]["enabled"]:
        print_demo_resources(cfg)
    else:
        print_resources(cfg)
    if a.merged:
        with open(a.merged, "w", encoding="utf-8") as fh:
            yaml.safe_dump(cfg, fh, sort_keys=False)
        print(f"wrote the layered config to {a.merged}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
