#!/usr/bin/env bash
# Does an honest volunteer add throughput? (docs/benchmarks.md "Result validation")
#
# Builds the same book several times on `serve` with real worker processes on 127.0.0.1:
#   alone: one trusted worker (`workers add --trusted`);
#   with:  the same trusted worker plus VOLUNTEERS honest volunteers, each with its own credential
#          and owner (untrusted until they earn trust);
# each without and with the coordinator's verifier (`serve --eval`, the embedded weights written
# to a file), and prints wall time, CPU seconds (coordinator and workers, user + system), results,
# what validation did, and whether every run gave the same book (canonical dump, date excluded).
#
#   cargo build --release -p bookfarm-coordinator -p bookfarm-worker
#   scripts/volunteer_speedup.sh [LEVEL=8] [DEPTH=13] [RUNS=3] [WORK=target/volunteer]
#
# Environment: BIN_DIR (default target/release), DEVIATE ("REL ABS", default "2 4"), THREADS
# (search threads per worker, default 1), VOLUNTEERS (default 1), MODES (default "noeval eval"),
# PORT (gRPC port, default 7790; HTTP is PORT+1), KEEP=1 keeps WORK.
set -euo pipefail
cd "$(dirname "$0")/.."
LEVEL=${1:-8}
DEPTH=${2:-13}
RUNS=${3:-3}
WORK=${4:-target/volunteer}
BIN_DIR=${BIN_DIR:-target/release}
DEVIATE=${DEVIATE:-2 4}
THREADS=${THREADS:-1}
VOLUNTEERS=${VOLUNTEERS:-1}
MODES=${MODES:-noeval eval}
PORT=${PORT:-7790}
COORD=$BIN_DIR/bookfarm-coordinator
WORKER=$BIN_DIR/bookfarm-worker
ADMIN=volunteer-speedup-admin
URL=http://127.0.0.1:$PORT
export RUST_LOG=${RUST_LOG:-warn}
for b in "$COORD" "$WORKER"; do
    [ -x "$b" ] || { echo "no $b: cargo build --release -p bookfarm-coordinator -p bookfarm-worker" >&2; exit 1; }
done
rm -rf "$WORK" && mkdir -p "$WORK"
EVAL=$WORK/eval.dat
# The default weights: the file the engine embeds (older versions stay in the same directory).
WEIGHTS=shared/engine/$(grep -o 'weights/bookfarm-eval-[0-9.]*\.dat\.gz' shared/engine/src/eval/default.rs)
gzip -dc "$WEIGHTS" > "$EVAL"

PIDS=()
cleanup() {
    for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
    [ "${KEEP:-0}" = 1 ] || rm -rf "$WORK"
}
trap cleanup EXIT

# CPU seconds (user + system) a live process has used so far.
cpu_of() {
    awk -v hz="$(getconf CLK_TCK)" '{ print ($14 + $15) / hz }' "/proc/$1/stat"
}

# One build: MODE (noeval|eval), FLEET (alone|with), RUN; prints one table row.
build() {
    local mode=$1 fleet=$2 run=$3 dir=$WORK/$1-$2-$3
    mkdir -p "$dir"
    local db=$dir/db
    local eval_args=()
    [ "$mode" = eval ] && eval_args=(--eval "$EVAL")
    "$COORD" book new "$LEVEL" "$DEPTH" --db "$db" --quiet "${eval_args[@]}" > /dev/null
    local tokens=()
    tokens+=("$("$COORD" workers add t1 --owner operator --trusted --db "$db" | tail -1)")
    if [ "$fleet" = with ]; then
        for i in $(seq 1 "$VOLUNTEERS"); do
            tokens+=("$("$COORD" workers add "v$i" --owner "volunteer$i" --db "$db" | tail -1)")
        done
    fi
    "$COORD" serve --db "$db" --listen "127.0.0.1:$PORT" --http "127.0.0.1:$((PORT + 1))" \
        --admin-token "$ADMIN" "${eval_args[@]}" > "$dir/serve.log" 2>&1 &
    local coord=$!
    PIDS=("$coord")
    for _ in $(seq 1 200); do
        "$COORD" probe "http://127.0.0.1:$((PORT + 1))/readyz" > /dev/null 2>&1 && break
        sleep 0.1
    done
    local workers=()
    local k=0
    for t in "${tokens[@]}"; do
        k=$((k + 1))
        "$WORKER" run --coordinator "$URL" --token "$t" --threads "$THREADS" --name "w$k" \
            "${eval_args[@]}" > "$dir/worker$k.log" 2>&1 &
        workers+=($!)
        PIDS+=($!)
    done
    local t0 t1
    t0=$(date +%s.%N)
    # shellcheck disable=SC2086
    "$COORD" expand deviate $DEVIATE --wait --coordinator "$URL" --token "$ADMIN" > "$dir/expand.log" 2>&1
    t1=$(date +%s.%N)
    "$COORD" status --json --coordinator "$URL" --token "$ADMIN" > "$dir/status.json"
    "$COORD" export "$dir/book.dat" --coordinator "$URL" --token "$ADMIN" > /dev/null
    local ccpu wcpu=0
    ccpu=$(cpu_of "$coord")
    for w in "${workers[@]}"; do
        wcpu=$(awk -v a="$wcpu" -v b="$(cpu_of "$w")" 'BEGIN { print a + b }')
    done
    for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
    PIDS=()
    "$COORD" book dump "$dir/book.dat" | grep -v '^#' | sha256sum | cut -c1-12 > "$dir/book.sha"
    python3 - "$dir/status.json" "$mode" "$fleet" "$run" "$t0" "$t1" "$ccpu" "$wcpu" "$(cat "$dir/book.sha")" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
mode, fleet, run, t0, t1, ccpu, wcpu, sha = sys.argv[2:]
v = s.get("validation", {})
g = lambda k: v.get(k, 0)
r = v.get("replica_share", 0.0)
print(f"{mode:<6} {fleet:<5} {run:>3} {float(t1) - float(t0):8.1f} {float(ccpu):8.1f} {float(wcpu):8.1f} "
      f"{s.get('positions', 0):>7} {s.get('completed', 0):>7} {g('held'):>6} {g('applied_at_once'):>7} "
      f"{g('spot_checks'):>6} {g('core_checks'):>6} {g('core_size'):>5} {g('invalid'):>4} "
      f"{100.0 * v.get('replica_share', 0.0):6.1f} {100.0 * r / (1.0 + r):5.1f} {sha}")
PY
}

echo "book new $LEVEL $DEPTH, deviate $DEVIATE, $THREADS thread(s) per worker, $VOLUNTEERS volunteer(s)"
# extra%: replica nodes over the nodes of the results the book used; overh%: replica nodes over all
# nodes searched (the issue's overhead, in nodes); core: leaves of the final decisive core.
printf '%-6s %-5s %3s %8s %8s %8s %7s %7s %6s %7s %6s %6s %5s %4s %6s %5s %s\n' mode fleet run wall_s \
    coord_cpu work_cpu posits results held at_once spot core_ck core inv extra% overh% book
for mode in $MODES; do
    for run in $(seq 1 "$RUNS"); do
        for fleet in alone with; do
            build "$mode" "$fleet" "$run"
        done
    done
done
