"""The schema is the only source of config defaults.

Code reads a config section through `prbench.config.with_defaults` / `entry_with_defaults` and then
`section[key]`; a `.get("key", <default>)` (or `.setdefault`) in src/prbench would be a second copy
of a default that can drift from the schema. The scan below fails on any such call unless its key
is a data-record field (RECORD_KEYS, never a config key) or the call site is on SITE_ALLOW.
"""
import ast

import yaml
from helpers import REPO

SRC = REPO / "src" / "prbench"
SKIP = ("replica/remote_code/",)  # stand-ins for hub modelling code, not pipeline code

# Fields of data records, never config keys: JSONL rows, JSON reports, trainer logs, HF config.json.
RECORD_KEYS = {
    "profile": "prompt / pair row: the user's profile posts (absent = no profile)",
    "profile_categories": "prompt / pair row: the posts' categories (absent = unknown)",
    "question_id": "prompt row id; the row index when a test row has none (seeding only)",
    "pair_id": "pair row id; the row index when absent",
    "id": "judge-key row id; the row index when absent",
    "raw": "an RM's per-pair details: raw generations",
    "picks": "an RM's per-pair details: pairwise picks",
    "official": "accuracy summary: the official-score block (baselines only)",
    "splits": "the data check report",
    "spearman": "correlation JSON block",
    "kendall_tau_b": "correlation JSON block",
    "kl": "trl log row",
    "step": "training-log DataFrame column",
    "tie_word_embeddings": "a model's config.json",
    "text_config": "a model's config.json (multimodal wrappers)",
    "num_key_value_heads": "a model's config.json",
    "prefix_len": "the prefix scorer's feature dict",
    "name": "a job spec's name, added by the rules (rm_spec); a direct caller's spec may lack it",
    "properties": "the JSON schema itself",
    "definitions": "the JSON schema itself",
    "failed": "judge cache record / judged.jsonl row: written before the field existed = failed iff score is null",
}

# Call sites whose key is not read from config, or a known, documented exception.
SITE_ALLOW = {
    ("downstream/bon/stages.py", "device"): "policy job spec runtime key (not in the policies schema); tests pass one",
    ("downstream/ppo/launch.py", "device"): "PPO launch spec runtime key",
    ("downstream/ppo/launch.py", "threads_per_process"): "PPO launch spec runtime key (CPU processes)",
    ("judge/loader.py", "device"): "outside the judge schema: direct callers only (load_judge docstring)",
    ("judge/loader.py", "dtype"): "outside the judge schema: direct callers only",
    ("judge/loader.py", "trust_remote_code"): "outside the judge schema: direct callers only",
    ("judge/loader.py", "calibration"): "runtime key the rules add for the minilm judge",
    ("rms/classifier.py", "profile_layout"): "RM spec runtime key that prbench.rms.reward_spec sets from "
                                             "reward.profile; absent = the benchmark's layout",
    ("judge/minilm.py", "batch_size"): "known exception: a raw section without batch_size keeps the "
                                       "encoder's 64; validated configs carry the schema's 16",
}


def _schema_keys(node, out: set) -> set:
    if isinstance(node, dict):
        for k, v in node.items():
            if k == "properties" and isinstance(v, dict):
                out.update(v)
            _schema_keys(v, out)
    elif isinstance(node, list):
        for v in node:
            _schema_keys(v, out)
    return out


def _defaulted_gets():
    """(module, key, line, source) of every `.get("key", d)` / `.setdefault("key", d)` with d not None."""
    for path in sorted(SRC.rglob("*.py")):
        rel = path.relative_to(SRC).as_posix()
        if rel.startswith(SKIP):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                    and node.func.attr in ("get", "setdefault") and len(node.args) == 2):
                continue
            key, default = node.args
            if not (isinstance(key, ast.Constant) and isinstance(key.value, str)):
                continue  # computed keys: counters and lookup tables
            if isinstance(default, ast.Constant) and default.value is None:
                continue
            if ast.unparse(node.func.value) == "os.environ":
                continue
            yield rel, key.value, node.lineno, ast.unparse(node)


# Record keys that are also the name of a config key, each with why no `.get` of it reads config.
ALSO_CONFIG_KEYS = {
    "profile": "config `reward.profile` is read only through with_defaults (prbench.rms.reward_spec); "
               "every `.get(\"profile\", ...)` reads a prompt or pair row",
}


def test_record_keys_are_not_config_keys():
    schema = yaml.safe_load((REPO / "schemas" / "config.schema.yaml").read_text(encoding="utf-8"))
    clash = sorted(set(RECORD_KEYS) & _schema_keys(schema, set()) - set(ALSO_CONFIG_KEYS))
    assert not clash, f"RECORD_KEYS must not hide config keys: {clash}"


def test_no_code_defaults_for_config_keys():
    found = list(_defaulted_gets())
    bad = [f"{m}:{line}: {src}" for m, k, line, src in found if k not in RECORD_KEYS and (m, k) not in SITE_ALLOW]
    assert not bad, ("config defaults belong in schemas/config.schema.yaml: read the section through "
                     "with_defaults / entry_with_defaults and index it (or allow-list a non-config read "
                     f"here, with its reason): {bad}")
    used_sites = {(m, k) for m, k, _, _ in found}
    used_keys = {k for _, k, _, _ in found}
    stale = sorted(set(SITE_ALLOW) - used_sites) + sorted(set(RECORD_KEYS) - used_keys)
    assert not stale, f"allow-list entries no longer needed: {stale}"
