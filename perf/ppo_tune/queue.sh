#!/bin/bash
# usage: exp/queue.sh NAME1 'JSON1' NAME2 'JSON2' ...
while [ $# -gt 0 ]; do
  n=$1; o=$2; shift 2
  OMP_NUM_THREADS=1 .venv/bin/python exp/harness.py $n ppo "$o" > exp/logs/$n.log 2>&1
  OMP_NUM_THREADS=1 .venv/bin/python exp/sampled_eval.py exp/runs/ppo/$n/model $n 16 >> exp/logs/$n.log 2>&1
done
