#!/usr/bin/env bash
# Search-labelled training of bookfarm-eval 1.2.0 (docs/training.md, "Search-labelled training").
#
# Idempotent and resumable: every cache lives under $BOOKFARM_TRAIN_CACHE (default target/train,
# outside version control) and is rebuilt when missing; `label` resumes a partial cache from its
# last checkpoint; a finished step is skipped. Progress goes to stderr and to $C/pipeline.log,
# with the wall and CPU time of every step.
#
#   shared/train/pipeline.sh labels     # held-out sets and stage-1 exact labels
#   shared/train/pipeline.sh fit1       # stage-1 fine-tune of 1.1.0 on exact labels
#   shared/train/pipeline.sh boot       # stage-2 search labels (stage-1 weights) and fit -> 1.2.0
#   shared/train/pipeline.sh measure    # held-out tables for 1.1.0 and 1.2.0
#   shared/train/pipeline.sh match      # 400 games at level 4 and level 8 vs 1.1.0 (engine searcher)
#   shared/train/pipeline.sh all
#
# Candidate 1.3.0 (second session; held-out sets from `heldout`, BOOKFARM_DATA = the data folder):
#   shared/train/pipeline.sh heldout    # dataset, flippy.bin and the held-out R / W sets
#   shared/train/pipeline.sh v13e       # exact labels 8-16 empties, fit -> v13e
#   shared/train/pipeline.sh v13b1      # depth-6 labels 15-20 with v13e, fit -> v131
#   shared/train/pipeline.sh v13b2      # depth-6 labels 19-26 with v131, fit -> v132
#   shared/train/pipeline.sh v13b3      # 19-26 relabelled with v132, fit -> v133
#   shared/train/pipeline.sh v13b4      # volume check: 393,216 more 19-26 labels with v133 -> v134
#   shared/train/pipeline.sh measure13 W...   # held-out tables (static and depth 4) of weights W
#   shared/train/pipeline.sh match13 W        # 400 games at level 4 and 8 vs 1.1.0
#
# Candidate 1.4.0 (third session; needs `heldout`, `v13e` and `v13b1` first):
#   shared/train/pipeline.sh v14a       # 1e6 depth-4 labels 14-26 with v131 (1:1 game / random) -> v14a
#   shared/train/pipeline.sh v14b       # 130,000 game positions relabelled at depth 6 with v14a -> v14b
#   shared/train/pipeline.sh v14c       # v14b's fit restricted to 13-30 empties, 1.1.0 elsewhere -> v14c
#   shared/train/pipeline.sh sweep14 a|b B # L2 x overlap on a 5 % validation split, buckets B (19,22)
#
# Candidate 1.5.0 (fourth session; needs `heldout`, `v13e` and `v13b1` first):
#   shared/train/pipeline.sh v15x       # exact labels at 18-22: 1,000 game positions, 256 openings + random moves
#   shared/train/pipeline.sh v15a       # v14a's depth-4 caches, fitted on 13-30 empties only -> v15a
#   shared/train/pipeline.sh v15c       # v15a's data fitted to convergence (E15 epochs at LR15) -> v15c-eE15
#   shared/train/pipeline.sh v15e       # v15c + the exact 18-22 caches counted K15E (20) times -> v15e-kK15E
#   shared/train/pipeline.sh v15f       # v15c on the buckets of 17-30 empties only -> v15f
#   shared/train/pipeline.sh v15g       # bootstrap: the depth-4 caches relabelled with v15c, fitted as v15c -> v15g
#   shared/train/pipeline.sh v15h       # 250,000 random positions relabelled at depth 6 with v15c -> v15h
#   shared/train/pipeline.sh v15i       # all 10^6 depth-4 positions relabelled at depth 6 with v15c -> v15i
#   shared/train/pipeline.sh v15j       # v15i's random positions at depth 6, game positions at depth 4 -> v15j
#   shared/train/pipeline.sh v15k       # second round: the 500,000 random positions at depth 6 with v15j -> v15k
#   shared/train/pipeline.sh cap15      # validation vs training MAE of bucket 19 (21-22 empties)
#   shared/train/pipeline.sh conv15     # the same at E15 epochs / LR15 (BOOKFARM_TRAIN_EPOCHS15, _LR15)
#   shared/train/pipeline.sh analyse15 W...  # error by |exact score|, |static eval|, mobility, |disc diff|
#
# Candidate 1.6.0 (sixth session; needs the above):
#   shared/train/pipeline.sh heldout-big  # R 20-22 extended from 60 to NRB (300) positions, exact
#   shared/train/pipeline.sh lq16       # label quality at 20-22: searches of the bigger set vs exact
#   shared/train/pipeline.sh cost16     # CPU per label at 18-22 for the lq16 searches
#   shared/train/pipeline.sh v16a       # N16 random positions at 18-22, depth 12 at 73 % with v15j -> v16a
#   shared/train/pipeline.sh v16b       # the same draw extended to N16B (300,000) -> v16b
#   shared/train/pipeline.sh v16c       # v16b with its depth-12 labels counted K16C (2) times -> v16c-kK16C
#   shared/train/pipeline.sh v16d       # v16c + 100,000 game positions at 18-22, depth 12 at 73 % -> v16d-kK16C
#
# Seventh session (needs v16b's caches): is the fit the limit at 20-22?
#   shared/train/pipeline.sh grid17     # v16c's data, buckets of 19-22 empties: width, overlap, decay, L2, Huber
#   shared/train/pipeline.sh v17        # v16d's data (runs v16d first) fitted with L2 L2_17 (2) -> v17-lL2_17
#
# Issue 42 (committed labels in shared/train/labels, the bookfarm-eval2 format; docs/training.md):
#   shared/train/pipeline.sh labels42 [SECS]  # every label set of issue 42 in turn, SECS (900) each,
#                                             # at idle priority, resuming after the committed parts
#   shared/train/pipeline.sh from-store42     # old caches from the committed sets, then v15c if missing
#   shared/train/pipeline.sh quality42        # label quality of the d16 set (its exact sample)
#   shared/train/pipeline.sh measure42 W...   # held-out tables from the committed held-out sets
#   shared/train/pipeline.sh match42 W [8,12] # engine-searcher matches vs 1.1.0 with 95 % intervals
#   shared/train/pipeline.sh v42m             # midgame (31-36 empties) from depth-6 labels with v15c
#   shared/train/pipeline.sh match42b W L A B # W vs 1.1.0 at level L in batches of 25 pairs, seeds A..B
#   shared/train/pipeline.sh v42d [L2]        # 1.7.0's buckets of 17-24 empties refitted with v15c's data
#                                             # plus every committed depth-16 label at 18-24 -> v42d-lL2
#   shared/train/pipeline.sh v42g [L2]        # v42d plus the depth-16 labels at game positions -> v42g-lL2
#   shared/train/pipeline.sh v42r [L2]        # v42d plus the depth-16 labels at 20-22 empties -> v42r-lL2
#   shared/train/pipeline.sh v42s [L2]        # v42r with the labels' bias at 19 and 21 empties out -> v42s-lL2
#   shared/train/pipeline.sh v42t [L2]        # the depth-16 labels without depth-4/6 ones, overlap 3 -> v42t-lL2
#   shared/train/pipeline.sh v42p [L2]        # v42t in bookfarm-eval2 with its pattern terms -> v42p-lL2
#   shared/train/pipeline.sh v42pm [L2]       # v42p plus the midgame (31-36) refitted with the terms -> v42pm
#   shared/train/pipeline.sh v42q [L2]        # v42p's refit made from 1.8.0 -> v42q-lL2
#   shared/train/pipeline.sh v42n             # 1.7.0's midgame (31-36) refitted on all depth-6 labels -> v42n
#   shared/train/pipeline.sh v42e             # v42n plus the early midgame (37-44) from depth-6 labels -> v42e
#   shared/train/pipeline.sh v42f             # 1.8.0 plus the late midgame (25-30) from depth-6 labels -> v42f
set -euo pipefail
cd "$(dirname "$0")/../.."
C=${BOOKFARM_TRAIN_CACHE:-target/train}
# The shared data folder (games, flippy positions): ../shared/data beside the main checkout.
D=${BOOKFARM_DATA:-../shared/data}
B=${BOOKFARM_TRAIN_BIN:-target/release/bookfarm-train}
OLD=shared/engine/weights/bookfarm-eval-1.1.0.dat.gz
NICE="nice -n ${BOOKFARM_TRAIN_NICE:-19}"
mkdir -p "$C"
[ -x "$B" ] || cargo build --release -p bookfarm-train

log() { echo "$(date -u +%FT%TZ) $*" | tee -a "$C/pipeline.log" >&2; }
# step NAME OUTPUT CMD...: run CMD unless OUTPUT exists and NAME finished before; log times.
step() {
  local name=$1 out=$2; shift 2
  if [ -e "$out" ] && grep -q "^done $name\$" "$C/steps.done" 2>/dev/null; then return 0; fi
  log "start $name"
  local t0; t0=$(date +%s)
  # stdout (the step's summary) to the console and $name.out; tracing lines to $name.log.
  if ! $NICE /usr/bin/time -f "%U %S" -o "$C/.time.$$" "$@" > >(tee -a "$C/$name.out") 2>> "$C/$name.log"; then
    log "FAILED $name (see $C/$name.log)"; exit 1
  fi
  log "done $name: wall $(( $(date +%s) - t0 )) s, cpu $(awk '{print $1 + $2}' "$C/.time.$$") s"
  echo "done $name" >> "$C/steps.done"
}

dataset() {
  [ -e "$C/test.bin" ] || rm -f "$C/train.bin"
  step dataset "$C/train.bin" "$B" dataset --data "$D" --out "$C" --test-from-year 2015 --human-min-empties 0
}

# Held-out sets. R = openings of held-out WTHOR games (2015+, 40-50 empties) + random moves;
# W = held-out WTHOR positions. Exact labels from the engine's solver, except R 24-30
# (selective endgame search at 73 %) and W 24-30 (stored WTHOR scores: exact at 24,
# theoretical above).
heldout() {
  for spec in "14-16 300" "18-20 240" "20-22 60"; do
    set -- $spec
    step "heldout-R-$1" "$C/heldout-R-$1.bin" "$B" label --from "$C/test.bin" --openings 40-50 \
      --empties "$1" --count "$2" --seed 101 --exclude "$C/train.bin" --out "$C/heldout-R-$1.bin" --chunk 16
  done
  heldout_w
}
heldout_w() {
  for spec in "14-16 50" "18-20 15" "20-22 8"; do
    set -- $spec
    step "heldout-W-$1" "$C/heldout-W-$1.bin" "$B" label --from "$C/test.bin" \
      --empties "$1" --count "$2" --seed 102 --out "$C/heldout-W-$1.bin" --chunk 8
  done
  step heldout-W-24-30 "$C/heldout-W-24-30.bin" "$B" label --from "$C/test.bin" --empties 24-30 \
    --count 200 --seed 103 --keep-labels --out "$C/heldout-W-24-30.bin"
}

# The bigger R 20-22 set (issue 20, sixth session): the same draw as heldout-R-20-22 (seed 101,
# same openings and exclusion) extended to NRB (300) positions. The draw of N positions is the
# prefix of the draw of more, so the 60 of heldout-R-20-22 are its first 60 and are copied in
# for `label` to resume after them. Exact labels (≈ 2.3 CPU s per position).
NRB=${BOOKFARM_TRAIN_NRB:-300}
heldout_big() {
  if [ ! -e "$C/heldout-RB-20-22.bin" ] && grep -q '^done heldout-R-20-22$' "$C/steps.done" 2>/dev/null; then
    cp "$C/heldout-R-20-22.bin" "$C/heldout-RB-20-22.bin"
  fi
  step heldout-RB-20-22 "$C/heldout-RB-20-22.bin" "$B" label --from "$C/test.bin" --openings 40-50 \
    --empties 20-22 --count "$NRB" --seed 101 --exclude "$C/train.bin" --out "$C/heldout-RB-20-22.bin" --chunk 16
}

heldout_late() {
  step heldout-R-24-30 "$C/heldout-R-24-30.bin" "$B" label --from "$C/test.bin" --openings 40-50 \
    --empties 24-30 --count 14 --seed 104 --selectivity 0 --exclude "$C/train.bin" \
    --out "$C/heldout-R-24-30.bin" --chunk 2
}

# Stage-1 training labels: exact solves of training openings + random moves (T-R) and of
# training-game positions (T-G).
labels1() {
  for spec in "8-13 6000 1" "14-16 8000 2" "17-18 600 3"; do
    set -- $spec
    step "train-R-$1" "$C/train-R-$1.bin" "$B" label --from "$C/train.bin" --openings 40-50 \
      --empties "$1" --count "$2" --seed "$3" --out "$C/train-R-$1.bin" --chunk 256
  done
  step train-G-14-16 "$C/train-G-14-16.bin" "$B" label --from "$C/train.bin" --empties 14-16 \
    --count 300 --seed 4 --out "$C/train-G-14-16.bin" --chunk 256
}

HELD=(--exclude "$C/heldout-R-14-16.bin" --exclude "$C/heldout-R-18-20.bin"
      --exclude "$C/heldout-R-20-22.bin" --exclude "$C/heldout-W-14-16.bin"
      --exclude "$C/heldout-W-18-20.bin" --exclude "$C/heldout-W-20-22.bin")
FIT=(--only-search-labels --prior "$OLD" --epochs 100 --lr 0.05 --overlap 3 "${HELD[@]}")
L2=${BOOKFARM_TRAIN_L2:-30}

fit1() {
  step fit1 "$C/v12s1/eval.dat" "$B" fit --train "$C/train.bin" \
    $(for f in R-8-13 R-14-16 R-17-18 G-14-16; do echo --train "$C/train-$f.bin"; done) \
    "${FIT[@]}" --l2 "$L2" --out "$C/v12s1" --checkpoint "$C/v12s1.ckpt" --version 1.2.0
}

# Stage 2: 19-24 empties labelled by depth-8 searches with the stage-1 weights (leaves at 11-16
# empties, where stage 1 learnt from exact labels), then the final fit.
boot() {
  step train-B-19-24 "$C/train-B-19-24.bin" "$B" label --from "$C/train.bin" --openings 40-50 \
    --empties 19-24 --count 4000 --seed 5 --depth 8 --eval "$C/v12s1/eval.dat" \
    --out "$C/train-B-19-24.bin" --chunk 256
  step train-BG-19-24 "$C/train-BG-19-24.bin" "$B" label --from "$C/train.bin" --empties 19-24 \
    --count 150 --seed 6 --depth 8 --eval "$C/v12s1/eval.dat" --out "$C/train-BG-19-24.bin" --chunk 256
  # Volume over precision: 4,000 positions at depth 8 overfit (114k weights per bucket), so
  # 40,000 more at depth 6 (a few ms each) carry most of the signal; depth 8 overrides them.
  step train-S-19-24 "$C/train-S-19-24.bin" "$B" label --from "$C/train.bin" --openings 40-50 \
    --empties 19-24 --count 40000 --seed 7 --depth 6 --eval "$C/v12s1/eval.dat" \
    --out "$C/train-S-19-24.bin" --chunk 2048
  # Random positions alone cost accuracy on game positions (held-out WTHOR 18-22: 6.5 -> 8.5-9.2
  # static MAE), so training-game positions get depth-6 labels too.
  step train-SG-14-18 "$C/train-SG-14-18.bin" "$B" label --from "$C/train.bin" --empties 14-18 \
    --count 3000 --seed 8 --depth 6 --eval "$C/v12s1/eval.dat" --out "$C/train-SG-14-18.bin" --chunk 2048
  step train-G-8-13 "$C/train-G-8-13.bin" "$B" label --from "$C/train.bin" --empties 8-13 \
    --count 1000 --seed 10 --out "$C/train-G-8-13.bin" --chunk 2048
  step train-SG-19-24 "$C/train-SG-19-24.bin" "$B" label --from "$C/train.bin" --empties 19-24 \
    --count 5000 --seed 9 --depth 6 --eval "$C/v12s1/eval.dat" --out "$C/train-SG-19-24.bin" --chunk 2048
  step fit2 "$C/v12/eval.dat" "$B" fit --train "$C/train.bin" \
    $(for f in R-8-13 G-8-13 R-14-16 R-17-18 G-14-16 SG-14-18 S-19-24 SG-19-24 B-19-24 BG-19-24; do
        echo --train "$C/train-$f.bin"; done) \
    "${FIT[@]}" --l2 "$L2" --out "$C/v12" --checkpoint "$C/v12.ckpt" --version 1.2.0
}

measure() {
  local sets=(--samples "$C/heldout-R-14-16.bin" --samples "$C/heldout-R-18-20.bin"
              --samples "$C/heldout-R-20-22.bin" --samples "$C/heldout-W-14-16.bin"
              --samples "$C/heldout-W-18-20.bin" --samples "$C/heldout-W-20-22.bin"
              --samples "$C/heldout-W-24-30.bin")
  [ -e "$C/heldout-R-24-30.bin" ] && sets+=(--samples "$C/heldout-R-24-30.bin")
  [ -e "$C/flippy.bin" ] || $NICE "$B" flippy --dir "$D"/ffo/flippy_endgame \
    --train "$C/train.bin" --out "$C/flippy.bin"
  sets+=(--samples "$C/flippy.bin")
  for w in "$OLD" "$C/v12/eval.dat"; do
    log "measure $w"
    $NICE "$B" measure --weights "$w" "${sets[@]}" --depths 4 --bands 14-16,18-20,20-22,24-24,25-30,24-30 \
      | tee -a "$C/measure.log"
  done
}

match() {
  for level in 4 8; do
    step "match-L$level" "$C/match-L$level.log" "$B" engine-match --weights "$C/v12/eval.dat" \
      --opponent "$OLD" --pairs 200 --level "$level" --plies 8 --seed 1
  done
}


# ---- Candidate 1.3.0: volume and phase-by-phase bootstrap (issue 20, second session) ----------
# Exact labels where they are cheap (8-16 empties), then depth-6 search labels at 1e5 scale whose
# leaves lie in the phases fitted just before: 15-20 with the stage-E weights (leaves at 9-14),
# 19-26 with the stage-1 weights (leaves at 13-20). Random positions (R, training openings + random
# moves) and training-game positions (G) side by side, so game positions keep their accuracy.
HELD13=("${HELD[@]}" --exclude "$C/heldout-W-24-30.bin" --exclude "$C/flippy.bin")
# Stage E uses 1.2.0's settings (overlap 3, L2 30); the later fits overlap 6 (each 2-ply bucket
# trains on 14 plies) and L2 10: on the stage-E labels these gave R 14-16 8.8 against 9.5 (W 14-16
# 8.4 against 8.3): sparse patterns need the pooled data more than phase resolution.
FIT13=(--only-search-labels --prior "$OLD" --epochs 100 --lr 0.05 "${HELD13[@]}")
# label13 NAME SEED ARGS...: a training label cache $C/t13-NAME.bin from train.bin.
label13() {
  local name=$1 seed=$2; shift 2
  step "t13-$name" "$C/t13-$name.bin" "$B" label --from "$C/train.bin" --seed "$seed" \
    --out "$C/t13-$name.bin" --chunk 4096 "$@"
}
# fit13 NAME OVERLAP L2 CACHES...: fine-tune 1.1.0 on train.bin's exact WTHOR scores and the
# t13-CACHES (later caches override earlier labels of the same position) -> $C/v13NAME.
fit13() {
  local name=$1 overlap=$2 l2=$3; shift 3
  step "fit13-$name" "$C/v13$name/eval.dat" "$B" fit --train "$C/train.bin" \
    $(for f in "$@"; do echo --train "$C/t13-$f.bin"; done) \
    "${FIT13[@]}" --overlap "$overlap" --l2 "$l2" --out "$C/v13$name" --checkpoint "$C/v13$name.ckpt" \
    --version 1.3.0
}
flippy() {
  [ -e "$C/flippy.bin" ] || $NICE "$B" flippy --dir "$D"/ffo/flippy_endgame \
    --train "$C/train.bin" --out "$C/flippy.bin"
}
v13e() {
  flippy
  label13 XR-8-13 31 --openings 40-50 --empties 8-13 --count 60000
  label13 XG-8-13 32 --empties 8-13 --count 4000
  label13 XR-14-16 33 --openings 40-50 --empties 14-16 --count 8192
  label13 XG-14-16 34 --empties 14-16 --count 1500
  fit13 e 3 30 XR-8-13 XG-8-13 XR-14-16 XG-14-16
}
E13=(XR-8-13 XG-8-13 XR-14-16 XG-14-16)
v13b1() {
  label13 S1R-15-20 41 --openings 40-50 --empties 15-20 --count 80000 --depth 6 --eval "$C/v13e/eval.dat"
  label13 S1G-15-20 42 --empties 15-20 --count 4000 --depth 6 --eval "$C/v13e/eval.dat"
  fit13 1 6 10 S1G-15-20 S1R-15-20 "${E13[@]}"
}
B13=(S1G-15-20 S1R-15-20 "${E13[@]}")
v13b2() {
  label13 S2R-19-26 51 --openings 40-50 --empties 19-26 --count 300000 --depth 6 --eval "$C/v131/eval.dat"
  label13 S2G-19-26 52 --empties 19-26 --count 5000 --depth 6 --eval "$C/v131/eval.dat"
  fit13 2 6 10 S2G-19-26 S2R-19-26 "${B13[@]}"
}
# Second bootstrap round: the first 100,000 positions of S2R (same seed, so the same positions)
# relabelled with the stage-2 weights, listed last so their labels override the stage-1 ones.
# v132 lost 0.2-0.3 discs on game positions at 14-16 (W, flippy) against 1.1.0, so more exact
# training-game positions there (cheap: ~6 ms each, game positions solve faster than random ones).
v13g() {
  label13 XG2-14-16 35 --empties 14-16 --count 8000
}
v13b3() {
  label13 S3R-19-26 51 --openings 40-50 --empties 19-26 --count 100000 --depth 6 --eval "$C/v132/eval.dat"
  v13g
  fit13 3 6 10 S2G-19-26 S2R-19-26 S3R-19-26 "${B13[@]}" XG2-14-16
}
# Volume check: 393,216 more random positions at 19-26 labelled with v133.
v13b4() {
  label13 S4R-19-26 71 --openings 40-50 --empties 19-26 --count 393216 --depth 6 --eval "$C/v133/eval.dat"
  fit13 4 6 10 S2G-19-26 S2R-19-26 S3R-19-26 S4R-19-26 "${B13[@]}" XG2-14-16
}
measure13() {
  flippy
  local sets=(--samples "$C/heldout-R-14-16.bin" --samples "$C/heldout-R-18-20.bin"
              --samples "$C/heldout-R-20-22.bin" --samples "$C/heldout-W-14-16.bin"
              --samples "$C/heldout-W-18-20.bin" --samples "$C/heldout-W-20-22.bin"
              --samples "$C/heldout-W-24-30.bin" --samples "$C/flippy.bin")
  # The bigger R 20-22 set (heldout-big) when it has been built.
  [ -e "$C/heldout-RB-20-22.bin" ] && grep -q '^done heldout-RB-20-22$' "$C/steps.done" 2>/dev/null \
    && sets+=(--samples "$C/heldout-RB-20-22.bin")
  for w in "$@"; do
    log "measure $w"
    $NICE "$B" measure --weights "$w" "${sets[@]}" --depths 4 --bands 14-16,18-20,20-22,24-24,25-30 \
      | tee -a "$C/measure13.log"
  done
}
match13() {
  local w=$1
  for level in 4 8; do
    local name; name="match13-L$level-$(basename "$(dirname "$w")")"
    step "$name" "$C/$name.log" "$B" engine-match \
      --weights "$w" --opponent "$OLD" --pairs 200 --level "$level" --plies 8 --seed 1
  done
}

# ---- Candidate 1.4.0: 10^6 depth-4 labels at 14-26, game and random positions 1:1 --------------
# Depth 4 rather than 6: 0.13-0.16 ms against 1.1-1.4 ms per label here, i.e. 7-9 times the volume
# for the same CPU, and the fit was volume-bound (docs/training.md). One phase 14-26 labelled by
# v131 (fitted on depth-6 labels at 15-20 whose leaves lie at 9-14, where v13e learnt from exact
# labels). Game positions (G: train.bin, `--count` per empties value) and openings + random moves
# (R) 1:1, so the shared pattern weights see as many balanced game positions as lopsided random
# ones. The exact caches of stage E are listed last: their labels override search labels of the
# same positions.
F14_OVERLAP=${BOOKFARM_TRAIN_OVERLAP:-6}
F14_L2=${BOOKFARM_TRAIN_L2_14:-10}
# label14 NAME SEED ARGS...: as label13, checkpointing every 16,384 labels (the cache is rewritten
# after every chunk, so small chunks cost quadratic IO at 10^6 labels).
label14() {
  local name=$1 seed=$2; shift 2
  step "t13-$name" "$C/t13-$name.bin" "$B" label --from "$C/train.bin" --seed "$seed" \
    --out "$C/t13-$name.bin" --chunk 16384 "$@"
}
# fit14 NAME OVERLAP L2 CACHES... [-- FIT OPTIONS...] -> $C/NAME (as fit13, version 1.4.0).
fit14() {
  local name=$1 overlap=$2 l2=$3; shift 3
  local caches=() extra=()
  while [ $# -gt 0 ] && [ "$1" != "--" ]; do caches+=("$1"); shift; done
  [ $# -gt 0 ] && { shift; extra=("$@"); }
  step "fit14-$name" "$C/$name/eval.dat" "$B" fit --train "$C/train.bin" \
    $(for f in "${caches[@]}"; do echo --train "$C/t13-$f.bin"; done) \
    "${FIT13[@]}" --overlap "$overlap" --l2 "$l2" --out "$C/$name" --version 1.4.0 "${extra[@]}"
}
# Random positions per stage (R: N14 in total; G: about as many, spread over the empties values).
N14=${BOOKFARM_TRAIN_N14:-500000}
A14=(MG-14-26 MR-14-26 S1G-15-20 S1R-15-20 "${E13[@]}")
B14=(MG-14-26 MG6-14-26 MR-14-26 S1G-15-20 S1R-15-20 "${E13[@]}")
v14a() {
  label14 MR-14-26 81 --openings 40-50 --empties 14-26 --count "$N14" --depth 4 --eval "$C/v131/eval.dat"
  label14 MG-14-26 82 --empties 14-26 --count $(( N14 / 13 )) --depth 4 --eval "$C/v131/eval.dat"
  fit14 v14a "$F14_OVERLAP" "$F14_L2" "${A14[@]}" -- --checkpoint "$C/v14a.ckpt"
}
# Stage b tests whether the game positions' depth-4 labels keep v14a behind 1.1.0 on W / flippy at
# 14-20: the first 10,000 game positions per empties value of MG (same seed, so the same
# positions) are relabelled at depth 6 with v14a and override their depth-4 labels. (They did
# not: v14b is within 0.05 discs of v14a everywhere.)
v14b() {
  label14 MG6-14-26 82 --empties 14-26 --count 10000 --depth 6 --eval "$C/v14a/eval.dat"
  fit14 v14b "$F14_OVERLAP" "$F14_L2" "${B14[@]}" -- --checkpoint "$C/v14b.ckpt"
}
# Stage c: v14a/b lost depth-4 accuracy on game positions at 14-16 (W, flippy) while their static
# accuracy there held: the depth-4 leaves lie at 10-12 empties, whose buckets the overlap-6 fit
# pulled towards random positions. v14c fits only the buckets of 13-30 empties (15-23) on v14b's
# caches and keeps 1.1.0 elsewhere.
v14c() {
  fit14 v14c "$F14_OVERLAP" "$F14_L2" "${B14[@]}" -- --only-buckets 15,16,17,18,19,20,21,22,23 \
    --checkpoint "$C/v14c.ckpt"
}
# L2 x overlap on a 5 % validation split of the training labels (not the held-out sets) with
# one-bucket fits; bucket b = plies 2b, 2b+1 = empties 60-2b, 59-2b (18: 23-24, 19: 21-22,
# 20: 19-20, 22: 15-16). Stage a uses the v14a caches, stage b the v14b ones. The validation
# tables are appended to $C/sweep14.out.
sweep14() {
  local stage=$1 buckets=$2; shift 2
  local caches=("${A14[@]}")
  [ "$stage" = b ] && caches=("${B14[@]}")
  for ov in ${SWEEP_OVERLAPS:-3 6}; do
    for l2 in ${SWEEP_L2S:-3 10 30}; do
      local name="sweep14$stage-b${buckets//,/_}-o$ov-l$l2"
      fit14 "$name" "$ov" "$l2" "${caches[@]}" -- --validation 50 --only-buckets "$buckets"
      { echo "## $name"; grep '^| ' "$C/fit14-$name.out"; } >> "$C/sweep14.out"
    done
  done
}

# ---- Candidate 1.5.0 (fourth session): exact labels where the goal is measured ----------------
# Exact solves of training openings + random moves (X5R) and of training-game positions (X5G),
# 1:1, at 18-22 empties, where R 20-22 is measured. Solver cost on these positions (one thread,
# release build, x86-64-v3 solver): 18-20 ≈ 0.4 s, 20-22 ≈ 2.3 s, 24 ≈ 25 s per random position,
# so 24 is out of reach at volume and 18-22 gets the hour. Checkpoints every 32 labels.
# 1,000 random positions were planned; the session stopped at 256 (the first 256 of the 1,000
# draw are the 256 draw, so the default rebuilds exactly what v15e used).
N15R=${BOOKFARM_TRAIN_N15R:-256}
N15G=${BOOKFARM_TRAIN_N15G:-200}
label15() {
  local name=$1 seed=$2; shift 2
  step "t13-$name" "$C/t13-$name.bin" "$B" label --from "$C/train.bin" --seed "$seed" \
    --out "$C/t13-$name.bin" --chunk 32 "$@"
}
v15x() {
  label15 X5G-18-22 92 --empties 18-22 --count "$N15G"
  label15 X5R-18-22 91 --openings 40-50 --empties 18-22 --count "$N15R"
}
# v15a: 1.4.0 without its depth-6 game relabelling (v14b changed nothing by more than 0.05): the
# depth-4 caches of v14a, fitted on the buckets of 13-30 empties only (1.1.0 elsewhere), as v14c.
ONLY15=(--only-buckets 15,16,17,18,19,20,21,22,23)
v15a() {
  label14 MR-14-26 81 --openings 40-50 --empties 14-26 --count "$N14" --depth 4 --eval "$C/v131/eval.dat"
  label14 MG-14-26 82 --empties 14-26 --count $(( N14 / 13 )) --depth 4 --eval "$C/v131/eval.dat"
  fit14 v15a "$F14_OVERLAP" "$F14_L2" "${A14[@]}" -- "${ONLY15[@]}" --checkpoint "$C/v15a.ckpt"
}
# v15c: v15a's data and buckets fitted to convergence. At 10^6 labels, 100 full-batch epochs at
# lr 0.05 from the 1.1.0 prior stop far from the optimum: on bucket 19 (21-22 empties) 300
# epochs at lr 0.1 take the validation MAE on random positions' depth-4 labels from 6.90 to
# 4.70 (game positions 4.66 -> 4.32), with the training MAE close to it (no overfitting).
E15=${BOOKFARM_TRAIN_EPOCHS15:-300}
LR15=${BOOKFARM_TRAIN_LR15:-0.1}
# fit_search STEP VERSION HELD NAME CACHES... [-- FIT OPTIONS...] -> $C/NAME: fine-tune 1.1.0 on
# the search and exact labels of train.bin and the t13-CACHES (overlap F14_OVERLAP, L2 F14_L2,
# E15 epochs at LR15), never on the positions of the array named HELD; the step is STEP-NAME.
fit_search() {
  local prefix=$1 version=$2 name=$4
  local -n held=$3
  shift 4
  local caches=() extra=()
  while [ $# -gt 0 ] && [ "$1" != "--" ]; do caches+=("$1"); shift; done
  [ $# -gt 0 ] && { shift; extra=("$@"); }
  step "$prefix-$name" "$C/$name/eval.dat" "$B" fit --train "$C/train.bin" \
    $(for f in "${caches[@]}"; do echo --train "$C/t13-$f.bin"; done) \
    --only-search-labels --prior "$OLD" --epochs "$E15" --lr "$LR15" "${held[@]}" \
    --overlap "$F14_OVERLAP" --l2 "$F14_L2" --out "$C/$name" --version "$version" "${extra[@]}"
}
# fit15 NAME CACHES... [-- FIT OPTIONS...] -> $C/NAME (overlap 6, L2 10, E15 epochs at LR15).
fit15() { fit_search fit15 1.5.0 HELD13 "$@"; }
v15c() {
  fit15 "v15c-e$E15" "${A14[@]}" -- "${ONLY15[@]}" --checkpoint "$C/v15c-e$E15.ckpt"
}
# v15e: v15c plus the exact 18-22 caches, each exact sample counted K15E times (the random cache
# is the prefix that was labelled when the session stopped it, see docs/training.md). (Within
# 0.06 of v15c everywhere: 1,256 exact labels among 383,000 search labels at 18-22 do nothing.)
K15E=${BOOKFARM_TRAIN_K15E:-20}
v15e() {
  fit15 "v15e-k$K15E" "${A14[@]}" -- "${ONLY15[@]}" \
    --weighted-train "$K15E:$C/t13-X5G-18-22.bin" --weighted-train "$K15E:$C/t13-X5R-18-22.bin" \
    --checkpoint "$C/v15e-k$K15E.ckpt"
}
# v15f: v15c restricted to the buckets of 17-30 empties (15-21): do the depth-4 losses on game
# positions at 18-22 (flippy) come from the 13-16-empties buckets, their leaves?
v15f() {
  fit15 v15f "${A14[@]}" -- --only-buckets 15,16,17,18,19,20,21 --checkpoint "$C/v15f.ckpt"
}
# v15g: one bootstrap round: the same 10^6 positions (same seeds) relabelled at depth 4 with v15c
# (its depth-4 MAE on R 20-22 is 5.25 against v131's 5.65), fitted as v15c. (It changed R by
# < 0.1 either way and lost 0.1-0.2 on W: at depth 4 the labels' error is the search's horizon,
# not its leaves.)
v15g() {
  local w="$C/v15c-e$E15/eval.dat"
  label14 MR2-14-26 81 --openings 40-50 --empties 14-26 --count "$N14" --depth 4 --eval "$w"
  label14 MG2-14-26 82 --empties 14-26 --count $(( N14 / 13 )) --depth 4 --eval "$w"
  fit15 v15g MG2-14-26 MR2-14-26 S1G-15-20 S1R-15-20 "${E13[@]}" -- "${ONLY15[@]}" \
    --checkpoint "$C/v15g.ckpt"
}
# v15h: depth-6 labels with v15c for the first 250,000 random positions of MR (the same draw's
# prefix), overriding their depth-4 labels; fitted as v15c.
v15h() {
  label14 MR6-14-26 81 --openings 40-50 --empties 14-26 --count 250000 --depth 6 \
    --eval "$C/v15c-e$E15/eval.dat"
  fit15 v15h MG-14-26 MR-14-26 MR6-14-26 S1G-15-20 S1R-15-20 "${E13[@]}" -- "${ONLY15[@]}" \
    --checkpoint "$C/v15h.ckpt"
}
# v15i: v15h extended to every position of v15a's depth-4 caches: the whole MR draw (500,000
# random positions; the first 250,000 are v15h's MR6 cache, copied so `label` resumes after them)
# and the whole MG draw (game positions, N14/13 per empties value) relabelled at depth 6 with
# v15c. These caches override every depth-4 label, so MR and MG are not listed; fitted as v15c.
v15i_labels() {
  local w="$C/v15c-e$E15/eval.dat"
  if [ ! -e "$C/t13-MR6i-14-26.bin" ] && grep -q '^done t13-MR6-14-26$' "$C/steps.done" 2>/dev/null; then
    cp "$C/t13-MR6-14-26.bin" "$C/t13-MR6i-14-26.bin"
  fi
  label14 MR6i-14-26 81 --openings 40-50 --empties 14-26 --count "$N14" --depth 6 --eval "$w"
  label14 MG6i-14-26 82 --empties 14-26 --count $(( N14 / 13 )) --depth 6 --eval "$w"
}
v15i() {
  v15i_labels
  fit15 v15i MG6i-14-26 MR6i-14-26 S1G-15-20 S1R-15-20 "${E13[@]}" -- "${ONLY15[@]}" \
    --checkpoint "$C/v15i.ckpt"
}
# v15j: which half of v15i's relabelling moves the game-position sets? The 500,000 random
# positions at depth 6 (v15i's MR6i), the game positions keep their depth-4 labels (MG).
v15j() {
  v15i_labels
  fit15 v15j MG-14-26 MR6i-14-26 S1G-15-20 S1R-15-20 "${E13[@]}" -- "${ONLY15[@]}" \
    --checkpoint "$C/v15j.ckpt"
}
# v15k: a second depth-6 round: the same 500,000 random positions relabelled with v15j, fitted
# as v15j (game positions at depth 4).
v15k() {
  v15j
  label14 MR6k-14-26 81 --openings 40-50 --empties 14-26 --count "$N14" --depth 6 \
    --eval "$C/v15j/eval.dat"
  fit15 v15k MG-14-26 MR6k-14-26 S1G-15-20 S1R-15-20 "${E13[@]}" -- "${ONLY15[@]}" \
    --checkpoint "$C/v15k.ckpt"
}
# Convergence check on bucket 19 with a 5 % validation split (E15 / LR15 from the environment).
conv15() {
  fit15 "conv15-b19-e$E15-lr$LR15" "${A14[@]}" -- --validation 50 --only-buckets 19
}
# Capacity check: one bucket (19 = 21-22 empties) fitted with a 5 % validation split; the report
# puts the MAE on the held-back labels next to the MAE on the labels it was fitted on.
cap15() {
  fit14 cap15-b19 "$F14_OVERLAP" "$F14_L2" "${A14[@]}" -- --validation 50 --only-buckets 19
}
# Error analysis of weights W on the held-out sets and on the exact training caches X5 (which
# v15a never saw): static and depth-4 MAE per |exact score|, |static eval| (calibration),
# mobility and |disc difference|.
analyse15() {
  flippy
  for w in "$@"; do
    log "analyse $w"
    $NICE "$B" measure --weights "$w" --samples "$C/heldout-R-18-20.bin" \
      --samples "$C/heldout-R-20-22.bin" --samples "$C/heldout-W-18-20.bin" \
      --samples "$C/heldout-W-20-22.bin" --samples "$C/flippy.bin" \
      $(for f in X5R-18-22 X5G-18-22; do [ -e "$C/t13-$f.bin" ] && echo --samples "$C/t13-$f.bin"; done) \
      --depths 4 --bands 18-20,20-22 --by score,eval,mobility,discs | tee -a "$C/analyse15.log"
  done
}

# ---- Candidate 1.6.0 (sixth session): which label is worth its CPU at 18-22 empties? ---------
# Label quality on the bigger R 20-22 set: its first NLQ positions redrawn (same seed, openings
# and exclusion, so the same positions) and labelled by the engine's searcher with the v15j
# weights, each spec "NAME DEPTH SELECTIVITY" (depth 60 = an endgame search, selective below
# selectivity 5: 0/1/2 = 73/87/95 %); `compare` puts each against the exact labels. The step
# name carries NLQ, so a larger NLQ resumes the same cache. CPU per position: $C/pipeline.log.
NLQ=${BOOKFARM_TRAIN_NLQ:-300}
LQ16_SPECS=${BOOKFARM_TRAIN_LQ16:-"d4 4 5|d6 6 5|d8 8 5|d10 10 5|d12 12 5|d14 14 5|d10p73 10 0|d12p73 12 0|d14p73 14 0|d16p73 16 0|d18p73 18 0|e73 60 0|e87 60 1|e95 60 2"}
lq16() {
  heldout_big
  local w="$C/v15j/eval.dat" files=()
  IFS='|' read -ra specs <<< "$LQ16_SPECS"
  for spec in "${specs[@]}"; do
    set -- $spec
    step "lq16-$1-n$NLQ" "$C/lq16-$1.bin" "$B" label --from "$C/test.bin" --openings 40-50 \
      --empties 20-22 --count "$NLQ" --seed 101 --exclude "$C/train.bin" --depth "$2" \
      --selectivity "$3" --eval "$w" --out "$C/lq16-$1.bin" --chunk 16
    files+=(--labels "$C/lq16-$1.bin")
  done
  "$B" compare --reference "$C/heldout-RB-20-22.bin" "${files[@]}" --bands 20-22,20-20,21-21,22-22 \
    | tee -a "$C/lq16.out"
}

# CPU per label at 18-22 (the band v16a labels): NCOST (1,000) training openings + random moves
# per spec of COST16 ("NAME DEPTH SELECTIVITY", v15j weights), no --exclude, so the draw costs
# ≈ 1 s; `d1` measures that fixed cost. CPU per step in $C/pipeline.log.
NCOST=${BOOKFARM_TRAIN_NCOST:-1000}
COST16=${BOOKFARM_TRAIN_COST16:-"d1 1 5|d6 6 5|d8 8 5|d10p73 10 0|d12p73 12 0|d14p73 14 0|d16p73 16 0|d12 12 5"}
cost16() {
  IFS='|' read -ra specs <<< "$COST16"
  for spec in "${specs[@]}"; do
    set -- $spec
    step "cost16-$1-n$NCOST" "$C/cost16-$1.bin" "$B" label --from "$C/train.bin" --openings 40-50 \
      --empties 18-22 --count "$NCOST" --seed 162 --depth "$2" --selectivity "$3" \
      --eval "$C/v15j/eval.dat" --out "$C/cost16-$1.bin" --chunk 1000
  done
}

# v16a: N16 new random positions (training openings + random moves) at 18-22 empties labelled
# with the best label the session's CPU allowed at that volume (D16 / SEL16: depth 12 at 73 %
# probcut selectivity, with v15j: 3.3 discs from exact at 20-22 for ≈ 10 ms; depth 14 at 73 %,
# 2.6 discs for ≈ 17 ms, ran at 23 ms under load and was stopped after 8,192 labels, its cache
# t13-L16R-d14s0-18-22 is unused), added to v15j's data and fitted as v15j (300 epochs
# at lr 0.1, buckets of 13-30 empties), the bigger R 20-22 set excluded too. Checkpoints every
# 8,192 labels; a run stopped early can be finished at the cache's length (N16 = that length,
# the draw of fewer positions being the prefix of the draw of more).
N16=${BOOKFARM_TRAIN_N16:-200000}
D16=${BOOKFARM_TRAIN_D16:-12}
SEL16=${BOOKFARM_TRAIN_SEL16:-0}
# The cache is named after its search, so another D16 / SEL16 never resumes it.
L16R="L16R-d${D16}s${SEL16}-18-22"
HELD16=("${HELD13[@]}" --exclude "$C/heldout-RB-20-22.bin")
# fit16 NAME CACHES... [-- FIT OPTIONS...] -> $C/NAME (as fit15 with the bigger R set excluded).
fit16() { fit_search fit16 1.6.0 HELD16 "$@"; }
v16a_labels() {
  heldout_big
  step "t13-$L16R" "$C/t13-$L16R.bin" "$B" label --from "$C/train.bin" --seed 161 \
    --openings 40-50 --empties 18-22 --count "$N16" --depth "$D16" --selectivity "$SEL16" \
    --eval "$C/v15j/eval.dat" "${HELD16[@]}" --out "$C/t13-$L16R.bin" --chunk 8192
}
v16a() {
  v16a_labels
  fit16 v16a MG-14-26 MR6i-14-26 S1G-15-20 S1R-15-20 "${E13[@]}" "$L16R" -- "${ONLY15[@]}" \
    --checkpoint "$C/v16a.ckpt"
}

# v16b: does volume still pay? v16a's draw extended to N16B (300,000) positions (the 200,000 of
# v16a are its prefix, copied so `label` resumes after them), fitted as v16a.
N16B=${BOOKFARM_TRAIN_N16B:-300000}
v16b() {
  v16a_labels
  local big="$L16R-n$N16B"
  if [ ! -e "$C/t13-$big.bin" ]; then cp "$C/t13-$L16R.bin" "$C/t13-$big.bin"; fi
  step "t13-$big" "$C/t13-$big.bin" "$B" label --from "$C/train.bin" --seed 161 \
    --openings 40-50 --empties 18-22 --count "$N16B" --depth "$D16" --selectivity "$SEL16" \
    --eval "$C/v15j/eval.dat" "${HELD16[@]}" --out "$C/t13-$big.bin" --chunk 8192
  fit16 v16b MG-14-26 MR6i-14-26 S1G-15-20 S1R-15-20 "${E13[@]}" "$big" -- "${ONLY15[@]}" \
    --checkpoint "$C/v16b.ckpt"
}

# v16c: v16b with the depth-12 labels counted K16C (2) times (weighted least squares by
# repetition): do the better labels gain from more weight against the depth-6 / depth-4 ones?
K16C=${BOOKFARM_TRAIN_K16C:-2}
v16c() {
  local big="$L16R-n$N16B"
  grep -q "^done t13-$big\$" "$C/steps.done" 2>/dev/null || v16b
  fit16 "v16c-k$K16C" MG-14-26 MR6i-14-26 S1G-15-20 S1R-15-20 "${E13[@]}" -- "${ONLY15[@]}" \
    --weighted-train "$K16C:$C/t13-$big.bin" --checkpoint "$C/v16c-k$K16C.ckpt"
}

# v16d: v16c lost 0.1-0.3 discs on game positions (W, flippy) against v15j: do game positions at
# 18-22 with the same depth-12 labels win them back? N16G (20,000) training-game positions per
# empties value 18-22 (seed 163), labelled like v16a, counted K16C times like the random ones.
N16G=${BOOKFARM_TRAIN_N16G:-20000}
v16d() {
  local big="$L16R-n$N16B" g="L16G-d${D16}s${SEL16}-18-22"
  grep -q "^done t13-$big\$" "$C/steps.done" 2>/dev/null || v16b
  step "t13-$g" "$C/t13-$g.bin" "$B" label --from "$C/train.bin" --seed 163 --empties 18-22 \
    --count "$N16G" --depth "$D16" --selectivity "$SEL16" --eval "$C/v15j/eval.dat" "${HELD16[@]}" \
    --out "$C/t13-$g.bin" --chunk 8192
  fit16 "v16d-k$K16C" MG-14-26 MR6i-14-26 S1G-15-20 S1R-15-20 "${E13[@]}" -- "${ONLY15[@]}" \
    --weighted-train "$K16C:$C/t13-$big.bin" --weighted-train "$K16C:$C/t13-$g.bin" \
    --checkpoint "$C/v16d-k$K16C.ckpt"
}

# ---- Seventh session: is the fit the limit? ----------------------------------------------------
# grid17: v16c's data (K16C-weighted depth-12 labels), the buckets R 20-22 reads (width 2: 19, 20;
# width 1: plies 38-40) refitted with other fit structures, prior 1.1.0, then static MAE on the
# held-out sets with the per-band bias (`measure` prints mean evaluation - label). `base`
# reproduces v16c on these buckets. Results in $C/grid17.log (docs/training.md, seventh session).
grid17_fit() {
  local name=$1 width=$2 overlap=$3 l2=$4 only=$5; shift 5
  local big="$L16R-n$N16B"
  step "grid17-$name" "$C/grid17-$name/eval.dat" "$B" fit --train "$C/train.bin" \
    $(for f in MG-14-26 MR6i-14-26 S1G-15-20 S1R-15-20 "${E13[@]}"; do echo --train "$C/t13-$f.bin"; done) \
    --weighted-train "$K16C:$C/t13-$big.bin" --only-search-labels --prior "$OLD" --epochs "$E15" \
    --lr "$LR15" "${HELD16[@]}" --bucket-width "$width" --overlap "$overlap" --l2 "$l2" \
    --only-buckets "$only" --out "$C/grid17-$name" --version 1.7.0 "$@"
  log "measure grid17-$name"
  { echo "## grid17-$name: width $width overlap $overlap l2 $l2 $*"
    $NICE "$B" measure --weights "$C/grid17-$name/eval.dat" --samples "$C/heldout-RB-20-22.bin" \
      --samples "$C/flippy.bin" --bands 20-22,20-20,21-21,22-22; } | tee -a "$C/grid17.log"
}
grid17() {
  grep -q "^done t13-$L16R-n$N16B\$" "$C/steps.done" 2>/dev/null || v16b
  grid17_fit base 2 6 10 19,20
  grid17_fit w1o6d7 1 6 10 38,39,40 --overlap-decay 0.7
  grid17_fit w2o6d7 2 6 10 19,20 --overlap-decay 0.7
  grid17_fit w1o6 1 6 10 38,39,40
  grid17_fit w2o6h4 2 6 10 19,20 --huber 4
  grid17_fit w2o3 2 3 10 19,20
  grid17_fit w2o6l2 2 6 2 19,20
  grid17_fit w2o10d8 2 10 10 19,20 --overlap-decay 0.8
  grid17_fit w2o6l05 2 6 0.5 19,20
  grid17_fit w2o3l2 2 3 2 19,20
}

# v17: the one fit change of grid17 that moved R 20-22 (a weaker pull towards the 1.1.0 prior,
# L2 L2_17 = 2 instead of 10) on v16d's data (random and game positions at 18-22 with depth-12
# labels, counted K16C times), every bucket of 13-30 empties.
L2_17=${BOOKFARM_TRAIN_L2_17:-2}
v17() {
  local big="$L16R-n$N16B" g="L16G-d${D16}s${SEL16}-18-22"
  grep -q "^done t13-$g\$" "$C/steps.done" 2>/dev/null || v16d
  F14_L2=$L2_17 fit16 "v17-l$L2_17" MG-14-26 MR6i-14-26 S1G-15-20 S1R-15-20 "${E13[@]}" -- \
    "${ONLY15[@]}" --weighted-train "$K16C:$C/t13-$big.bin" --weighted-train "$K16C:$C/t13-$g.bin" \
    --checkpoint "$C/v17-l$L2_17.ckpt"
}

# ---- Issue 42: committed labels (shared/train/labels) --------------------------------------------
# Every label set of the issue: NAME, then the `labels run` arguments (draw, spec, checkpoint size:
# a chunk of exact solves at 20-22 empties is ≈ 2 CPU s a position). Once a set has parts its
# arguments never change, except --count (the draw of n is the prefix of the draw of more). The
# held-out sets are the draws of `heldout` / `heldout-big` (same functions, seeds and exclusions);
# when their old caches exist they are imported instead of solved again. The x… sets are stage E's
# exact labels of 1.3.0-1.7 (`v13e`: t13-XR-8-13, XG-8-13, XR-14-16, XG-14-16, same draws), the
# start of every search-labelled fit since. The 1.1.0-labelled d16 set (r1824-d16p73-w110-s421) is
# closed at 2,816 labels; its successors search with v15c, and q-d16p73-v15c labels the 100
# positions of the exact sample with their spec (their label quality).
L=${BOOKFARM_TRAIN_LABELS:-shared/train/labels}
IDLE=${BOOKFARM_TRAIN_IDLE:-chrt --idle 0}
# v15c (issue 20, fourth session), rebuilt bit for bit from the committed exact sets by
# `pipeline.sh v13e v13b1 v15a v15c` (≈ 430 CPU s; FNV-1a 64 ba9bda7ccbaf5881): the leaves of the
# deep label sets below (the 1.1.0-labelled d16 set showed 1.1.0's parity bias, 1.6-2.4 discs at
# odd empties).
V15C=$C/v15c-e300/eval.dat
sets42() {
  local held="--from $C/test.bin --openings 40-50 --seed 101 --exclude $C/train.bin"
  cat <<EOF
heldout-r1416-s101 $held --empties 14-16 --count 300 --chunk 32
heldout-r1820-s101 $held --empties 18-20 --count 240 --chunk 16
heldout-r2022-s101 $held --empties 20-22 --count 300 --chunk 8
heldout-w1416-s102 --from $C/test.bin --empties 14-16 --count 50 --seed 102 --chunk 32
heldout-w1820-s102 --from $C/test.bin --empties 18-20 --count 15 --seed 102 --chunk 16
heldout-w2022-s102 --from $C/test.bin --empties 20-22 --count 8 --seed 102 --chunk 8
x0813-r-s31 --from $C/train.bin --openings 40-50 --empties 8-13 --count 60000 --seed 31 --chunk 4096
x0813-g-s32 --from $C/train.bin --empties 8-13 --count 4000 --seed 32 --chunk 4096
x1416-r-s33 --from $C/train.bin --openings 40-50 --empties 14-16 --count 8192 --seed 33 --chunk 512
x1416-g-s34 --from $C/train.bin --empties 14-16 --count 1500 --seed 34 --chunk 512
q-r1824-d16p73-w110-s421 --from $L/r1824-d16p73-w110-s421/part-00000.bfl.gz --empties 18-22 --count 20 --seed 431 --chunk 8
q-d16p73-v15c --from $L/q-r1824-d16p73-w110-s421 --games --empties 18-22 --count 100 --seed 1 --depth 16 --selectivity 0 --eval $V15C --chunk 16
r1824-d16p73-v15c-s425 --from $C/train.bin --openings 40-50 --empties 18-24 --count ${N42R:-1000000} --seed 425 --depth 16 --selectivity 0 --eval $V15C --chunk 64
g1824-d16p73-v15c-s426 --from $C/train.bin --games --empties 18-24 --count ${N42G:-1000000} --seed 426 --depth 16 --selectivity 0 --eval $V15C --chunk 64
EOF
}
# Old held-out caches (heldout / heldout-big) become the first part of their set: copied into the
# set's work checkpoint, which `labels run` checks against the draw and commits as part 0.
import42() {
  local work=target/train/labels-work
  mkdir -p "$work"
  for pair in heldout-r1416-s101:heldout-R-14-16 heldout-r1820-s101:heldout-R-18-20 \
              heldout-r2022-s101:heldout-RB-20-22 heldout-w1416-s102:heldout-W-14-16 \
              heldout-w1820-s102:heldout-W-18-20 heldout-w2022-s102:heldout-W-20-22 \
              x0813-r-s31:t13-XR-8-13 x0813-g-s32:t13-XG-8-13 x1416-r-s33:t13-XR-14-16 \
              x1416-g-s34:t13-XG-14-16; do
    local set=${pair%%:*} step=${pair#*:}
    local old=$C/$step.bin
    if [ -e "$old" ] && grep -q "^done $step\$" "$C/steps.done" 2>/dev/null \
       && [ ! -e "$L/$set/part-00000.bfl.gz" ] && [ ! -e "$work/$set.from-0.bin" ]; then
      cp "$old" "$work/$set.from-0.bin"
      # The CPU seconds the old step logged become the part's.
      sed -n "s/^.* done $step: .* cpu \([0-9.]*\) s\$/\1/p" "$C/pipeline.log" | tail -1 \
        > "$work/$set.from-0.cpu"
    fi
  done
}
# The committed sets as the old steps' caches (held-out sets, stage E's exact labels), marked done,
# so that the chains of issue 20 start from the store instead of solving them again; then v15c
# (the leaves of the deep sets) when it is missing: ≈ 510 CPU s on a fresh machine.
from_store42() {
  dataset
  flippy
  local pair set cache
  for pair in heldout-r1416-s101:heldout-R-14-16 heldout-r1820-s101:heldout-R-18-20 \
              heldout-r2022-s101:heldout-RB-20-22 heldout-w1416-s102:heldout-W-14-16 \
              heldout-w1820-s102:heldout-W-18-20 heldout-w2022-s102:heldout-W-20-22 \
              x0813-r-s31:t13-XR-8-13 x0813-g-s32:t13-XG-8-13 x1416-r-s33:t13-XR-14-16 \
              x1416-g-s34:t13-XG-14-16; do
    set=${pair%%:*} cache=${pair#*:}
    grep -q "^done $cache\$" "$C/steps.done" 2>/dev/null && continue
    [ -e "$L/$set/part-00000.bfl.gz" ] || continue
    "$B" labels cache --set "$L/$set" --out "$C/$cache.bin" && echo "done $cache" >> "$C/steps.done"
  done
  # The 60 positions of the old R 20-22 set are the first 60 of the 300 (same draw).
  if ! grep -q '^done heldout-R-20-22$' "$C/steps.done" 2>/dev/null && [ -e "$C/heldout-RB-20-22.bin" ]; then
    python3 - "$C" <<'PYEOF'
import struct, sys
c = sys.argv[1]
b = open(f"{c}/heldout-RB-20-22.bin", "rb").read()
open(f"{c}/heldout-R-20-22.bin", "wb").write(b[:8] + struct.pack("<Q", 60) + b[16:16 + 60 * 24])
PYEOF
    echo "done heldout-R-20-22" >> "$C/steps.done"
  fi
  step heldout-W-24-30 "$C/heldout-W-24-30.bin" "$B" label --from "$C/test.bin" --empties 24-30 \
    --count 200 --seed 103 --keep-labels --out "$C/heldout-W-24-30.bin"
  [ -e "$V15C" ] || { v13e; v13b1; v15a; v15c; }
}
labels42() {
  dataset
  import42
  from_store42
  local secs=${1:-900}
  while :; do
    local left=0
    while read -r name args; do
      [ -n "$name" ] || continue
      log "labels42 $name ($secs s)"
      # shellcheck disable=SC2086
      $IDLE "$B" labels run --root "$L" --set "$name" $args --run-secs "$secs" --part-secs "$secs" \
        >> "$C/labels42.out" 2>> "$C/labels42.log" || { log "FAILED labels42 $name"; exit 1; }
      tail -1 "$C/labels42.out" | grep -q ' 0 parts written' || left=1
    done < <(sets42)
    [ "$left" = 1 ] || break
  done
}
# Label quality of the d16 set against its exact sample (set q-…: 20 positions per empties value
# 18-22 of its first part, solved by labels42).
quality42() {
  local set=r1824-d16p73-w110-s421
  "$B" labels quality --set "$L/$set" --exact "$L/q-$set" \
    --bands 18-18,19-19,20-20,21-21,22-22,18-22
}

# Held-out tables from the committed held-out sets (static and depth-4 MAE per band), plus the
# free sets built from the data (W 24-30 with stored WTHOR scores, flippy).
measure42() {
  flippy
  [ -e "$C/heldout-W-24-30.bin" ] || step heldout-W-24-30 "$C/heldout-W-24-30.bin" "$B" label \
    --from "$C/test.bin" --empties 24-30 --count 200 --seed 103 --keep-labels --out "$C/heldout-W-24-30.bin"
  local sets=()
  for s in heldout-r1416-s101 heldout-r1820-s101 heldout-r2022-s101 heldout-w1416-s102 \
           heldout-w1820-s102 heldout-w2022-s102; do
    [ -e "$L/$s/part-00000.bfl.gz" ] && sets+=(--samples "$L/$s")
  done
  sets+=(--samples "$C/heldout-W-24-30.bin" --samples "$C/flippy.bin")
  for w in "$@"; do
    log "measure42 $w"
    $NICE "$B" measure --weights "$w" "${sets[@]}" --depths 4 \
      --bands 14-16,18-20,20-22,20-20,21-21,22-22,24-24,25-30 | tee -a "$C/measure42.log"
  done
}
# match42 W [LEVELS]: W against 1.1.0 with the engine's searcher, 200 random 8-ply openings each
# played with both colours, at each level (default 8 and 12); prints the 95 % confidence interval.
match42() {
  local w=$1 levels=${2:-8,12}
  for level in ${levels//,/ }; do
    local name; name="match42-L$level-$(basename "$(dirname "$w")")"
    step "$name" "$C/$name.log" "$B" engine-match \
      --weights "$w" --opponent "$OLD" --pairs "${PAIRS42:-200}" --level "$level" --plies 8 --seed 1
  done
}

# match42b W LEVEL FIRST LAST: W against 1.1.0 at LEVEL in batches of 25 opening pairs with seeds
# FIRST..LAST (one resumable step each; a level-12 batch is ≈ 400 CPU s), then the combined score
# and its 95 % interval over all the batches' opening pairs.
match42b() {
  local w=$1 level=$2 first=$3 last=$4 name; name=$(basename "$(dirname "$w")")
  for seed in $(seq "$first" "$last"); do
    step "match42b-L$level-$name-s$seed" "$C/match42b-L$level-$name-s$seed.log" "$B" engine-match \
      --weights "$w" --opponent "$OLD" --pairs 25 --level "$level" --plies 8 --seed "$seed"
  done
  cat "$C"/match42b-L"$level"-"$name"-s*.out 2>/dev/null | awk '
    /pairs by half points/ {
      for (i = 1; i <= NF; i++) {
        if ($i == "games") g += $(i + 1)
        if ($i == "wins") w += $(i + 1)
        if ($i == "draws") d += $(i + 1)
        if ($i == "losses") l += $(i + 1)
      }
      h = substr($0, index($0, "[") + 1); h = substr(h, 1, index(h, "]") - 1)
      n = split(h, c, ", "); for (k = 1; k <= n; k++) cnt[k - 1] += c[k]
    }
    END {
      for (k = 0; k <= 4; k++) { p += cnt[k]; s += cnt[k] * k / 4; q += cnt[k] * (k / 4) ^ 2 }
      if (p < 2) { print "no batches"; exit }
      m = s / p; v = (q - p * m * m) / (p - 1); e = 1.96 * sqrt(v / p)
      printf "games %d W/D/L %d/%d/%d score %.1f%% (95%% interval %.1f-%.1f%% over %d pairs)\n",
        g, w, d, l, 100 * m, 100 * (m - e), 100 * (m + e), p
    }'
}

# v42m: the midgame from search labels. Every candidate of issue 20 refitted only the buckets of
# 13-30 empties and none won at level 8, whose searches from 37-44 empties have their leaves at
# 29-36. v42m adds depth-6 labels with v15c (leaves at 25-30, the buckets v15c improved) of game
# positions and of openings + random moves at 31-36 empties, committed as label sets, and refits
# the buckets of 31-36 empties (12-14) from v15c.
sets42m() {
  cat <<EOF
g3136-d6-v15c-s442 --from $C/train.bin --games --empties 31-36 --count ${N42M:-150000} --seed 442 --depth 6 --selectivity 5 --eval $V15C --chunk 4096
r3136-d6-v15c-s443 --from $C/train.bin --openings 40-50 --empties 31-36 --count ${N42MR:-50000} --seed 443 --depth 6 --selectivity 5 --eval $V15C --chunk 4096
EOF
}
v42m() {
  while read -r name args; do
    log "v42m labels $name"
    # shellcheck disable=SC2086
    $IDLE "$B" labels run --root "$L" --set "$name" $args --part-secs 100000 \
      >> "$C/labels42.out" 2>> "$C/labels42.log" || { log "FAILED v42m $name"; exit 1; }
  done < <(sets42m)
  step fit42-v42m "$C/v42m/eval.dat" "$B" fit --train "$C/train.bin" \
    --train "$L/g3136-d6-v15c-s442" --train "$L/r3136-d6-v15c-s443" \
    --only-search-labels --prior "$V15C" --only-buckets 12,13,14 --epochs "$E15" --lr "$LR15" \
    "${HELD13[@]}" --overlap "$F14_OVERLAP" --l2 "$F14_L2" --out "$C/v42m" --version 1.7.0
}

# refit42 NAME L2 ARGS...: 1.7.0 with its buckets of 17-24 empties (17-20) refitted on v15c's data
# plus ARGS (the label sets and fit options of NAME) -> $C/NAME-lL2. The sets grow, so a fit depends
# on the parts committed when it runs (docs/training.md names them). Needs from-store42's caches.
refit42() { refit42_on A14 "$F14_OVERLAP" "$@"; }

# refit42_on CACHES OVERLAP NAME L2 ARGS...: refit42 with the t13 caches named by the array CACHES
# (A14: v15c's depth-4, depth-6 and exact caches; E13: its exact caches only) and overlap OVERLAP.
refit42_on() {
  local -n t13=$1; local overlap=$2 name=$3 l2=$4; shift 4
  local caches=(); for f in "${t13[@]}"; do caches+=(--train "$C/t13-$f.bin"); done
  # `fit --extra` writes a bookfarm-eval2 file.
  local file=eval.dat; [[ " $* " == *" --extra "* ]] && file=eval2.bin
  step "fit42-$name-l$l2" "$C/$name-l$l2/$file" "$B" fit --train "$C/train.bin" "${caches[@]}" \
    "$@" --only-search-labels --prior "${PRIOR42:-shared/engine/weights/bookfarm-eval-1.7.0.dat.gz}" \
    --epochs "$E15" --lr "$LR15" "${HELD13[@]}" --exclude "$C/heldout-RB-20-22.bin" \
    --overlap "$overlap" --l2 "$l2" --only-buckets 17,18,19,20 --out "$C/$name-l$l2" \
    --version 1.8.0
}
D16=(--train "$L/r1824-d16p73-w110-s421" --train "$L/r1824-d16p73-v15c-s425")

# v42d: the committed depth-16 sets at 18-24 (ninth and tenth sessions).
v42d() { refit42 v42d "${1:-0.5}" "${D16[@]}"; }

# v42g: v42d plus the depth-16 labels at game positions of 18-24 empties (g1824, twelfth session).
v42g() { refit42 v42g "${1:-0.5}" "${D16[@]}" --train "$L/g1824-d16p73-v15c-s426"; }

# v42r: v42d plus the depth-16 labels at random-move positions of 20-22 empties only (r2022,
# thirteenth session): the band of the issue's goal, at 2.3 times the density of r1824's draw.
v42r() { refit42 v42r "${1:-0.5}" "${D16[@]}" --train "$L/r2022-d16p73-v15c-s427"; }

# v42s: v42r with the depth-16 labels' measured bias at odd empties taken out (`labels quality`
# of the d16 sets against their exact samples: -2.3 discs at 21 empties over 80 positions, -1.55
# at 19 over 40; thirteenth session).
v42s() {
  refit42 v42s "${1:-0.5}" "${D16[@]}" --train "$L/r2022-d16p73-v15c-s427" \
    --label-offset 21:2.3 --label-offset 19:1.55
}

# v42t: the depth-16 labels alone (every committed random-move and game-position set at 18-24,
# no depth-4 or depth-6 labels; exact labels kept) at overlap 3 (fourteenth session): with about
# 10^6 depth-16 labels the cheap labels no longer help and the neighbouring plies are dense enough.
v42t() {
  refit42_on E13 3 v42t "${1:-2}" "${D16[@]}" --train "$L/r2022-d16p73-v15c-s427" \
    --train "$L/g1824-d16p73-v15c-s426"
}

# v42p: v42t's labels and fit in the bookfarm-eval2 format, whose pattern terms (three 10-square
# patterns under all symmetries) and count terms are fitted with the buckets (fifteenth session).
v42p() {
  refit42_on E13 3 v42p "${1:-2}" "${D16[@]}" --train "$L/r2022-d16p73-v15c-s427" \
    --train "$L/g1824-d16p73-v15c-s426" --extra
}

# v42q: v42p's refit of the buckets of 17-24 empties made from 1.8.0 instead of 1.7.0 (1.8.0
# differs from 1.7.0 only at 31-44 empties, which this refit leaves as they are).
v42q() {
  PRIOR42=shared/engine/weights/bookfarm-eval-1.8.0.dat.gz refit42_on E13 3 v42q "${1:-2}" \
    "${D16[@]}" --train "$L/r2022-d16p73-v15c-s427" --train "$L/g1824-d16p73-v15c-s426" --extra
}

# v42pm: v42p with the midgame buckets of 31-36 empties (12-14) refitted with the extra terms on
# v42m's depth-6 labels (v42m's recipe, from v42p).
v42pm() {
  v42p "${1:-2}"
  midfit42 v42pm eval2.bin "$C/v42p-l${1:-2}/eval2.bin" 12,13,14 \
    --train "$L/g3136-d6-v15c-s442" --train "$L/r3136-d6-v15c-s443" --extra
}

# midfit42 NAME FILE PRIOR BUCKETS ARGS...: BUCKETS of PRIOR refitted on the search labels of ARGS
# (label sets, and --extra for bookfarm-eval2) with v42m's settings -> $C/NAME/FILE.
midfit42() {
  local name=$1 file=$2 prior=$3 buckets=$4; shift 4
  step "fit42-$name" "$C/$name/$file" "$B" fit --train "$C/train.bin" "$@" \
    --only-search-labels --prior "$prior" --only-buckets "$buckets" \
    --epochs "$E15" --lr "$LR15" "${HELD13[@]}" --exclude "$C/heldout-RB-20-22.bin" \
    --overlap "$F14_OVERLAP" --l2 "$F14_L2" --out "$C/$name" --version 1.8.0
}

# v42n: 1.7.0 with its midgame buckets (31-36 empties, 12-14) refitted on every committed part of
# v42m's depth-6 sets (800,000 labels since the fifteenth session).
v42n() {
  midfit42 v42n eval.dat shared/engine/weights/bookfarm-eval-1.7.0.dat.gz 12,13,14 \
    --train "$L/g3136-d6-v15c-s442" --train "$L/r3136-d6-v15c-s443"
}

# v42e: v42n with its early-midgame buckets (37-44 empties, 8-11) refitted on the depth-6 labels
# with 1.7.0 at 37-44 (g3744, r3744; fifteenth session) and those at 31-36 (the overlap reaches them).
v42e() {
  v42n
  midfit42 v42e eval.dat "$C/v42n/eval.dat" 8,9,10,11 \
    --train "$L/g3744-d6-v170-s450" --train "$L/r3744-d6-v170-s451" \
    --train "$L/g3136-d6-v15c-s442" --train "$L/r3136-d6-v15c-s443"
}

# v42f: 1.8.0 with its late-midgame buckets (25-30 empties, 15-17) refitted on depth-6 labels with
# 1.8.0 at 25-30 (g2530, r2530; sixteenth session) and the 31-36 ones the overlap reaches.
v42f() {
  midfit42 v42f eval.dat shared/engine/weights/bookfarm-eval-1.8.0.dat.gz 15,16,17 \
    --train "$L/g2530-d6-v180-s452" --train "$L/r2530-d6-v180-s453" \
    --train "$L/g3136-d6-v15c-s442" --train "$L/r3136-d6-v15c-s443"
}

case "${1:-all}" in
  labels) dataset; heldout; labels1 ;;
  fit1) fit1 ;;
  boot) boot ;;
  heldout-late) heldout_late ;;
  heldout-big) heldout_big ;;
  lq16) lq16 ;;
  cost16) cost16 ;;
  v16a) v16a ;;
  v16b) v16b ;;
  v16c) v16c ;;
  v16d) v16d ;;
  grid17) grid17 ;;
  v17) v17 ;;
  measure) measure ;;
  match) match ;;
  heldout) dataset; flippy; heldout ;;
  heldout-w) heldout_w ;;
  v13e) v13e ;;
  v13b1) v13b1 ;;
  v13b2) v13b2 ;;
  v13b3) v13b3 ;;
  v13g) v13g ;;
  v13b4) v13b4 ;;
  measure13) shift; measure13 "$@" ;;
  match13) match13 "$2" ;;
  v14a) v14a ;;
  v14b) v14b ;;
  v14c) v14c ;;
  sweep14) sweep14 "$2" "$3" ;;
  v15x) v15x ;;
  v15a) v15a ;;
  cap15) cap15 ;;
  v15c) v15c ;;
  v15e) v15e ;;
  v15f) v15f ;;
  v15g) v15g ;;
  v15h) v15h ;;
  v15i) v15i ;;
  v15j) v15j ;;
  v15k) v15k ;;
  conv15) conv15 ;;
  analyse15) shift; analyse15 "$@" ;;
  labels42) labels42 "${2:-900}" ;;
  import42) import42 ;;
  from-store42) from_store42 ;;
  quality42) quality42 ;;
  measure42) shift; measure42 "$@" ;;
  v42m) v42m ;;
  v42d) v42d "${2:-0.5}" ;;
  v42g) v42g "${2:-0.5}" ;;
  v42r) v42r "${2:-0.5}" ;;
  v42s) v42s "${2:-0.5}" ;;
  v42t) v42t "${2:-2}" ;;
  v42p) v42p "${2:-2}" ;;
  v42pm) v42pm "${2:-2}" ;;
  v42q) v42q "${2:-2}" ;;
  v42n) v42n ;;
  v42e) v42e ;;
  v42f) v42f ;;
  match42b) match42b "$2" "$3" "$4" "$5" ;;
  match42) match42 "$2" "${3:-8,12}" ;;
  all) dataset; heldout; labels1; fit1; boot; heldout_late; measure; match ;;
  *) echo "usage: $0 [labels|fit1|boot|heldout-late|measure|match|all|heldout|v13e|v13b1|v13b2|v13b3|v13g|v13b4|measure13 W...|match13 W|v14a|v14b|v14c|sweep14 a|b B|v15x|v15a|v15c|v15e|v15f|v15g|v15h|v15i|v15j|v15k|conv15|cap15|analyse15 W...|heldout-big|lq16|cost16|v16a|v16b|v16c|v16d|grid17|v17]" >&2; exit 2 ;;
esac
