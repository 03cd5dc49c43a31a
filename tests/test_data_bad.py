"""Bad data: every case is a clear error (file, row, field) or a counted, reported drop."""
import copy
import json
import logging
from pathlib import Path

import pytest

from prbench.data import rmbench
from prbench.data.checks import DataError
from prbench.data.prepare import prepare_baseline, prepare_personalized
from prbench.data.retrieval import bow_embed
from prbench.io import read_json, read_jsonl

FIX = Path(__file__).parent / "fixtures"
SUB = "Art_and_Entertainment"
RETR = {"model": "bow", "top_k": 2}


def _pers_rows():
    return [json.loads(x) for x in (FIX / "personalized" / SUB / "test.jsonl").read_text().splitlines() if x.strip()]


def _rb_rows():
    return [json.loads(x) for x in (FIX / "rewardbench" / "filtered.jsonl").read_text().splitlines() if x.strip()]


def _write(path: Path, rows):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _run_pers(tmp_path, rows):
    src = tmp_path / "src"
    _write(src / SUB / "test.jsonl", rows)
    out = {n: str(tmp_path / f"{n}.jsonl") for n in ("benchmark", "judge_keys", "train", "prompts_train",
                                                      "prompts_eval")}
    out["report"] = str(tmp_path / "report.json")
    cfg = {"source": str(src), "subsets": [SUB], "split": "test", "train_split": None, "holdout_fraction": 0.5}
    prepare_personalized(cfg, RETR, 0, out, embed=bow_embed)
    return read_json(out["report"])["splits"]["test"], read_jsonl(out["benchmark"]), src / SUB / "test.jsonl"


def _run_rb(tmp_path, rows):
    src = tmp_path / "rb"
    _write(src / "filtered.jsonl", rows)
    out = {"benchmark": str(tmp_path / "b.jsonl"), "train": str(tmp_path / "t.jsonl"),
           "report": str(tmp_path / "r.json")}
    prepare_baseline("rb", {"kind": "rewardbench", "source": str(src), "split": "filtered"}, out)
    return read_json(out["report"])["splits"]["filtered"], read_jsonl(out["benchmark"]), src / "filtered.jsonl"


@pytest.mark.parametrize("field", ["question", "chosen", "rejected", "narrative", "profile", "rubric_aspects", "id"])
def test_personalized_missing_field_names_file_row_field(tmp_path, field):
    rows = _pers_rows()
    del rows[1][field]
    with pytest.raises(DataError) as exc:
        _run_pers(tmp_path, rows)
    msg = str(exc.value)
    assert str(tmp_path / "src" / SUB / "test.jsonl") in msg and "row 2" in msg and repr(field) in msg


def test_personalized_missing_nested_field(tmp_path):
    rows = _pers_rows()
    del rows[0]["profile"][1]["text"]
    with pytest.raises(DataError, match=r"row 1: missing field 'profile\[1\]\.text'"):
        _run_pers(tmp_path, rows)
    rows = _pers_rows()
    del rows[2]["rubric_aspects"][0]["aspect"]
    with pytest.raises(DataError, match=r"row 3: missing field 'rubric_aspects\[0\]\.aspect'"):
        _run_pers(tmp_path, rows)


def test_wrong_type_is_an_error(tmp_path):
    rows = _pers_rows()
    rows[0]["profile"] = "not a list"
    with pytest.raises(DataError, match=r"row 1: field 'profile' must be list"):
        _run_pers(tmp_path, rows)


def test_invalid_json_names_line(tmp_path):
    src = tmp_path / "src" / SUB / "test.jsonl"
    src.parent.mkdir(parents=True)
    good = (FIX / "personalized" / SUB / "test.jsonl").read_text().splitlines()
    src.write_text(good[0] + "\n{broken\n")
    out = {n: str(tmp_path / n)
           for n in ("benchmark", "judge_keys", "train", "prompts_train", "prompts_eval", "report")}
    with pytest.raises(DataError, match=rf"{src}: row 2: invalid JSON"):
        prepare_personalized({"source": str(tmp_path / "src"), "subsets": [SUB], "split": "test"}, RETR, 0, out,
                             embed=bow_embed)


def test_empty_answer_is_counted_drop(tmp_path, caplog):
    rows = _pers_rows()
    rows[0]["chosen"] = "   "
    rows[1]["rejected"] = ""
    with caplog.at_level(logging.WARNING, logger="prbench"):
        rep, bench, _ = _run_pers(tmp_path, rows)
    assert rep["read"] == 3 and rep["kept"] == 1 and rep["dropped"] == {"empty_answer": 2}
    assert rep["drop_examples"]["empty_answer"] == [f"{SUB}/ae-0001", f"{SUB}/ae-0002"]
    assert [r["pair_id"] for r in bench] == [f"{SUB}/ae-0003"]
    assert "empty_answer" in caplog.text  # also in the log, never silent


def test_chosen_equals_rejected_is_counted_drop(tmp_path):
    rows = _pers_rows()
    rows[2]["rejected"] = rows[2]["chosen"] + "  "
    rep, bench, _ = _run_pers(tmp_path, rows)
    assert rep["dropped"] == {"chosen_equals_rejected": 1} and rep["kept"] == 2


def test_empty_question_is_counted_drop(tmp_path):
    rows = _rb_rows()
    rows[0]["prompt"] = " "
    rep, bench, _ = _run_rb(tmp_path, rows)
    assert rep["dropped"] == {"empty_question": 1} and len(bench) == 5


def test_identical_duplicate_id_is_counted_drop(tmp_path):
    rows = _rb_rows()
    rows.append(copy.deepcopy(rows[0]))
    rep, bench, _ = _run_rb(tmp_path, rows)
    assert rep["read"] == 7 and rep["kept"] == 6 and rep["dropped"] == {"duplicate_id": 1}
    assert rep["drop_examples"]["duplicate_id"] == ["30"]


def test_conflicting_duplicate_id_is_an_error(tmp_path):
    rows = _pers_rows()
    dup = copy.deepcopy(rows[0])
    dup["chosen"] = "A different answer."
    rows.append(dup)
    with pytest.raises(DataError,
                       match=r"row 4: duplicate id 'ae-0001' with different content \(first seen at .*row 1\)"):
        _run_pers(tmp_path, rows)


def test_rewardbench_missing_field(tmp_path):
    rows = _rb_rows()
    del rows[3]["subset"]
    with pytest.raises(DataError, match=r"filtered.jsonl: row 4: missing field 'subset'"):
        _run_rb(tmp_path, rows)
    rows = _rb_rows()
    del rows[0]["rejected_model"]
    with pytest.raises(DataError, match=r"row 1: missing field 'rejected_model'"):
        _run_rb(tmp_path, rows)


def test_rmbench_bad_rows(tmp_path):
    from prbench.data.checks import DropLog

    rows = [json.loads(x) for x in (FIX / "rmbench" / "train.jsonl").read_text().splitlines()]
    bad = copy.deepcopy(rows)
    bad[1]["rejected"] = bad[1]["rejected"][:2]
    _write(tmp_path / "a" / "train.jsonl", bad)
    with pytest.raises(DataError, match=r"row 2: field 'rejected' must hold 3 responses"):
        rmbench.load_pairs(str(tmp_path / "a"), "train", "rmbench", DropLog("x"))
    # one empty chosen style drops its 3 comparisons, counted; one identical pair drops 1
    bad = copy.deepcopy(rows)
    bad[0]["chosen"][1] = ""
    bad[1]["rejected"][0] = bad[1]["chosen"][0]
    _write(tmp_path / "b" / "train.jsonl", bad)
    d = DropLog("x")
    pairs = rmbench.load_pairs(str(tmp_path / "b"), "train", "rmbench", d)
    assert d.read == 18 and d.kept == 14 and len(pairs) == 14
    assert dict(d.dropped) == {"empty_answer": 3, "chosen_equals_rejected": 1}
    assert "math/7/c0r0" in d.examples["chosen_equals_rejected"]
