"""perf/claim_power.py: the variance components behind the PPO claim's power, recovered from data made
with known components, read from the evaluation's judged files, and simulated worlds whose interval
width matches the design's analytic standard error."""
import importlib.util
import json

import numpy as np
import pytest
from helpers import REPO

spec = importlib.util.spec_from_file_location("claim_power", REPO / "perf" / "claim_power.py")
cp = importlib.util.module_from_spec(spec)
spec.loader.exec_module(cp)

TRUE = {"question": 0.002, "question_x_seed": 0.004, "question_x_answer": 0.03, "residual": 0.04, "seed": 0.0}


def _data(rng, Q=3000, S=3, J=8, comp=TRUE, delta=0.0):
    return (delta + rng.normal(0, np.sqrt(comp["question"]), (Q, 1, 1))
            + rng.normal(0, np.sqrt(comp["question_x_seed"]), (Q, S, 1))
            + rng.normal(0, np.sqrt(comp["question_x_answer"]), (Q, 1, J))
            + rng.normal(0, np.sqrt(comp["residual"]), (Q, S, J)))


def test_components_recover_the_generating_variances():
    got = cp.components(_data(np.random.default_rng(0)))
    for k in ("question_x_seed", "question_x_answer", "residual"):
        assert got[k] == pytest.approx(TRUE[k], rel=0.1), k
    assert got["question"] == pytest.approx(TRUE["question"], abs=0.0015)
    assert (got["Q"], got["S"], got["J"]) == (3000, 3, 8)
    # the answers' component is what the seeds share: swapping it into question x seed changes both estimates
    swapped = dict(TRUE, question_x_seed=0.03, question_x_answer=0.004)
    got2 = cp.components(_data(np.random.default_rng(1), comp=swapped))
    assert got2["question_x_seed"] == pytest.approx(0.03, rel=0.1)
    assert got2["question_x_answer"] == pytest.approx(0.004, rel=0.2)


def test_read_d_pairs_each_seed_with_the_base_answers(tmp_path):
    root = tmp_path / "results" / "ppo" / "demo_policy" / "rm_a"
    base = {"q1": [0.0, 0.5], "q2": [1.0, 0.0]}
    for s, sub in enumerate(["", "seed1", "seed2"]):
        (root / sub).mkdir(parents=True, exist_ok=True)
        rows = [{"question_id": q, "scores": [b[0] + s, b[1] + 2 * s], "base_scores": b} for q, b in base.items()]
        (root / sub / "eval_judged.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    d = cp.read_d(tmp_path, "demo_policy", "rm_a")
    assert d.shape == (2, 3, 2)
    assert d[:, :, 0].tolist() == [[0, 1, 2], [0, 1, 2]] and d[:, :, 1].tolist() == [[0, 2, 4], [0, 2, 4]]


@pytest.mark.parametrize("answers", [4, 16])
def test_simulated_interval_width_matches_the_analytic_standard_error(answers):
    """The questions-only bootstrap's width is the design's analytic standard error without a seeds' main
    effect; the claim's crossed interval is wider (it estimates the seeds' part with seeds - 1 degrees)."""
    comp = dict(TRUE, Q=90, S=3, J=4)
    var_q = (TRUE["question"] + TRUE["question_x_seed"] / 3
             + TRUE["question_x_answer"] / answers + TRUE["residual"] / (3 * answers))
    analytic = 2 * 1.96 * np.sqrt(var_q / 90)
    share, width = cp.simulate(comp, 0.0, answers, worlds=60, n_boot=500, boot_seed=3,
                               rng=np.random.default_rng(answers), rule="questions")
    assert width == pytest.approx(analytic, rel=0.08)
    assert 0.0 <= share <= 0.15  # no true difference: the side rarely holds
    share, width = cp.simulate(comp, 0.0, answers, worlds=200, n_boot=0, boot_seed=3,
                               rng=np.random.default_rng(answers))
    assert analytic < width < 1.4 * analytic and share <= 0.06


def test_read_d_keeps_the_judged_files_question_order(tmp_path):
    """The questions-only bootstrap resamples questions by position: the method table sees them in the first
    seed's file order, so read_d keeps it (questions missing from a seed are left out)."""
    root = tmp_path / "results" / "ppo" / "p" / "r"
    for sub, qs in (("", ["q9", "q1", "q5"]), ("seed1", ["q5", "q1", "q9", "q7"])):
        (root / sub).mkdir(parents=True, exist_ok=True)
        rows = [{"question_id": q, "scores": [int(q[1:])], "base_scores": [0]} for q in qs]
        (root / sub / "eval_judged.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert cp.read_d(tmp_path, "p", "r")[:, 0, 0].tolist() == [9, 1, 5]


def _grid_run(rng, Q=60, S=3, J=8, gain_steps=0):
    """Discrete judge scores on a grid of 1/3, mostly 0: the base's answers and S seeds' answers that share
    each slot's sampling noise (a slot's answers are alike), the seeds `gain_steps` grid steps better."""
    slot = rng.random((Q, 1, J)) < 0.3  # a good slot: every policy's answer there tends to score
    p = np.where(slot, 0.6, 0.1)
    base = (rng.random((Q, J)) < p[:, 0, :]) / 3
    trained = (rng.random((Q, S, J)) < p) / 3 + gain_steps / 3
    return base, trained


def test_relabelled_world_deals_each_slots_scores_and_plants_the_gain_on_the_grid():
    rng = np.random.default_rng(0)
    base, trained = _grid_run(rng, gain_steps=1)  # the run's seeds one whole step better than the base
    assert cp.score_step(base, trained) == pytest.approx(1 / 3)
    assert (trained - base[:, None, :]).mean() > 0.3
    worlds = np.array([cp.relabelled_world(base, trained, rng) for _ in range(400)])
    assert abs(worlds.mean()) < 0.01  # the run's gain is dealt away: no policy better than another
    # every difference is one of the slot's own: two of its S + 1 scores, on the grid
    pool = np.concatenate([base[:, None, :], trained], axis=1)
    spread = pool.max(axis=1) - pool.min(axis=1)
    assert (np.abs(worlds) <= spread[None, :, None, :] + 1e-12).all()
    assert np.allclose(worlds * 3, np.round(worlds * 3))
    # a planted gain: each trained answer one step up with probability gain / step
    planted = np.array([cp.relabelled_world(base, trained, rng, gain=0.05) for _ in range(400)])
    assert planted.mean() == pytest.approx(0.05, abs=0.01)
    assert np.allclose(planted * 3, np.round(planted * 3))
    with pytest.raises(ValueError, match="score step"):
        cp.relabelled_world(base, trained, rng, gain=0.5)


def test_relabelled_worlds_size_and_power_of_the_claims_rule():
    """On a discrete world like the demo's, the claim's crossed rule holds rarely without a gain and
    mostly with a large one."""
    base, trained = _grid_run(np.random.default_rng(1), Q=90)
    size, _ = cp.simulate_relabelled(base, trained, 0.0, worlds=300, n_boot=0, boot_seed=0,
                                     rng=np.random.default_rng(2))
    power, _ = cp.simulate_relabelled(base, trained, 0.08, worlds=100, n_boot=0, boot_seed=0,
                                      rng=np.random.default_rng(3))
    assert size <= 0.025 + 3 * (0.025 * 0.975 / 300) ** 0.5
    assert power >= 0.8


def test_read_scores_gives_the_base_once_and_each_seeds_answers(tmp_path):
    root = tmp_path / "results" / "ppo" / "p" / "r"
    for s, sub in enumerate(["", "seed1"]):
        (root / sub).mkdir(parents=True, exist_ok=True)
        rows = [{"question_id": q, "scores": [s, s + 1], "base_scores": [0.5, 1.5]} for q in ("qa", "qb")]
        (root / sub / "eval_judged.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    base, trained = cp.read_scores(tmp_path, "p", "r")
    assert base.tolist() == [[0.5, 1.5], [0.5, 1.5]]
    assert trained.shape == (2, 2, 2) and trained[0].tolist() == [[0, 1], [1, 2]]
    # a seed compared with other base answers than the first seed's is refused, naming its file
    rows = [{"question_id": q, "scores": [1, 2], "base_scores": [0.5, 0.0]} for q in ("qa", "qb")]
    (root / "seed1" / "eval_judged.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    with pytest.raises(ValueError, match=r"seed1/eval_judged.jsonl: base_scores of 2 question"):
        cp.read_scores(tmp_path, "p", "r")
