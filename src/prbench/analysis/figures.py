"""Figures of the analysis stage (matplotlib, Agg backend): each writes one PNG and one PDF.

1. `plot_accuracy`       accuracy per RM and subset/section, grouped bars with CI whiskers,
                         one panel per benchmark (personalized first, then the baselines).
2. `plot_bon_curves`     BoN mean judge score vs k (log2 axis) per RM with CI bands, oracle dashed,
                         random sample dotted; one panel per policy.
3. `plot_scatter`        benchmark accuracy vs downstream score per RM, one panel per benchmark
                         (one row per downstream signal), rho and tau in each panel title; RM
                         labels laid out without overlap (`place_labels`).
4. `plot_correlations`   each coefficient per benchmark with CI whiskers, one panel per downstream
                         signal. The signals of 3 and 4 are the downstream methods found in the
                         correlation table, in registry order (`prbench.downstream`).
5. `plot_training`       reward / KL / entropy per step of a trained-policy method (PPO, GRPO),
                         one line per RM, its reward rise in the legend.
"""
from __future__ import annotations

import logging
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from .. import downstream  # noqa: E402

logging.getLogger("fontTools").setLevel(logging.WARNING)  # PDF font subsetting is chatty at INFO

COEF_LABELS = {
    "spearman": "Spearman ρ",
    "kendall_tau_b": "Kendall τ-b",
    "weighted_tau": "weighted τ",
    "ndcg": "NDCG",
    "rbo": "RBO",
}
plt.rcParams.update({
    "font.size": 10, "axes.titlesize": 11, "axes.labelsize": 10, "legend.fontsize": 8,
    "xtick.labelsize": 9, "ytick.labelsize": 9, "figure.dpi": 100, "savefig.dpi": 150,
    "pdf.fonttype": 42,
})


# A line under every figure, set by the figure job: in a partial run the RMs left out and why
# (prbench.partial.describe); empty otherwise.
FOOTNOTE = ""


def _save(fig, png: str | Path, pdf: str | Path) -> None:
    if FOOTNOTE:
        fig.text(0.01, -0.02, FOOTNOTE, fontsize=7, ha="left", va="top", wrap=True, color="firebrick")
    for path in (png, pdf):
        Path(path).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(png, bbox_inches="tight")
    fig.savefig(pdf, bbox_inches="tight", metadata={"CreationDate": None})  # no clock: the same run, the same bytes
    plt.close(fig)


def _read_csv(path, required, what) -> pd.DataFrame:
    df = pd.read_csv(path)
    missing = [c for c in required if c not in df.columns]
    if missing:
        raise ValueError(f"{path}: {what} lacks column(s) {missing}")
    return df


def _colors(names) -> dict:
    cmap = plt.get_cmap("tab10")
    return {n: cmap(i % 10) for i, n in enumerate(names)}


def _err(values, lo, hi) -> np.ndarray:
    """Non-negative error-bar lengths; NaN CIs give no whisker."""
    v = np.asarray(values, float)
    low = np.nan_to_num(v - np.asarray(lo, float), nan=0.0).clip(min=0)
    high = np.nan_to_num(np.asarray(hi, float) - v, nan=0.0).clip(min=0)
    return np.vstack([low, high])


def _ordered(values, preferred) -> list:
    present = list(dict.fromkeys(values))
    return [v for v in preferred if v in present] + [v for v in present if v not in preferred]


# ---- 1. accuracy ---------------------------------------------------------------------------------


def plot_accuracy(accuracy_csv, png, pdf, rms=None, benchmarks=None) -> None:
    df = _read_csv(accuracy_csv, ["rm", "benchmark", "level", "group", "accuracy", "ci_low", "ci_high"],
                   "the accuracy table")
    rms = _ordered(df["rm"], rms or [])
    benches = _ordered(df["benchmark"], benchmarks or ["personalized"])
    fig, axes = plt.subplots(len(benches), 1, figsize=(max(8, 1.3 * len(rms) + 3), 3.4 * len(benches)),
                             squeeze=False)
    for ax, bench in zip(axes[:, 0], benches):
        sub = df[df["benchmark"] == bench]
        # One bar group per subset (personalized) or section (baselines), plus the overall bar.
        # The personalized benchmark repeats its subsets as sections, and baselines also have
        # finer subset rows, so select one level explicitly to keep (rm, group) unique.
        detail = "subset" if bench == "personalized" else "section"
        if detail not in set(sub["level"]):
            detail = "subset"
        sub = sub[sub["level"].isin([detail, "overall"])].copy()
        sub.loc[sub["level"] == "overall", "group"] = "overall"
        groups = [g for g in dict.fromkeys(sub.loc[sub["level"] != "overall", "group"])] + ["overall"]
        groups = [g for g in groups if g in set(sub["group"])]
        width = 0.8 / max(len(groups), 1)
        cmap = plt.get_cmap("tab10" if len(groups) <= 10 else "tab20")
        x = np.arange(len(rms))
        for j, g in enumerate(groups):
            rows = sub[sub["group"] == g].set_index("rm").reindex(rms)
            is_overall = g == "overall"
            ax.bar(x + (j - (len(groups) - 1) / 2) * width, rows["accuracy"], width,
                   yerr=_err(rows["accuracy"], rows["ci_low"], rows["ci_high"]), capsize=2,
                   label=_short(g), color="0.25" if is_overall else cmap(j), edgecolor="black", linewidth=0.4,
                   error_kw={"elinewidth": 0.8})
        ax.axhline(0.5, color="grey", linestyle=":", linewidth=1)
        ax.set_xticks(x, rms, rotation=20, ha="right")
        ax.set_ylim(0, 1.05)
        ax.set_ylabel("accuracy")
        if bench == "personalized":
            title = "Personalized benchmark: accuracy per RM and subset"
        else:
            title = f"Baseline '{bench}': accuracy per RM and section"
        ax.set_title(f"{title} (95% CI; dotted line = chance)")
        ax.legend(loc="center left", bbox_to_anchor=(1.01, 0.5), frameon=False)
    fig.tight_layout()
    _save(fig, png, pdf)


def _short(name: str, width: int = 40) -> str:
    name = str(name).replace("_and_", " & ").replace("_", " ")
    return name if len(name) <= width else name[: width - 1] + "…"


# ---- 2. BoN curves -------------------------------------------------------------------------------


def plot_bon_curves(bon_csv, png, pdf, rms=None, estimator: str = "expected") -> None:
    df = _read_csv(bon_csv, ["policy", "rm", "estimator", "k", "mean", "ci_low", "ci_high"], "the BoN table")
    if "subset" in df.columns:  # the pooled rows (subset `all`); per-subset rows are in the table only
        df = df[df["subset"].astype(str) == "all"]
    sub = df[df["estimator"].isin([estimator])]
    if sub.empty:
        sub = df
    policies = list(dict.fromkeys(df["policy"]))
    names = _ordered([r for r in df["rm"] if r not in ("oracle", "random")], rms or [])
    colors = _colors(names)
    fig, axes = plt.subplots(1, len(policies), figsize=(7.5 * len(policies), 5), squeeze=False)
    for ax, policy in zip(axes[0], policies):
        p = sub[sub["policy"] == policy]
        for rm in names + ["oracle", "random"]:
            rows = p[p["rm"] == rm].sort_values("k")
            if rows.empty:  # oracle / random may be stored under their own estimator name
                rows = df[(df["policy"] == policy) & (df["rm"] == rm)].sort_values("k")
                rows = rows.drop_duplicates("k")
            if rows.empty:
                continue
            style = {"oracle": dict(color="black", linestyle="--", linewidth=1.8),
                     "random": dict(color="grey", linestyle=":", linewidth=1.5)}.get(
                rm, dict(color=colors.get(rm), linewidth=1.6, marker="o", markersize=3))
            ax.plot(rows["k"], rows["mean"], label=rm, **style)
            ax.fill_between(rows["k"], rows["ci_low"], rows["ci_high"], color=style["color"], alpha=0.12,
                            linewidth=0)
        ks = sorted(set(p["k"])) if not p.empty else sorted(set(df["k"]))
        ax.set_xscale("log", base=2)
        ax.set_xticks(ks, [str(int(k)) for k in ks])
        ax.set_xlabel("k (samples; log2 axis)")
        ax.set_ylabel("mean judge score (0-2)")
        ax.set_title(f"Best-of-k, policy {policy} ({estimator} estimator, 95% CI bands)")
        ax.grid(alpha=0.3)
        ax.legend(loc="center left", bbox_to_anchor=(1.01, 0.5), frameon=False)
    fig.tight_layout()
    _save(fig, png, pdf)


# ---- 3. scatter ----------------------------------------------------------------------------------


def _downstream_rows(policy, method, estimator, measure, k):
    def pick(df):
        m = (df["policy"] == policy) & (df["downstream"] == method) & (df["measure"] == measure)
        m &= (df["estimator"] == estimator)
        if k is not None:
            m &= (df["k"] == k)
        else:
            m &= df["k"].isna()
        return df[m]

    return pick


def _signals(corr: pd.DataFrame, signals: dict | None = None) -> list[tuple[str, str, str, str, int | None]]:
    """The downstream signals shown in figures 3 and 4: per policy, one per downstream method in the
    data, in registry order (`prbench.downstream`); `signals` {method: {"estimator", "k"}} picks the
    method's estimator and k (default: none, the method's only one)."""
    signals = signals or {}
    out = []
    for policy in dict.fromkeys(corr["policy"]):
        present = corr.loc[corr["policy"] == policy, "downstream"]
        for method in downstream.ordered(list(present)):
            sig = signals.get(method) or {}
            est, k = str(sig.get("estimator") or ""), sig.get("k")
            detail = ", ".join(x for x in (est, f"k={k}" if k is not None else "") if x)
            name = downstream.label(method) + (f" ({detail})" if detail else "")
            out.append((f"{name} {policy}", policy, method, est, None if k is None else int(k)))
    return out


def _overlaps(box, others, pad: float) -> bool:
    return any(box.x0 < o.x1 + pad and o.x0 < box.x1 + pad and box.y0 < o.y1 + pad and o.y0 < box.y1 + pad
               for o in others)


def place_labels(ax, points, fontsize: float = 8, pad: float = 1.5, rings: int = 12, draw: bool = True):
    """Label each point (name, x, y) of `ax` so that no two labels' rendered boxes overlap and no
    label covers a point's marker: each label, in order of x then y, takes the first free place
    among offsets on rings of growing radius around its point (right, above, left, below, then
    the diagonals), judged on the boxes the renderer draws (`get_window_extent`); a label placed
    away from its point gets a thin leader line. Deterministic (no randomness, fixed order).
    Call after the figure's layout is final (tight_layout), as moving axes moves the points; the
    figure is drawn first unless `draw` is false (a caller labelling several panels draws once:
    labels in one panel move no other panel). Returns the annotations."""
    from matplotlib.transforms import Bbox

    fig = ax.figure
    if draw:
        fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    px = fig.dpi / 72.0
    marker = 4.0 * px  # s=36 markers: 6 pt across
    dots = [ax.transData.transform((xv, yv)) for _, xv, yv in points]
    taken = [Bbox.from_extents(dx - marker, dy - marker, dx + marker, dy + marker) for dx, dy in dots]
    frame = ax.get_window_extent(renderer)
    order = sorted(range(len(points)), key=lambda i: (points[i][1], points[i][2], points[i][0]))
    texts = [None] * len(points)
    for i in order:
        name, xv, yv = points[i]
        t = ax.annotate(name, (xv, yv), textcoords="offset points", xytext=(4, 3), fontsize=fontsize,
                        ha="left", va="bottom", zorder=4)
        w, h = (v / px for v in t.get_window_extent(renderer).size)
        best = fallback = None
        for ring in range(rings):
            r = 3 + 5 * ring
            cands = [(r, -h / 2), (-w / 2, r), (-w - r, -h / 2), (-w / 2, -h - r),
                     (r * 0.7, r * 0.7), (-w - r * 0.7, r * 0.7), (-w - r * 0.7, -h - r * 0.7), (r * 0.7, -h - r * 0.7)]
            for off in cands:
                t.xyann = off
                box = t.get_window_extent(renderer)
                if _overlaps(box, taken, pad):
                    continue
                if frame.x0 <= box.x0 and box.x1 <= frame.x1 and frame.y0 <= box.y0 and box.y1 <= frame.y1:
                    best = off
                    break
                fallback = fallback or off
            if best is not None:
                break
        # no free place inside the panel: the first free one outside it (the saved figure grows to fit)
        t.xyann = best or fallback or (4, 3)
        ax_, ay_ = _anchor(t.xyann, w, h)
        if np.hypot(ax_, ay_) > 10:
            ax.annotate("", (xv, yv), xytext=(ax_, ay_), textcoords="offset points",
                        arrowprops={"arrowstyle": "-", "color": "0.6", "lw": 0.6, "shrinkA": 0, "shrinkB": 3})
        taken.append(t.get_window_extent(renderer))
        texts[i] = t
    return texts


def _anchor(off, w, h):
    """The point of a label box (offset `off`, size w x h points) nearest to its data point (0, 0)."""
    x0, y0 = off
    return (min(max(0.0, x0), x0 + w), min(max(0.0, y0), y0 + h))


def plot_scatter(inputs_csv, corr_csv, png, pdf, signals: dict | None = None, measure: str = "judge_score"):
    """Figure 3; returns the (closed) figure, whose RM labels `place_labels` laid out."""
    inputs = _read_csv(inputs_csv, ["rm", "kind", "benchmark", "level", "group", "policy", "downstream",
                                    "estimator", "measure", "k", "value", "ci_low", "ci_high"], "the inputs table")
    corr = _read_csv(corr_csv, ["benchmark", "level", "group", "policy", "downstream", "estimator", "measure", "k",
                                "coefficient", "value"], "the correlation table")
    for df in (inputs, corr):
        df["estimator"] = df["estimator"].fillna("")
    bench = inputs[(inputs["kind"] == "benchmark") & (inputs["level"] == "overall")]
    benches = _ordered(bench["benchmark"], ["personalized"])
    down = inputs[inputs["kind"] == "downstream"]
    signals = _signals(corr, signals)
    rms = list(dict.fromkeys(inputs["rm"]))
    colors = _colors(rms)
    fig, axes = plt.subplots(len(signals), len(benches), figsize=(5.2 * len(benches), 4.3 * len(signals)),
                             squeeze=False)
    labelled = []
    for i, (label, policy, dname, est, kk) in enumerate(signals):
        pick = _downstream_rows(policy, dname, est, measure, kk)
        y = pick(down).set_index("rm").reindex(rms)
        c = pick(corr[corr["level"] == "overall"])
        for j, b in enumerate(benches):
            ax = axes[i, j]
            x = bench[bench["benchmark"] == b].set_index("rm").reindex(rms)
            ax.errorbar(x["value"], y["value"], xerr=_err(x["value"], x["ci_low"], x["ci_high"]),
                        yerr=_err(y["value"], y["ci_low"], y["ci_high"]), fmt="none", ecolor="0.7", elinewidth=0.8)
            shown = [rm for rm in rms if np.isfinite(x.loc[rm, "value"]) and np.isfinite(y.loc[rm, "value"])]
            for rm in shown:
                ax.scatter(x.loc[rm, "value"], y.loc[rm, "value"], color=colors[rm], s=36, zorder=3)
            labelled.append((ax, [(rm, x.loc[rm, "value"], y.loc[rm, "value"]) for rm in shown]))
            cb = c[c["benchmark"] == b].set_index("coefficient")["value"]
            rho = cb.get("spearman", np.nan)
            tau = cb.get("kendall_tau_b", np.nan)
            ax.set_title(f"{b}: ρ = {rho:.2f}, τ = {tau:.2f}")
            ax.set_xlabel(f"{b} accuracy (overall)")
            ax.set_ylabel(f"{label}\n{measure.replace('_', ' ')}")
            ax.grid(alpha=0.3)
            ax.margins(x=0.18, y=0.12)
    fig.tight_layout()
    fig.canvas.draw()  # once for every panel: a full draw per panel made this figure's cost grow as panels squared
    for ax, points in labelled:
        place_labels(ax, points, draw=False)
    _save(fig, png, pdf)
    return fig


# ---- 4. correlation comparison -------------------------------------------------------------------


def plot_correlations(corr_csv, png, pdf, signals: dict | None = None, measure: str = "judge_score") -> None:
    corr = _read_csv(corr_csv, ["benchmark", "level", "group", "policy", "downstream", "estimator", "measure", "k",
                                "coefficient", "value", "ci_low", "ci_high"], "the correlation table")
    corr["estimator"] = corr["estimator"].fillna("")
    overall = corr[corr["level"] == "overall"]
    benches = _ordered(overall["benchmark"], ["personalized"])
    coefs = _ordered(overall["coefficient"], list(COEF_LABELS))
    signals = _signals(corr, signals)
    colors = _colors(benches)
    panel_w = max(5.5, 0.55 * len(coefs) * max(len(benches), 2) + 1.5)
    fig, axes = plt.subplots(1, len(signals), figsize=(panel_w * len(signals), 4.6), squeeze=False, sharey=True)
    width = 0.8 / max(len(benches), 1)
    for ax, (label, policy, dname, est, kk) in zip(axes[0], signals):
        sub = _downstream_rows(policy, dname, est, measure, kk)(overall)
        x = np.arange(len(coefs))
        for j, b in enumerate(benches):
            rows = sub[sub["benchmark"] == b].set_index("coefficient").reindex(coefs)
            ax.bar(x + (j - (len(benches) - 1) / 2) * width, rows["value"], width,
                   yerr=_err(rows["value"], rows["ci_low"], rows["ci_high"]), capsize=3, color=colors[b],
                   edgecolor="black", linewidth=0.4, label=b)
        ax.axhline(0, color="black", linewidth=0.8)
        ax.set_xticks(x, [COEF_LABELS.get(c, c) for c in coefs])
        ax.set_ylim(-1.05, 1.1)
        ax.set_title(f"vs {label} ({measure.replace('_', ' ')})")
        ax.grid(axis="y", alpha=0.3)
    axes[0, 0].set_ylabel("coefficient across RMs (95% CI)")
    axes[0, -1].legend(title="benchmark", loc="lower right")
    fig.tight_layout()
    _save(fig, png, pdf)


def plot_forest(comparisons: pd.DataFrame, png, pdf) -> None:
    """The confirmatory cells' Spearman differences (personalized - baseline) with the verdict test's
    own interval at the family's level, one row per cell, labelled with its verdict."""
    conf = comparisons[comparisons["family"] == "confirmatory"].reset_index(drop=True)
    fig, ax = plt.subplots(figsize=(7.5, 1.2 + 0.55 * max(len(conf), 1)))
    labels = []
    for i, r in conf.iterrows():
        y = len(conf) - 1 - i
        color = {"personalized": "tab:green", "baseline": "tab:red"}.get(r["verdict"], "0.35")
        if np.isfinite(r["ci_low"]):
            ax.plot([r["ci_low"], r["ci_high"]], [y, y], color=color, linewidth=2.2, solid_capstyle="butt")
        ax.plot([r["diff"]], [y], "o", color=color, markersize=7)
        k = "" if pd.isna(r["k"]) else f" k={int(r['k'])}"
        labels.append((y, f"{r['downstream']}{k} vs {r['benchmark_b']}: {r['verdict']}"))
    ax.axvline(0, color="black", linewidth=0.8)
    ax.set_yticks([y for y, _ in labels], [t for _, t in labels])
    ax.set_xlim(-2.05, 2.05)
    ax.set_ylim(-0.7, max(len(conf), 1) - 0.3)
    ax.set_xlabel("Spearman difference, personalized - baseline (interval: the test's, family level)")
    ax.grid(axis="x", alpha=0.3)
    if conf.empty:
        ax.text(0, 0, "no confirmatory cell", ha="center", va="center")
    fig.tight_layout()
    _save(fig, png, pdf)


# ---- 5. training curves of a trained-policy method (PPO, GRPO) -----------------------------------


CHANGE = "reward change (first-quarter SDs)"  # plot_training's unit-free reward panel


def plot_training(train_logs, png, pdf, smooth: int = 1, label: str = "PPO") -> None:
    """train_logs: (policy, rm, path of train_log.csv). Needs step, reward, kl; entropy if present.
    Each run's legend entry gives its reward rise (last quarter of the steps minus the first, with
    Welch's 95% interval over the quarters' rollouts: `prbench.downstream.reward_rise`, the
    `reward_rise` of tables/{method}.csv). Beside the raw reward (each RM's own scale), the panel
    `CHANGE` puts every run on one scale: its reward minus its first quarter's mean, in SDs of the
    first quarter's rollouts (`reward_change`; left out when no log has reward_sd / reward_n)."""
    frames = []
    for policy, rm, path in train_logs:
        df = _read_csv(path, ["step", "reward", "kl"], f"the {label} training log")
        rise, lo, hi = downstream.training_reward_rise([path])
        steps = df.sort_values("step", kind="stable")
        spread = steps.reindex(columns=["reward", "reward_sd", "reward_n"]).astype(float)
        change = pd.Series(downstream.training_reward_change(spread), index=steps.index)
        df = df.assign(policy=policy, rm=rm, legend=f"{rm}: rise {rise:+.3g} [{lo:+.3g}, {hi:+.3g}]",
                       **{CHANGE: change})
        frames.append(df)
    if not frames:
        raise ValueError(f"plot_training: no {label} training logs given (is the method enabled?)")
    data = pd.concat(frames, ignore_index=True)
    metrics = [m for m in ("reward", CHANGE, "kl", "entropy") if m in data.columns and data[m].notna().any()]
    policies = list(dict.fromkeys(data["policy"]))
    colors = _colors(list(dict.fromkeys(data["rm"])))
    fig, axes = plt.subplots(len(policies), len(metrics), figsize=(4.6 * len(metrics), 3.6 * len(policies)),
                             squeeze=False)
    for i, policy in enumerate(policies):
        for j, m in enumerate(metrics):
            ax = axes[i, j]
            for rm, rows in data[data["policy"] == policy].groupby("rm", sort=False):
                rows = rows.sort_values("step")
                y = rows[m].rolling(max(1, smooth), min_periods=1).mean()
                ax.plot(rows["step"], y, label=rows["legend"].iloc[0], color=colors[rm], linewidth=1.4)
            ax.set_xlabel(f"{label} step")
            ax.set_ylabel(m)
            ax.set_title(f"{policy}: {m}")
            ax.grid(alpha=0.3)
    axes[0, -1].legend(loc="center left", bbox_to_anchor=(1.01, 0.5), frameon=False)
    fig.tight_layout()
    _save(fig, png, pdf)

