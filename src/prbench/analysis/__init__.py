"""The analysis stage: which benchmark's accuracy predicts downstream quality across RMs.

- `correlation`: benchmark scores and downstream measures collected per RM, every rank coefficient
  with a joint bootstrap over questions and a permutation p-value (rule correlations);
- `summary`: the markdown summary of that table (best benchmark per downstream measure);
- `rankmetrics`: the rank coefficients (Spearman, Kendall tau-b, weighted tau, NDCG, RBO);
- `figures`: the figures of the report.
It reads the downstream methods from the contract (`prbench.downstream`), never a method's code.
"""
