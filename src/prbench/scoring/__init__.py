"""The scoring stage: every RM on every benchmark.

- `benchmark`: one RM scores one benchmark's pairs (rule score_benchmark) and the accuracy table
  over all of them (rule accuracy_table), with ties, failures and bootstrap CIs;
- `official`: the baselines' official headline scores (RewardBench's weighted sections, RM-Bench's
  domain means) from the per-pair credits, one component builder per baseline kind
  (`prbench.data.baselines.KINDS`).
"""
