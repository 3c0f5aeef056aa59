#!/usr/bin/env bash
# Big-book measurements (issue 17, docs/big-books.md): generate a synthetic N-position book,
# import it, start `serve` on it, export it, negamax it and run a deviate on it, printing wall
# and CPU time, peak RSS and disk use of each step (figures in docs/benchmarks.md).
#
#   cargo build --release -p bookfarm-coordinator
#   scripts/bigbook.sh [N=10000000] [WORK=target/bigbook]
#
# Environment: BIN (default target/release/bookfarm-coordinator), PLIES (default 40),
# DEVIATE ("REL ABS" of the deviate step, default "0 0"; empty skips it), CACHE_MB (serve's
# store cache bound, default 64), KEEP=1 keeps WORK.
set -euo pipefail
cd "$(dirname "$0")/.."
N=${1:-10000000}
WORK=${2:-target/bigbook}
BIN=${BIN:-target/release/bookfarm-coordinator}
PLIES=${PLIES:-40}
DEVIATE=${DEVIATE-0 0}
export RUST_LOG=${RUST_LOG:-warn}
[ -x "$BIN" ] || { echo "no $BIN: cargo build --release -p bookfarm-coordinator" >&2; exit 1; }
rm -rf "$WORK" && mkdir -p "$WORK"
DB=$WORK/db

# Run a command under GNU time; print wall and CPU (user + system) seconds, peak RSS and the
# command's last line. On a shared machine the CPU time is the steadier figure.
step() {
    local name=$1; shift
    /usr/bin/time -f "%e %U %S %M" -o "$WORK/time" "$@" > "$WORK/out" 2>&1 || { cat "$WORK/out" >&2; exit 1; }
    read -r secs user sys kb < "$WORK/time"
    LAST_SECS=$secs
    LAST_CPU=$(awk -v u="$user" -v s="$sys" 'BEGIN { print u + s }')
    printf '%-10s %8.2f s wall %8.2f s CPU  peak RSS %6d MiB  %s\n' "$name" "$secs" "$LAST_CPU" \
        $((kb / 1024)) "$(grep -v '^\s*$' "$WORK/out" | tail -1)"
}
rate() { awk -v n="$N" -v s="$1" 'BEGIN { printf "%.0f", (s > 0 ? n / s : 0) }'; }
per_pos() { awk -v n="$N" -v b="$1" 'BEGIN { printf "%.1f", b / n }'; }

step synth "$BIN" book synth --positions "$N" --plies "$PLIES" "$WORK/synth.dat"
FILE_BYTES=$(stat -c %s "$WORK/synth.dat")
echo "           book.dat: $FILE_BYTES bytes ($(per_pos "$FILE_BYTES") B/position)"
step import "$BIN" book import "$WORK/synth.dat" --db "$DB"
echo "           import: $(rate "$LAST_SECS") positions/s wall, $(rate "$LAST_CPU") per CPU second"
DISK=$(du -sb "$DB" | cut -f1)
echo "           store on disk: $DISK bytes ($(per_pos "$DISK") B/position)"

# serve: time from exec to a ready HTTP probe; resident memory 5 s later, with the store cache
# bounded to CACHE_MB (default 64) and the in-memory book's own heap figure from /metrics.
PORT=$((20000 + RANDOM % 20000))
echo "cache_capacity_mb = ${CACHE_MB:-64}" > "$WORK/coordinator.toml"
"$BIN" serve --db "$DB" --listen "127.0.0.1:$PORT" --http "127.0.0.1:$((PORT + 1))" \
    --config "$WORK/coordinator.toml" > "$WORK/serve.log" 2>&1 &
SERVE=$!
T0=$(date +%s.%N)
until curl -sf "http://127.0.0.1:$((PORT + 1))/readyz" > /dev/null; do
    kill -0 "$SERVE" 2> /dev/null || { cat "$WORK/serve.log" >&2; exit 1; }
    sleep 0.05
done
T1=$(date +%s.%N)
TICKS=$(awk '{ print $14 + $15 }' "/proc/$SERVE/stat")
sleep 5
RSS_KB=$(awk '/^VmRSS/ { print $2 }' "/proc/$SERVE/status")
HWM_KB=$(awk '/^VmHWM/ { print $2 }' "/proc/$SERVE/status")
BOOK_BYTES=$(curl -sf "http://127.0.0.1:$((PORT + 1))/metrics" | awk '$1 == "bookfarm_book_bytes" { print $2 }')
kill -INT "$SERVE"; wait "$SERVE" || true
awk -v a="$T0" -v b="$T1" -v t="$TICKS" -v hz="$(getconf CLK_TCK)" -v r="$RSS_KB" -v h="$HWM_KB" \
    -v n="$N" 'BEGIN {
    printf "serve      %8.2f s wall %8.2f s CPU to ready  RSS %d MiB (%.1f B/position), peak %d MiB\n",
        b - a, t / hz, r / 1024, r * 1024 / n, h / 1024 }'
echo "           in-memory book: $BOOK_BYTES bytes ($(per_pos "$BOOK_BYTES") B/position), store cache bound ${CACHE_MB:-64} MiB"

step export "$BIN" book export --db "$DB" "$WORK/export.dat"
step negamax "$BIN" book negamax --db "$DB"
if [ -n "$DEVIATE" ]; then
    # The coordinator's share of a deviate pass: open the store, then mark the first pass over
    # the whole book (the searches are the workers'; a full `book deviate` runs passes until
    # nothing is added, each with this marking).
    # shellcheck disable=SC2086 # REL ABS are two arguments
    step deviate "$BIN" book deviate $DEVIATE --db "$DB" --dry-run
fi
[ "${KEEP:-0}" = 1 ] || rm -rf "$WORK"
