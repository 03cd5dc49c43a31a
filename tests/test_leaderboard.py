"""The leaderboard (prbench.scoring.leaderboard, prbench.analysis.leaderboard) and the one-RM command's
pieces (prbench.scoring.one_rm, `make score`) on hand-made tables: ranks, ties, the official score
where a baseline has one, the downstream signal columns, the overlay config and its errors."""
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml
from helpers import REPO

from prbench.analysis.leaderboard import downstream_columns, leaderboard
from prbench.scoring import one_rm
from prbench.scoring.leaderboard import benchmark_board, html, markdown

COLS = ["rm", "benchmark", "level", "group", "n", "correct", "ties", "failures", "accuracy", "ci_low", "ci_high"]


def _acc():
    rows = []
    for rm, pers, gen, off in [("a", 0.7, 0.6, 0.55), ("b", 0.9, 0.5, 0.45), ("c", 0.7, 0.8, 0.75)]:
        rows.append([rm, "personalized", "overall", "all", 100, int(pers * 100), 3 if rm == "c" else 0, 1, pers,
                     pers - 0.05, pers + 0.05])
        for s, d in (("S1", 0.01), ("S2", -0.01)):
            rows.append([rm, "personalized", "subset", s, 50, 0, 0, 0, pers + d, pers + d - 0.1, pers + d + 0.1])
        rows.append([rm, "general", "overall", "all", 40, int(gen * 40), 2, 0, gen, gen - 0.1, gen + 0.1])
        rows.append([rm, "general", "official", "all", 40, None, None, None, off, off - 0.1, off + 0.1])
        rows.append([rm, "rmb", "overall", "all", 30, 0, 0, 4, gen / 2, gen / 2 - 0.1, gen / 2 + 0.1])
    return pd.DataFrame(rows, columns=COLS)


def test_board_ranks_and_columns():
    board = benchmark_board(_acc())
    assert list(board["rm"]) == ["b", "a", "c"]
    assert list(board["rank"]) == [1, 2, 2]  # a and c tie at 0.7: the same rank, then by name
    c = board.set_index("rm").loc["c"]
    assert c["personalized"] == 0.7 and c["ties"] == 3 and c["failures"] == 1 and c["personalized_n"] == 100
    assert c["personalized:S1"] == pytest.approx(0.71) and c["personalized:S2_ci_high"] == pytest.approx(0.79)
    assert c["general"] == 0.75 and c["general_score"] == "official" and c["general_ties"] == 2
    assert c["rmb"] == 0.4 and c["rmb_score"] == "accuracy" and c["rmb_failures"] == 4


def test_board_refuses_an_rm_without_personalized_rows():
    with pytest.raises(ValueError, match="no personalized overall row for RM 'zz'"):
        benchmark_board(_acc(), rms=["a", "zz"])
    with pytest.raises(ValueError, match=r"lacks column\(s\) \['ci_high'\]"):
        benchmark_board(_acc().drop(columns="ci_high"))


def test_markdown_and_html():
    board = benchmark_board(_acc())
    md = markdown(board, mark="c")
    lines = md.strip().splitlines()
    assert len(lines) == 2 + 3
    assert "| general (official) |" in lines[0] and "| rmb |" in lines[0]
    assert lines[4].startswith("| 2 | c * | 0.700 [0.650, 0.750] |")
    full = html(board, "cap")
    assert full.count("<tr>") == 4 and "personalized:S1" in full and "[0.650, 0.750]" in full
    compact = html(board, compact=True)
    assert "personalized:S1" not in compact and "[" not in compact and "rmb_failures" not in compact
    assert "<td>0.700</td>" in compact


def _inputs(policies=("pol",)):
    rows = []
    for pol in policies:
        for i, rm in enumerate("abc"):
            for k in (1, 4):
                rows.append({"rm": rm, "kind": "downstream", "policy": pol, "downstream": "bon",
                             "estimator": "expected", "measure": "judge_score", "k": k, "value": 0.1 * i + k,
                             "ci_low": 0, "ci_high": 9})
            rows.append({"rm": rm, "kind": "downstream", "policy": pol, "downstream": "ppo", "estimator": None,
                         "measure": "judge_score", "k": None, "value": 0.5 + i, "ci_low": 0.4 + i, "ci_high": 0.6 + i})
            rows.append({"rm": rm, "kind": "downstream", "policy": pol, "downstream": "ppo", "estimator": None,
                         "measure": "win_rate", "k": None, "value": -1, "ci_low": -1, "ci_high": -1})
        rows.append({"rm": "a", "kind": "benchmark", "policy": None, "downstream": None, "estimator": None,
                     "measure": None, "k": None, "value": 0.7, "ci_low": 0.6, "ci_high": 0.8})
    return pd.DataFrame(rows)


def test_downstream_columns_take_the_figure_signal():
    down = downstream_columns(_inputs(), {"bon": {"estimator": "expected", "k": 4}, "ppo": {}})
    assert list(down.columns) == ["BoN (expected, k=4)", "BoN (expected, k=4)_ci_low", "BoN (expected, k=4)_ci_high",
                                  "PPO", "PPO_ci_low", "PPO_ci_high"]
    assert down.loc["b", "BoN (expected, k=4)"] == pytest.approx(4.1)
    assert down.loc["c", "PPO"] == 2.5 and down.loc["c", "PPO_ci_high"] == pytest.approx(2.6)
    two = downstream_columns(_inputs(("p1", "p2")), {"bon": {"estimator": "expected", "k": 1}})
    assert "PPO p1" in two.columns and "BoN (expected, k=1) p2" in two.columns


def test_leaderboard_files(tmp_path):
    _acc().to_csv(tmp_path / "acc.csv", index=False)
    _inputs().to_csv(tmp_path / "inputs.csv", index=False)
    outs = [tmp_path / f for f in ("l.csv", "l.md", "l.html", "l.summary.html")]
    board = leaderboard(tmp_path / "acc.csv", tmp_path / "inputs.csv", *outs, rms=["a", "b", "c"],
                        signals={"bon": {"estimator": "expected", "k": 4}})
    back = pd.read_csv(outs[0])
    assert list(back["rm"]) == ["b", "a", "c"] and back.loc[0, "PPO"] == 1.5
    assert list(board.columns) == list(back.columns)
    assert outs[1].read_text().startswith("# Leaderboard")
    assert outs[3].read_text().count("<tr>") == 4


def test_one_rm_names_and_overlay():
    assert one_rm.default_name("Skywork/Skywork-Reward-V2-Qwen3-4B") == "skywork_reward_v2_qwen3_4b"
    assert one_rm.default_name("results/models/rm/pers_profile/") == "pers_profile"
    assert one_rm.overlay("org/m", "classifier", "m", True) == {
        "reward_models": {"m": {"kind": "classifier", "path": "org/m", "use_profile": True,
                                "trust_remote_code": False}}}
    assert one_rm.overlay("org/m", "classifier", "m", False, revision="a" * 40)["reward_models"]["m"]["revision"] \
        == "a" * 40
    assert one_rm.overlay("x", "length", "len", False) == {"reward_models": {"len": {"kind": "length",
                                                                                     "use_profile": False}}}
    with pytest.raises(ValueError, match=r"reward_models\.m\.kind: unknown RM kind 'clasifier'"):
        one_rm.overlay("org/m", "clasifier", "m", False)
    with pytest.raises(ValueError, match="letters, digits and _ only"):
        one_rm.overlay("org/m", "classifier", "m-1", False)


def test_one_rm_refuses_a_configured_name(tmp_path):
    cfg = tmp_path / "c.yaml"
    cfg.write_text(yaml.safe_dump({"seed": 0, "reward_models": {"pers_profile": {"kind": "length"}}}))
    with pytest.raises(ValueError, match="reward_models.pers_profile already exists"):
        one_rm.main(["--rm", "results/models/rm/pers_profile", "--config", str(cfg), "--directory", str(tmp_path)])
    with pytest.raises(FileNotFoundError, match="config nope.yaml: no such file"):
        one_rm.main(["--rm", "x/y", "--config", "nope.yaml"])


def _make(*args):
    venv = Path(sys.executable).parent.parent
    return subprocess.run(["make", "-C", str(REPO), *args, f"VENV={venv}"], capture_output=True, text=True, timeout=60)


def test_make_score_passes_its_variables():
    proc = _make("-n", "score", "RM=org/my-rm", "PROFILE=1", "NAME=mine", "CONFIG=configs/demo.yaml", "KIND=classifier")
    assert proc.returncode == 0, proc.stderr
    cmd = " ".join(proc.stdout.replace("\\\n", " ").split())
    assert "-m prbench.scoring.one_rm --rm 'org/my-rm' --kind 'classifier' --config 'configs/demo.yaml'" in cmd
    assert "--profile" in cmd and "--name 'mine'" in cmd and "--trust-remote-code" not in cmd
    proc = _make("score")  # RM is make's own variable ("rm -f") unless given
    assert proc.returncode != 0 and "give RM=<hub id or local folder>" in proc.stderr


def _scored(directory: Path, rm: str, accuracy: float, n: int = 20) -> None:
    """The score files `make score`'s comparison reads for one RM on the personalized benchmark."""
    from prbench.io import write_json, write_jsonl
    from prbench.scoring.benchmark import summarize

    right = round(accuracy * n)
    results = [{"pair_id": f"S/p{i}", "question_id": f"S/p{i}", "subset": "S", "section": "S",
                "score_chosen": 1.0, "score_rejected": 0.0 if i < right else 2.0, "pref": 1.0 if i < right else 0.0,
                "correct": i < right, "credit": 1.0 if i < right else 0.0, "tie": False, "failure": False}
               for i in range(n)]
    acc, pairs = one_rm.score_paths(rm, "personalized")
    (directory / acc).parent.mkdir(parents=True, exist_ok=True)
    write_jsonl(directory / pairs, results)
    write_json(directory / acc, summarize(results, rm, "personalized", 50, 0))


def test_one_rm_board_lists_family_members(tmp_path):
    """An RM family (an entry with a `grid`) counts as its members: every scored member is on the
    board, and "not scored" names only what has no score files (a whole family once, by its name)."""
    grid = {"profile_posts": [0, 2], "personalized_share": [0.5], "train_pairs": [16], "label_noise": [0.3]}
    cfg = {"seed": 0, "reward_models": {
        "heads": {"kind": "frozen_head", "encoder": "pkg:enc", "use_profile": True, "grid": grid},
        "tails": {"kind": "frozen_head", "encoder": "pkg:enc", "use_profile": True, "grid": grid},
        "length_only": {"kind": "length"}, "untrained": {"kind": "length"}, "new": {"kind": "length"}}}
    members, families = one_rm.configured_rms(cfg)
    assert families["heads"] == ["heads_k0_p050_n16_e30", "heads_k2_p050_n16_e30"]
    assert "heads" in cfg["reward_models"]  # the caller's config is left as it is
    for i, rm in enumerate(families["heads"] + ["length_only", "new"]):
        _scored(tmp_path, rm, 0.5 + 0.1 * i)
    _, board, missing = one_rm.board(tmp_path, cfg, "new")
    assert set(board["rm"]) == {*families["heads"], "length_only", "new"}
    assert missing == ["tails_k0_p050_n16_e30", "tails_k2_p050_n16_e30", "untrained"]
    text = one_rm.report(tmp_path, cfg, "new")
    assert "heads_k2_p050_n16_e30 |" in text and "| new * |" in text
    assert text.splitlines()[-2] == "not scored there yet: tails (all 2 members), untrained"
    # one member scored: the other is named, not the family
    _scored(tmp_path, "tails_k0_p050_n16_e30", 0.6)
    assert "not scored there yet: tails_k2_p050_n16_e30, untrained" in one_rm.report(tmp_path, cfg, "new")
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(cfg))
    with pytest.raises(ValueError, match="heads_k0_p050_n16_e30 is a member of the RM family reward_models.heads"):
        one_rm.main(["--rm", "x/y", "--name", "heads_k0_p050_n16_e30", "--config", str(tmp_path / "c.yaml"),
                     "--directory", str(tmp_path)])
