"""The PPO settings where the authors' verl and trl differ (ppo.gae_lambda, ppo.cliprange_value,
ppo.lr_scheduler, ppo.weight_decay) reach trl's PPOConfig and the optimizer trl runs; unit level,
no training."""
import pytest
import torch

from prbench.config import entry_with_defaults
from prbench.downstream.ppo.train import TRAIN_KEYS, _PPORun, build_optimizer, resolve_settings

BASE = dict(actor_lr=1e-3, critic_lr=2e-3, batch_size=8, mini_batch_size=4, ppo_epochs=1, total_episodes=40,
            response_length=10, temperature=1.0, kl_coef=0.0)
VERL = dict(gae_lambda=1.0, cliprange_value=0.5, lr_scheduler="constant", weight_decay=0.01)


def _trl_config(cfg):
    s = resolve_settings(cfg, 20)
    return _PPORun("unused", None, [], "unused", s, 0, "fp", False, "cpu")._ppo_config()


def test_schema_defaults_are_trls_own():
    """The schema's defaults equal trl's PPOConfig defaults (the project's behaviour before the keys)."""
    from trl.experimental.ppo import PPOConfig

    d = entry_with_defaults({}, "ppo")
    fields = PPOConfig.__dataclass_fields__
    assert d["gae_lambda"] == fields["lam"].default
    assert d["cliprange_value"] == fields["cliprange_value"].default
    assert d["lr_scheduler"] == fields["lr_scheduler_type"].default
    assert d["weight_decay"] == fields["weight_decay"].default


@pytest.mark.parametrize("keys", [{}, VERL, dict(gae_lambda=0.9, cliprange_value=0.3)])
def test_values_reach_trls_config(keys):
    args = _trl_config({**BASE, **keys})
    want = {**entry_with_defaults({}, "ppo"), **keys}
    assert args.lam == want["gae_lambda"]
    assert args.cliprange_value == want["cliprange_value"]
    assert str(getattr(args.lr_scheduler_type, "value", args.lr_scheduler_type)) == want["lr_scheduler"]
    assert args.weight_decay == want["weight_decay"]


def test_keys_are_part_of_the_checkpoint_fingerprint():
    """A changed value does not resume another value's checkpoint."""
    assert {"gae_lambda", "cliprange_value", "lr_scheduler", "weight_decay"} <= set(TRAIN_KEYS)


def _lrs_after(cfg, steps):
    s = resolve_settings(cfg, 20)  # 5 steps
    policy, value = torch.nn.Linear(3, 2), torch.nn.Linear(3, 1)
    opt, sched = build_optimizer(policy, value, s)
    for _ in range(steps):
        opt.step()
        sched.step()
    return opt, [g["lr"] for g in opt.param_groups]


def test_constant_schedule_keeps_both_rates_and_linear_decays_them():
    opt, lrs = _lrs_after({**BASE, **VERL}, 4)
    assert lrs == [1e-3, 2e-3]
    assert [g["weight_decay"] for g in opt.param_groups] == [0.01, 0.01]
    opt, lrs = _lrs_after(BASE, 4)  # trl's linear decay over 5 steps: 1/5 of each rate left
    assert lrs == pytest.approx([1e-3 / 5, 2e-3 / 5])
    assert [g["weight_decay"] for g in opt.param_groups] == [0.0, 0.0]


def test_weight_decay_shrinks_weights_without_gradient():
    """AdamW's decoupled decay acts: with a zero gradient, weights shrink by lr * weight_decay per step."""
    s = resolve_settings({**BASE, **VERL}, 20)
    policy, value = torch.nn.Linear(3, 2), torch.nn.Linear(3, 1)
    w0 = policy.weight.detach().clone()
    opt, _ = build_optimizer(policy, value, s)
    for p in list(policy.parameters()) + list(value.parameters()):
        p.grad = torch.zeros_like(p)
    opt.step()
    torch.testing.assert_close(policy.weight.detach(), w0 * (1 - 1e-3 * 0.01))



# ---- ppo.eval_posts: the evaluation prompts' post count ---------------------------------------
def _rows_with_posts(n=6, posts=4):
    from ppo_tiny import make_prompt_rows

    rows = make_prompt_rows(n, subsets=("A", "B"))
    for r in rows:
        r["profile"] = [f"{r['question_id']} post {i}" for i in range(posts)]
    return rows


def test_eval_posts_keeps_the_best_ranked_posts_and_reaches_base_answers(tmp_path, monkeypatch):
    from prbench.downstream import evaluation
    from prbench.io import write_jsonl

    write_jsonl(tmp_path / "eval.jsonl", _rows_with_posts())
    rows = evaluation.eval_prompt_rows(tmp_path / "eval.jsonl", {"eval_posts": 2})
    assert [r["profile"] for r in rows[:1]] == [["q0 post 0", "q0 post 1"]]
    assert all(len(r["profile"]) == 4 for r in evaluation.eval_prompt_rows(tmp_path / "eval.jsonl", {}))
    only_b = evaluation.eval_prompt_rows(tmp_path / "eval.jsonl", {"eval_posts": 1}, subset="B")
    assert {r["subset"] for r in only_b} == {"B"} and len(only_b) == 3
    with pytest.raises(ValueError, match="subset 'C'"):
        evaluation.eval_prompt_rows(tmp_path / "eval.jsonl", {}, subset="C")
    seen = []
    monkeypatch.setattr(evaluation, "policy_answers", lambda path, prompts, *a, **k: seen.extend(prompts) or [])
    evaluation.write_base_answers("unused", tmp_path / "eval.jsonl", tmp_path / "base.jsonl", {"eval_posts": 3}, 0)
    assert len(seen) == 6 and all(len(r["profile"]) == 3 for r in seen)


def test_eval_posts_over_top_k_is_a_config_error():
    import copy
    from pathlib import Path

    import yaml

    from prbench.config import ConfigError
    from prbench.validation import check_config

    cfg = yaml.safe_load((Path(__file__).parents[1] / "configs" / "demo.yaml").read_text())
    bad = copy.deepcopy(cfg)
    bad["ppo"]["eval_posts"] = cfg["retriever"]["top_k"] + 1
    with pytest.raises(ConfigError, match="ppo.eval_posts"):
        check_config(bad)
    ok = copy.deepcopy(cfg)
    ok["ppo"]["eval_posts"] = cfg["retriever"]["top_k"]
    check_config(ok)


# ---- ppo.long_prompts / grpo.long_prompts: trim vs filter --------------------------------------
@pytest.fixture(scope="module")
def tiny_policy(tmp_path_factory):
    from ppo_tiny import make_policy_dir

    return make_policy_dir(tmp_path_factory.mktemp("policy") / "policy")


def _lengths(tok, rows):
    from prbench.downstream.reward_adapter import render_policy_prompt, tokenize_prompt

    return [len(tokenize_prompt(tok, render_policy_prompt(tok, r))) for r in rows]


def test_trim_drops_posts_and_filter_drops_prompts(tiny_policy):
    from transformers import AutoTokenizer

    from prbench.downstream.prompt_rows import cap_prompt_rows, filter_long_prompts

    tok = AutoTokenizer.from_pretrained(str(tiny_policy))
    rows = _rows_with_posts(8, posts=4)
    rows[3]["profile"] = rows[3]["profile"] * 6  # two prompts far longer than the others
    rows[6]["profile"] = rows[6]["profile"] * 6
    lengths = _lengths(tok, rows)
    limit = sorted(lengths)[-3]  # the two long prompts are over it, the others fit
    assert sum(n > limit for n in lengths) == 2

    trimmed, st = cap_prompt_rows(rows, tok, limit, "trim")
    assert len(trimmed) == 8 and st["prompts_capped"] == 2 and st["prompts_filtered"] == 0
    assert max(_lengths(tok, trimmed)) <= limit
    assert trimmed[3]["profile"] == rows[3]["profile"][:len(trimmed[3]["profile"])]  # the best-ranked stay

    kept, st = cap_prompt_rows(rows, tok, limit, "filter")
    assert [r["question_id"] for r in kept] == [r["question_id"] for i, r in enumerate(rows) if i not in (3, 6)]
    assert st == {"prompts_capped": 0, "posts_dropped": 0, "prompts_filtered": 2}
    assert kept == [rows[i] for i in (0, 1, 2, 4, 5, 7)]  # untouched

    kept2, st2 = filter_long_prompts(rows, str(tiny_policy), False, limit, "filter", "grpo")
    assert kept2 == kept and st2 == {"prompts_filtered": 2}
    assert filter_long_prompts(rows, str(tiny_policy), False, limit, "trim", "grpo") == (rows, {"prompts_filtered": 0})
    with pytest.raises(ValueError, match="grpo.max_prompt_tokens / grpo.long_prompts"):
        filter_long_prompts(rows, str(tiny_policy), False, 3, "filter", "grpo")
    with pytest.raises(ValueError, match="ppo.long_prompts"):
        cap_prompt_rows(rows, tok, limit, "drop")


def test_ppo_filter_counts_in_the_summary_and_trains_on_the_kept_prompts(tiny_policy, tmp_path):
    """ppo.long_prompts filter: the run trains one pass over the kept prompts and its summary
    counts the filtered ones; ppo per subset (train_ppo's `subset`) keeps only that subset's."""
    from ppo_tiny import LengthRM
    from transformers import AutoTokenizer

    from prbench.downstream.ppo.train import train_ppo
    from prbench.io import write_jsonl

    tok = AutoTokenizer.from_pretrained(str(tiny_policy))
    rows = _rows_with_posts(10, posts=2)
    for i in (1, 4):
        rows[i]["profile"] = rows[i]["profile"] * 20
    limit = sorted(_lengths(tok, rows))[-3]
    write_jsonl(tmp_path / "train.jsonl", rows)
    cfg = dict(BASE, batch_size=2, mini_batch_size=2, total_episodes=None, response_length=4,
               max_prompt_tokens=limit, long_prompts="filter")
    out = tmp_path / "run"
    s = train_ppo(str(tiny_policy), None, tmp_path / "train.jsonl", out, out / "model", out / "log.csv", cfg, seed=0,
                  rm=LengthRM(), device="cpu", subset="B")  # B: rows 1, 3, 5, 7, 9; row 1 is too long
    assert s["prompts_filtered"] == 1 and s["prompts"] == 4
    assert s["episodes"] == 4 and s["steps"] == 2
    assert s["prompts_capped"] == 0


# ---- ppo.per_subset: the tables over a (policy, rm)'s per-subset runs ----------------------------
def test_per_subset_runs_pool_question_weighted_and_report_each_subset(tmp_path):
    import numpy as np

    from prbench.downstream import judged_measures
    from prbench.downstream.evaluation import outcome, policy_table_rows
    from prbench.io import write_jsonl

    def judged(subset, scores):
        return [{"question_id": f"{subset}{i}", "subset": subset, "answer": "x", "score": s, "base_score": 1.0,
                 "outcome": outcome(s, 1.0)} for i, s in enumerate(scores)]

    a, b = [2.0, 2.0, 0.0, 2.0], [0.0, 1.0]  # 4 questions in A, 2 in B
    write_jsonl(tmp_path / "A.jsonl", judged("A", a))
    write_jsonl(tmp_path / "B.jsonl", judged("B", b))
    runs = {("pol", "rm"): [tmp_path / "A.jsonl", tmp_path / "B.jsonl"]}
    table = policy_table_rows(runs, 100, 0).set_index("subset")
    assert list(table.index) == ["all", "A", "B"]
    assert table.loc["all", "mean"] == pytest.approx(np.mean(a + b))  # question-weighted, not (1.5 + 0.5) / 2
    assert table.loc["all", "n_questions"] == 6
    assert table.loc["A", "mean"] == pytest.approx(1.5) and table.loc["B", "mean"] == pytest.approx(0.5)
    assert (table.loc["A", "win_rate"], table.loc["B", "loss_rate"]) == (0.75, 0.5)
    m = judged_measures("ppo", runs)
    scores = m[m["measure"] == "judge_score"]
    assert list(scores["subset"]) == ["A"] * 4 + ["B"] * 2 and scores["value"].mean() == pytest.approx(np.mean(a + b))
    with pytest.raises(ValueError, match="also judged in"):  # the same question from two runs
        judged_measures("ppo", {("pol", "rm"): [tmp_path / "A.jsonl", tmp_path / "A.jsonl"]})
    with pytest.raises(ValueError, match="more than one"):
        policy_table_rows({("pol", "rm"): [tmp_path / "A.jsonl", tmp_path / "A.jsonl"]}, 10, 0)


AUTHORS_MORE = dict(adam_eps=1e-8, vf_coef=1.0, max_grad_norm=1.0, drop_last=True)


def test_more_verl_defaults_reach_trl_and_the_optimizer():
    """ppo.vf_coef reaches trl's PPOConfig, ppo.adam_eps the AdamW both groups run; the schema's
    defaults are the project's earlier behaviour (trl's vf_coef, eps 1e-5, no clipping, ceil)."""
    d = entry_with_defaults({}, "ppo")
    assert (d["adam_eps"], d["vf_coef"], d["max_grad_norm"], d["drop_last"]) == (1e-5, 0.1, None, False)
    assert _trl_config({**BASE, **AUTHORS_MORE}).vf_coef == 1.0
    assert _trl_config(BASE).vf_coef == 0.1
    s = resolve_settings({**BASE, **AUTHORS_MORE}, 20)
    opt, _ = build_optimizer(torch.nn.Linear(3, 2), torch.nn.Linear(3, 1), s)
    assert [g["eps"] for g in opt.param_groups] == [1e-8, 1e-8]
    assert {"adam_eps", "vf_coef", "max_grad_norm", "drop_last"} <= set(TRAIN_KEYS)


def _grad_norms_after_step(cfg):
    torch.manual_seed(0)
    policy, value = torch.nn.Linear(4, 3), torch.nn.Linear(4, 1)
    opt, _ = build_optimizer(policy, value, resolve_settings(cfg, 20))
    x = torch.randn(8, 4)
    (100 * policy(x).sum() + 0.001 * value(x).sum()).backward()
    opt.step()  # the pre-hook clips before AdamW updates
    return [torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(p.grad) for p in g["params"]])).item()
            for g in opt.param_groups]


def test_max_grad_norm_clips_actor_and_critic_separately():
    """Each group's gradient norm is clipped on its own (verl clips actor and critic separately): the
    actor's large norm comes down to 1, the critic's small one is untouched; null clips nothing."""
    unclipped = _grad_norms_after_step(BASE)
    clipped = _grad_norms_after_step({**BASE, "max_grad_norm": 1.0})
    assert unclipped[0] > 10 and unclipped[1] < 1
    assert clipped[0] == pytest.approx(1.0, rel=1e-5)
    assert clipped[1] == pytest.approx(unclipped[1])


def test_drop_last_leaves_the_partial_batch_out():
    """20 prompts in batches of 8: verl's loader gives 2 steps (16 episodes), trl's ceil 3 (24)."""
    base = resolve_settings({**BASE, "total_episodes": None}, 20)
    verl = resolve_settings({**BASE, "total_episodes": None, "drop_last": True}, 20)
    assert (base["total_steps"], base["total_episodes"]) == (3, 20)
    assert (verl["total_steps"], verl["total_episodes"]) == (2, 16)


def test_drop_last_refuses_a_run_without_a_step():
    with pytest.raises(ValueError, match="ppo.drop_last"):
        resolve_settings({**BASE, "total_episodes": 5, "drop_last": True}, 20)


def test_eval_samples_needs_sampled_evaluation():
    import copy
    from pathlib import Path

    import yaml

    from prbench.config import ConfigError
    from prbench.validation import check_config

    cfg = yaml.safe_load((Path(__file__).parents[1] / "configs" / "demo.yaml").read_text())
    bad = copy.deepcopy(cfg)
    bad["ppo"].update(eval_greedy=True, eval_samples=2)
    with pytest.raises(ConfigError, match="ppo.eval_samples: 2 answers per question, but ppo.eval_greedy is true"):
        check_config(bad)
    for greedy, n in ((True, 1), (False, 1), (False, 4)):
        ok = copy.deepcopy(cfg)
        ok["ppo"].update(eval_greedy=greedy, eval_samples=n)
        check_config(ok)
