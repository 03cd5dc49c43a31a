import sys

sys.path.insert(0, "src")
import pandas as pd

from prbench.downstream.evaluation import paired_diff
from prbench.downstream.reward_rise import reward_rise
from prbench.io import read_jsonl
from prbench.seeding import stable_seed

d = sys.argv[1]
df = pd.DataFrame(read_jsonl(f"{d}/eval_judged.jsonl"))
print(
    df.score.mean(),
    df.base_score.mean(),
    paired_diff(df, 1000, stable_seed(0, "ppo-table-diff", "demo_policy", "pers_profile")),
    reward_rise([f"{d}/train_log.csv"]),
)
print((df.answer == df.base_answer).mean(), "identical answers")
