#!/usr/bin/env bash
# Builds the libFuzzer targets of the readers (clang, -fsanitize=fuzzer,address,undefined;
# tests/traces/fuzz) in build-fuzz/ and runs each for a given time from the seed corpus of
# tests/traces/fuzz/corpus (the shipped traces' first records, the hand-made libCacheSim samples,
# a small plan, the shipped config and profiles), printing the executions. Readers: the seven
# trace formats (mooncake, kvtester, tokens, bailian, csv, lcs, oracle_general), plan (ReadPlanFile and what the executor derives from a plan), config
# (a YAML config file, and --set lines) and profile (a hardware profile).
#   tools/fuzz.sh                      60 s per reader, every reader
#   tools/fuzz.sh --seconds 3600       an hour each
#   tools/fuzz.sh --seconds 30 mooncake plan
#   tools/fuzz.sh --build-only         build the targets, run none
#   tools/fuzz.sh --parallel           every reader at once (each still for --seconds)
# Dictionaries: tests/traces/fuzz/json.dict (JSON readers), yaml.dict (config and profile: aliases
# that contain themselves, documents, deep nesting, block sizes of 2^32+ pages). The trace targets
# also read each input with a requested block size of up to 2^40 pages. Paths, FIFOs and
# duplicate outputs are command-line matters, mutated by
# tests/bad_input/config_and_profile_mutations_are_read_or_refused.py.
# A finding (crash, sanitizer report, an exception other than InputError) stops that reader's run
# with its input saved as build-fuzz/fuzz-out/<reader>/crash-* (timeout-* for an input over 10 s,
# oom-* for one over 2 GB); the script then exits 1.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=60
build=build-fuzz
readers=()
build_only=0
parallel=0
while (($#)); do
  case "$1" in
    --seconds) seconds=$2; shift 2 ;;
    --build) build=$2; shift 2 ;;
    --build-only) build_only=1; shift ;;
    --parallel) parallel=1; shift ;;
    mooncake|kvtester|tokens|bailian|csv|lcs|oracle_general|plan|config|profile)
      readers+=("$1"); shift ;;
    *) echo "usage: tools/fuzz.sh [--seconds N] [--build DIR] [--build-only] [--parallel]" \
            "[mooncake|kvtester|tokens|bailian|csv|lcs|oracle_general|plan|config|profile]..." >&2
       exit 2 ;;
  esac
done
((${#readers[@]})) ||
  readers=(mooncake kvtester tokens bailian csv lcs oracle_general plan config profile)
command -v clang++ >/dev/null || { echo "fuzz: clang++ not found (apt-get install clang)" >&2; exit 2; }
gen=(); command -v ninja >/dev/null && gen=(-G Ninja)
mkdir -p "$build"
cmake -S . -B "$build" "${gen[@]}" -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -gline-tables-only" -DCMAKE_CXX_COMPILER_LAUNCHER=ccache \
  -DKVLANES_FUZZ=ON -DKVLANES_CUDA=OFF >"$build/configure.log" 2>&1 || {
  cat "$build/configure.log" >&2; exit 1; }
targets=(); for r in "${readers[@]}"; do targets+=("fuzz_$r"); done
cmake --build "$build" --target "${targets[@]}" -j "$(nproc)"
((build_only)) && exit 0
# One reader's run; its verdict line goes to $out/verdict.
fuzz_one() {
  local r=$1 corpus="$build/fuzz-corpus/$1" out="$build/fuzz-out/$1" bin dict=()
  mkdir -p "$corpus" "$out"
  cp -n tests/traces/fuzz/corpus/"$r"/* "$corpus"/ 2>/dev/null || true
  bin=$(find "$build" -name "fuzz_$r" -type f -perm -u+x | head -1)
  case "$r" in
    csv|lcs|oracle_general) ;;  # CSV has no JSON tokens, the binary formats none
    config|profile) dict=(-dict=tests/traces/fuzz/yaml.dict) ;;
    *) dict=(-dict=tests/traces/fuzz/json.dict) ;;
  esac
  echo "fuzz: $r for $seconds s" >&2
  # An input that runs over 10 s is a finding (saved as timeout-*): it catches a parser that loops
  # while allocating before the memory limit does, whose report can itself hang; the outer kill
  # bounds the whole run.
  if timeout -s KILL $((seconds + 120)) "$bin" -max_total_time="$seconds" -timeout=10 \
       -print_final_stats=1 "${dict[@]}" -max_len=262144 -artifact_prefix="$out/" "$corpus" \
       >"$out/log" 2>&1; then
    echo "fuzz: $r: $(grep -m1 'stat::number_of_executed_units' "$out/log" | awk '{print $2}') executions, no finding ($out/log)" >"$out/verdict"
  else
    echo "fuzz: $r: FINDING (see $out/log and $out/crash-*, timeout-*, oom-*)" >"$out/verdict"; tail -30 "$out/log" >&2
    return 1
  fi
}
status=0
if ((parallel)); then
  pids=(); for r in "${readers[@]}"; do fuzz_one "$r" & pids+=($!); done
  for p in "${pids[@]}"; do wait "$p" || status=1; done
else
  for r in "${readers[@]}"; do fuzz_one "$r" || status=1; done
fi
for r in "${readers[@]}"; do cat "$build/fuzz-out/$r/verdict"; done
exit $status
