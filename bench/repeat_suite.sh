#!/usr/bin/env bash
# The proof that the suite does not race (tests/README.md): the README's test command (.ci/run) in a
# fresh clone of this repository, IDLE times on the machine as it is, then LOADED times while two
# busy loops keep both cores busy. One line per run on stdout; each run's output in OUT/NAME.txt.
#   [COMMIT=REV] bench/repeat_suite.sh [IDLE=5] [LOADED=3] [OUT=/tmp/repeat-suite]
# COMMIT: the commit to test (default: this checkout's HEAD), so idle and loaded runs of one commit
# can be made apart.
set -u
IDLE=${1:-5}; LOADED=${2:-3}; OUT=${3:-/tmp/repeat-suite}
SRC=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$OUT" && rm -rf "$OUT/clone" && git clone -q "$SRC" "$OUT/clone" || exit 2
cd "$OUT/clone" || exit 2
if [ -n "${COMMIT:-}" ]; then git checkout -q "$COMMIT" || exit 2; fi
echo "commit $(git rev-parse --short HEAD) $(nproc) cores, started $(date -u +%FT%TZ)"
one() {   # NAME: one run of .ci/run, its result in one line
  local t0=$(date +%s)
  .ci/run > "$OUT/$1.txt" 2>&1; local rc=$?
  echo "$1 rc=$rc wall=$(( $(date +%s) - t0 ))s load1=$(cut -d' ' -f1 /proc/loadavg)" \
       "$(grep -E '^=+ .*[0-9]+ (passed|failed)' "$OUT/$1.txt" | tail -1 | tr -d '=')"
}
for i in $(seq 1 "$IDLE"); do one "idle$i"; done
for i in $(seq 1 "$LOADED"); do
  python3 -c "while True: pass" & B1=$!
  python3 -c "while True: pass" & B2=$!
  one "load$i"
  kill $B1 $B2
done
echo "finished $(date -u +%FT%TZ)"
