#!/usr/bin/env bash
# Coverage-guided fuzzing of every parser of outside input: the targets of every
# function's fuzz crate (functions/<name>/fuzz/, cargo-fuzz) run for SECONDS
# (default 60) each with libFuzzer, one after the other, from a seed corpus
# derived from the function's sample events (kept and grown in its corpus/).
# Fails on the first crash: a panic (even one the code under test catches), a
# violated check, a call over 2 s, a call that never returns (-timeout), or
# peak RSS over the bound (-rss_limit_mb). The failing input is saved in the
# crate's artifacts/<target>/.
#
# Needs a nightly toolchain and cargo-fuzz (`cargo install cargo-fuzz --locked`).
# No sanitizer: the code is safe Rust, and the checks find what matters here
# (panics, hangs, memory) at several times the speed.
set -euo pipefail

seconds="${1:-60}"
case "$seconds" in
  '' | *[!0-9]*) echo "usage: tools/fuzz/run.sh [SECONDS per target]" >&2; exit 2 ;;
esac
root="$(cd "$(dirname "$0")/../.." && pwd)"
flags=(--sanitizer none --debug-assertions)
triple="$(rustc +nightly -vV | sed -n 's/^host: //p')"

ran=0
for crate in "$root"/functions/*/fuzz; do
  [ -f "$crate/Cargo.toml" ] || continue
  function="$(basename "$(dirname "$crate")")"
  cd "$crate"
  cargo +nightly fuzz build "${flags[@]}"
  mkdir -p logs
  # libFuzzer's own start-up lines (no sanitizer to report to) go to the log.
  "target/$triple/release/seed_corpus" "$root/events/$function" corpus dict 2>logs/seed_corpus.log ||
    { cat logs/seed_corpus.log >&2; exit 1; }
  for target in $(cargo +nightly fuzz list); do
    [ "$target" = seed_corpus ] && continue
    options=(-max_total_time="$seconds" -timeout=10 -rss_limit_mb=512 -print_final_stats=1)
    # A target's own libFuzzer flags, if it has any (one per line).
    [ -s "fuzz_targets/$target.flags" ] && mapfile -t -O "${#options[@]}" options <"fuzz_targets/$target.flags"
    [ -s "dict/$target.dict" ] && options+=(-dict="dict/$target.dict")
    echo "== $function/$target: ${seconds} s"
    set +e
    cargo +nightly fuzz run "${flags[@]}" "$target" "corpus/$target" -- "${options[@]}" 2>&1 |
      tee "logs/$target.log" | grep -E '^#[0-9]+ +(INITED|DONE)|^Done|^==[0-9]+==|panicked|^stat::'
    status="${PIPESTATUS[0]}"
    set -e
    if [ "$status" -ne 0 ]; then
      echo "$target: failed (exit $status); see $crate/logs/$target.log and $crate/artifacts/$target/" >&2
      exit 1
    fi
    echo "$target: corpus of $(find "corpus/$target" -type f | wc -l) inputs"
    ran=$((ran + 1))
  done
done
echo "all $ran targets ran ${seconds} s each without a finding"
