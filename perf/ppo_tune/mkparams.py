import json

import yaml

line = (
    open(".snakemake/scripts/" + [f for f in __import__("os").listdir(".snakemake/scripts") if "train_ppo" in f][0])
    .read()
    .split("\n")[1]
)
expr = line[line.index("snakemake = pickle.loads(") :]
expr = expr[: expr.index("from snakemake")] if "from snakemake" in expr else expr
ns = {}
exec("import pickle\n" + expr.rstrip(";"), ns)
t = ns["snakemake"]
line = (
    open(".snakemake/scripts/" + [f for f in __import__("os").listdir(".snakemake/scripts") if "eval_policy" in f][0])
    .read()
    .split("\n")[1]
)
expr = line[line.index("snakemake = pickle.loads(") :]
expr = expr[: expr.index("from snakemake")] if "from snakemake" in expr else expr
ns = {}
exec("import pickle\n" + expr.rstrip(";"), ns)
e = ns["snakemake"]
g = yaml.safe_load(open("configs/demo.yaml"))["grpo"]
for k in ("enabled", "seeds", "bootstrap"):
    g.pop(k)
rm = dict(t.params.rm_spec)
P = {
    "prompts": dict(t.params.prompts),
    "policy_path": t.params.policy_path,
    "rm_spec": rm,
    "ppo": dict(t.params.ppo),
    "seed": t.params.seed,
    "judge": dict(e.params.judge),
    "eval": dict(e.params.ppo),
    "grpo": g,
}
json.dump(P, open("exp/params.json", "w"), indent=1, default=str)
print(P["grpo"])
