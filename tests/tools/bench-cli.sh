#!/usr/bin/env bash
# Whole-process benchmark of the release binary: `hyperforge synth` of every stack in stacks/
# (both reference stacks) to all formats, N times, into a temporary directory. Reports wall
# time (min, median, max; nanosecond clock around each run), the peak RSS of any run
# (GNU /usr/bin/time %M) and one run's split by phase (`hyperforge synth --timings`).
#
#   tests/tools/bench-cli.sh [N]        (default N=50)
set -euo pipefail
n="${1:-50}"
repo="$(cd "$(dirname "$0")/../.." && pwd)"
target="${CARGO_TARGET_DIR:-$repo/target}"
cargo build --release --bin hyperforge --manifest-path "$repo/Cargo.toml" >/dev/null 2>&1
bin="$target/release/hyperforge"
[ -x /usr/bin/time ] || { echo "needs GNU time at /usr/bin/time" >&2; exit 2; }
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cp -r "$repo/stacks" "$work/stacks"
cd "$work"
"$bin" synth >/dev/null 2>&1   # warm the page cache
: > wall.txt
for _ in $(seq "$n"); do
  start=$(date +%s%N)
  /usr/bin/time -f '%M' -a -o rss.txt "$bin" synth >/dev/null 2>&1
  end=$(date +%s%N)
  echo $(( (end - start) / 1000 )) >> wall.txt
done
rss=$(sort -n rss.txt | tail -1)
sort -n wall.txt | awk -v n="$n" -v rss="$rss" '
  { wall[NR] = $1 }
  END {
    printf "hyperforge synth (all stacks, all formats), %d runs: wall min %.1f ms, median %.1f ms, max %.1f ms; peak RSS %.1f MiB\n",
      n, wall[1] / 1000, wall[int((NR + 1) / 2)] / 1000, wall[NR] / 1000, rss / 1024
  }'
# One more run's split by phase (`hyperforge synth --timings`).
"$bin" synth --timings 2>&1 >/dev/null | grep '^timings:'
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) CPU(s)"
