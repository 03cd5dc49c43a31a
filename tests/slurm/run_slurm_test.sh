#!/usr/bin/env bash
# End-to-end proof that the pipeline runs on a real SLURM through profiles/slurm.
#   sudo tests/slurm/run_slurm_test.sh               # smoke workflow + demo slice, then tear down
#   sudo tests/slurm/run_slurm_test.sh --smoke-only  # only the trivial workflow (daemons + plugin)
#   sudo tests/slurm/run_slurm_test.sh --keep-cluster
# Steps: install slurm-wlm + munge (apt-get), start a one-node cluster on this machine
# (tests/slurm/cluster.sh), then
#   1. smoke workflow (tests/slurm/smoke): a plain run; with --smoke-only also the kill checks:
#      scancel a running job -> the profile's `retries` resubmits it; scancel with --retries 0 ->
#      the run fails, the partial output is removed, a rerun completes with the right content;
#   2. demo slice (configs/demo.yaml; targets in SLICE_TARGETS) in a scratch copy of the repo:
#      a local run (reference), a SLURM run from a clean state, byte comparison of every output,
#      then a rerun where one running job is scancel'ed (retried) and a rerun with --retries 0
#      where it is killed (failure, then a clean rerun), each compared with the reference again.
# Tears the cluster down on exit. Needs root, the repo's .venv with snakemake-executor-plugin-slurm.
# Environment: SLICE_TARGETS, KILL_RULE (rule killed in the slice; default: first rule seen
# running for KILL_AFTER seconds), KILL_AFTER (default 3), SNAKEMAKE_TIMEOUT (per call, default 900).
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/../.." && pwd)"
SMK="$REPO/.venv/bin/snakemake"
PY="$REPO/.venv/bin/python"
SMOKE_ONLY=0
KEEP=0
for a in "$@"; do
    case "$a" in
        --smoke-only) SMOKE_ONLY=1 ;;
        --keep-cluster) KEEP=1 ;;
        *) echo "unknown option $a" >&2; exit 2 ;;
    esac
done
SLICE_TARGETS="${SLICE_TARGETS:-results/data/benchmarks/personalized.jsonl results/scores/length_only/personalized.accuracy.json}"
KILL_RULE="${KILL_RULE:-}"
KILL_AFTER="${KILL_AFTER:-3}"
TIMEOUT="${SNAKEMAKE_TIMEOUT:-900}"
SCRATCH="$(mktemp -d /tmp/prbench-slurm-test.XXXXXX)"
export OMP_NUM_THREADS=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 PYTHONHASHSEED=0
export PATH="$REPO/.venv/bin:$PATH"
# Flags for this test cluster: no accounting (squeue status), no account, and short status waits. The
# plugin waits --slurm-init-seconds-before-status-checks between its status rounds, adds 10 s after
# each round in which no job finished (at most 180 s) and goes back to the init value after one that
# did (or had no job), so with 1 s a job of a few seconds is seen after 1 + 11 s instead of 5 + 15 s;
# --seconds-between-status-checks (Snakemake's, 10 s by default) is the wait only before the plugin's
# first round has set one. The profile's own values suit a real cluster's long jobs.
SLURM_FLAGS=(--profile "$REPO/profiles/slurm" --slurm-status-command squeue
             --slurm-init-seconds-before-status-checks 1 --seconds-between-status-checks 1
             --slurm-no-account --latency-wait 5)

T0=$(date +%s)
log() { echo "[slurm-test +$(( $(date +%s) - T0 ))s] $*" >&2; }
fail() { log "FAIL: $*"; exit 1; }
declare -A TIMES

[ "$(id -u)" = 0 ] || fail "run as root (installs packages, starts daemons)"
[ -x "$SMK" ] || fail "$SMK missing: create the venv (pip install -e '.[slurm,dev]')"
"$PY" -c "import snakemake_executor_plugin_slurm" 2>/dev/null \
    || fail "snakemake-executor-plugin-slurm missing: $REPO/.venv/bin/pip install -e '.[slurm]'"

cleanup() {
    local rc=$?
    if [ "$KEEP" = 0 ]; then "$HERE/cluster.sh" stop || true; fi
    if [ "$rc" = 0 ]; then rm -rf "$SCRATCH"; else log "scratch kept for inspection: $SCRATCH"; fi
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

timed() {  # timed NAME CMD...: run, record wall seconds
    local name="$1" s rc=0
    shift
    s=$(date +%s)
    "$@" || rc=$?
    TIMES[$name]=$(( $(date +%s) - s ))
    log "$name: ${TIMES[$name]} s (rc $rc)"
    return "$rc"
}

smk() {  # smk DIR LOGNAME ARGS...: snakemake in DIR under timeout -k, output to a log file
    local dir="$1" name="$2" rc=0
    shift 2
    # PYTHONPATH: jobs import prbench from this copy's src/, not the (editable) installed tree,
    # which may change while the test runs. sbatch --export=ALL passes it on to the jobs.
    (cd "$dir" && PYTHONPATH="$dir/src${PYTHONPATH:+:$PYTHONPATH}" timeout -k 30 "$TIMEOUT" "$SMK" "$@") \
        >"$SCRATCH/$name.log" 2>&1 || rc=$?
    [ "$rc" = 124 ] && log "$name: timed out after $TIMEOUT s"
    return "$rc"
}

assert_no_jobs() {
    local left
    left="$(squeue -h -o '%i %j %T' | grep -v ' COMPLETED$' || true)"
    [ -z "$left" ] || fail "jobs still queued after the run: $left"
}

# kill_running LOG RULE_OR_EMPTY: wait until a job (of RULE, or any rule) has been RUNNING for
# KILL_AFTER seconds, scancel it, print "jobid rule". Gives up when the snakemake log says done.
kill_running() {
    local logf="$1" rule="$2" line id comment secs
    for _ in $(seq $((TIMEOUT * 5))); do
        while read -r id comment secs; do
            [ -n "$id" ] || continue
            [ -z "$rule" ] || [[ "$comment" == "rule_${rule}" || "$comment" == rule_${rule}_wildcards_* ]] || continue
            if [ "$secs" -ge "$KILL_AFTER" ]; then
                scancel "$id"
                echo "$id ${comment#rule_}"
                return 0
            fi
        done < <(squeue -h -t RUNNING -o '%i %k %M' | awk '{n=split($3,t,":"); s=0; for(i=1;i<=n;i++) s=s*60+t[i]; print $1, $2, s}')
        grep -qE "steps \(100%\) done|Exiting because a job execution failed|Error in rule" "$logf" 2>/dev/null && return 1
        sleep 0.2
    done
    return 1
}

"$HERE/cluster.sh" install
timed cluster_start "$HERE/cluster.sh" start
sinfo

# ---- 1. smoke workflow -----------------------------------------------------------------------
smoke_expected() { printf '      1 0 True\n      1 1 True\n      1 4 True\n'; }
SM="$SCRATCH/smoke"
mkdir -p "$SM"
cp "$HERE/smoke/Snakefile" "$SM/"
timed smoke_run smk "$SM" smoke_run "${SLURM_FLAGS[@]}" || fail "smoke run failed: $(tail -30 "$SCRATCH/smoke_run.log")"
diff <(smoke_expected) "$SM/out/summary.txt" || fail "smoke output differs"
grep -q "submitted with SLURM jobid" "$SCRATCH/smoke_run.log" || fail "smoke jobs did not go through SLURM"
assert_no_jobs
log "smoke: plain run OK"

# The kill/retry checks run on the smoke workflow only with --smoke-only (or SMOKE_KILL=1): the
# demo slice below repeats them on real pipeline jobs.
if [ "$SMOKE_ONLY" = 1 ] || [ "${SMOKE_KILL:-0}" = 1 ]; then
# 1b. scancel a running job; the profile's retries=1 resubmits it.
rm -rf "$SM/out"
smk "$SM" smoke_retry "${SLURM_FLAGS[@]}" --config slow_seconds=4 &
PID=$!
KILLED="$(kill_running "$SCRATCH/smoke_retry.log" slow)" || { wait $PID || true; fail "smoke: never saw rule slow running"; }
log "smoke: scancel'ed running job $KILLED"
wait $PID || fail "smoke: run with a killed job did not recover: $(tail -30 "$SCRATCH/smoke_retry.log")"
grep -q "Error in rule slow" "$SCRATCH/smoke_retry.log" || fail "smoke: the kill was not seen as a failure"
[ "$(grep -c "rule slow:" "$SCRATCH/smoke_retry.log")" -ge 2 ] || fail "smoke: rule slow was not resubmitted"
diff <(smoke_expected) "$SM/out/summary.txt" || fail "smoke output differs after retry"
log "smoke: killed job retried, output correct"

# 1c. --retries 0: the run fails, the partial output is deleted, a rerun finishes it.
rm -rf "$SM/out"
smk "$SM" smoke_fail "${SLURM_FLAGS[@]}" --retries 0 --config slow_seconds=4 &
PID=$!
KILLED="$(kill_running "$SCRATCH/smoke_fail.log" slow)" || { wait $PID || true; fail "smoke: never saw rule slow running"; }
if wait $PID; then fail "smoke: run with a killed job and --retries 0 claimed success"; fi
[ ! -e "$SM/out/slow.txt" ] || fail "smoke: partial out/slow.txt left behind after the kill"
smk "$SM" smoke_rerun "${SLURM_FLAGS[@]}" || fail "smoke: rerun after the kill failed"
diff <(smoke_expected) "$SM/out/summary.txt" || fail "smoke output differs after rerun"
assert_no_jobs
log "smoke: killed job (no retries) -> run failed cleanly, rerun OK"
fi

[ "$SMOKE_ONLY" = 1 ] && { log "smoke only: PASS"; exit 0; }

# ---- 2. demo slice -------------------------------------------------------------------------
copy_repo() {  # a scratch copy: results/, logs and caches of the live tree never leak in
    mkdir -p "$1"
    (cd "$REPO" && tar -cf - --exclude=./.git --exclude=./.venv --exclude=./results --exclude=./logs \
        --exclude=./job_times --exclude=./.snakemake --exclude='*/__pycache__' \
        --exclude=./.pytest_cache .) | tar -xf - -C "$1"
}
compare_outputs() {  # compare_outputs DIR LABEL: every output file under results/ equals the reference
    local d="$1" label="$2"
    "$PY" "$HERE/compare_outputs.py" "$SCRATCH/local/results" "$d/results" >"$SCRATCH/diff_$label.txt" 2>&1 \
        || fail "$label: outputs differ from the local run: $(head -20 "$SCRATCH/diff_$label.txt")"
    log "$label: identical to the local run ($(tr '\n' ' ' <"$SCRATCH/diff_$label.txt"))"
}
read -r -a TARGETS <<<"$SLICE_TARGETS"
copy_repo "$SCRATCH/local"
copy_repo "$SCRATCH/slurm"
smk "$SCRATCH/local" slice_dryrun "${TARGETS[@]}" -n --cores 1 --configfile=configs/demo.yaml \
    || fail "the slice does not build a DAG yet: $(tail -20 "$SCRATCH/slice_dryrun.log")"

timed slice_local smk "$SCRATCH/local" slice_local "${TARGETS[@]}" --cores 2 --configfile=configs/demo.yaml \
    || fail "local reference run failed: $(tail -30 "$SCRATCH/slice_local.log")"
timed slice_slurm smk "$SCRATCH/slurm" slice_slurm "${TARGETS[@]}" "${SLURM_FLAGS[@]}" --configfile=configs/demo.yaml \
    || fail "SLURM run failed: $(tail -30 "$SCRATCH/slice_slurm.log")"
N_SUBMITTED=$(grep -c "submitted with SLURM jobid" "$SCRATCH/slice_slurm.log" || true)
log "slice: $N_SUBMITTED jobs went through SLURM"
[ "$N_SUBMITTED" -ge 2 ] || fail "slice: expected the jobs to be submitted to SLURM"
compare_outputs "$SCRATCH/slurm" slurm
assert_no_jobs

# 2b. rebuild everything, scancel one running job: the profile's retries resubmit it.
rm -rf "$SCRATCH/slurm/results"
smk "$SCRATCH/slurm" slice_retry "${TARGETS[@]}" "${SLURM_FLAGS[@]}" --configfile=configs/demo.yaml &
PID=$!
KILLED="$(kill_running "$SCRATCH/slice_retry.log" "$KILL_RULE")" \
    || { wait $PID || true; fail "slice: no job ran for $KILL_AFTER s to be killed (set KILL_RULE/KILL_AFTER)"; }
log "slice: scancel'ed running job $KILLED"
START=$(date +%s)
wait $PID || fail "slice: run with a killed job did not recover: $(tail -30 "$SCRATCH/slice_retry.log")"
TIMES[slice_retry]=$(( $(date +%s) - START ))
grep -q "Error in rule ${KILLED#* }" "$SCRATCH/slice_retry.log" || fail "slice: the kill of $KILLED was not seen"
compare_outputs "$SCRATCH/slurm" slurm_after_retry

# 2c. same kill with --retries 0: snakemake stops, no partial output survives, a rerun completes.
rm -rf "$SCRATCH/slurm/results"
smk "$SCRATCH/slurm" slice_fail "${TARGETS[@]}" "${SLURM_FLAGS[@]}" --retries 0 --configfile=configs/demo.yaml &
PID=$!
KILLED="$(kill_running "$SCRATCH/slice_fail.log" "${KILLED#* }")" \
    || { wait $PID || true; fail "slice: could not kill a running job the second time"; }
log "slice (--retries 0): scancel'ed running job $KILLED"
if wait $PID; then fail "slice: run with a killed job and --retries 0 claimed success"; fi
timed slice_rerun smk "$SCRATCH/slurm" slice_rerun "${TARGETS[@]}" "${SLURM_FLAGS[@]}" --configfile=configs/demo.yaml \
    || fail "slice: rerun after the kill failed: $(tail -30 "$SCRATCH/slice_rerun.log")"
grep -q "^rule ${KILLED#* }:" "$SCRATCH/slice_rerun.log" \
    || fail "slice: the rerun did not redo the killed ${KILLED#* } job (its output was kept?)"
compare_outputs "$SCRATCH/slurm" slurm_after_kill_rerun
assert_no_jobs

log "PASS. timings (s): $(for k in "${!TIMES[@]}"; do printf '%s=%s ' "$k" "${TIMES[$k]}"; done)"
