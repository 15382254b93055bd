#!/usr/bin/env bash
# Build and run a libFuzzer target (clang, -fsanitize=fuzzer,address,undefined).
#
#   tests/fuzz/run.sh [TARGET] [RUNS]      default: proto 1000000
#   tests/fuzz/run.sh all [RUNS]           every target in turn, its figures recorded
#
# TARGET names a harness tests/fuzz/fuzz_TARGET.c, which defines LLVMFuzzerTestOneInput and lists
# the firmware sources it links in one comment line, e.g. "// FUZZ_SOURCES: firmware/proto/tp_proto.c":
# adding a target is adding that one file. "@core" in FUZZ_SOURCES stands for the portable core.
# "// FUZZ_NO_COVERAGE: PATH ..." lines name sources (files, or folders) left out of coverage
# instrumentation (-fsanitize-coverage-ignorelist; the sanitizers still check them): arithmetic
# that no input steers, whose comparisons otherwise cost most of a run's time.
# A harness that links an application (which compiles its model in) names a generated model in
# a "// FUZZ_MODEL: MODEL SCHEME" line: model_header.py writes its header, TP_MODEL_HEADER.
# Builds and the growing corpus go to $FUZZ_BUILD (default build/fuzz); a target's
# seed_TARGET.py, if any, seeds that corpus first (with $FUZZ_PYTHON, default the repo's .venv).
# FUZZ_JOBS=N (default 1) fuzzes in N processes at once, for a slow target on N cores: each its
# share of RUNS with a seed of its own, all growing one corpus folder (libFuzzer reloads it, so
# each takes up what the others find); the figures count every process's runs. (libFuzzer's
# -fork=N ran label at a third of one process's rate on two cores: its jobs replay corpus
# subsets.)
# FUZZ_SEED fixes the run (default 1); extra libFuzzer flags go in $FUZZ_FLAGS (e.g.
# -max_total_time=600 to stop a slow target in time), extra compiler flags (e.g.
# -fno-sanitize=alignment, to look past a known finding) in $FUZZ_CFLAGS. Exits non-zero on a
# crash, a sanitizer report or a failed check, leaving the reproducer in $FUZZ_BUILD/TARGET-crash-*.
#
# With $FUZZ_FIGURES set (`all` sets it to tests/fuzz/figures.json), the run records its target's
# figures there (executions, crashes, seconds, exec/s, date, commit: figures.py) and minimizes
# its corpus into tests/fuzz/corpus_TARGET (-merge=1, inputs up to 2 KB), which later runs
# start from.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
target=${1:-proto}
runs=${2:-1000000}
python=${FUZZ_PYTHON:-$root/.venv/bin/python}
build=${FUZZ_BUILD:-$root/build/fuzz}
# absolute: the harness includes the generated model header by this path
mkdir -p "$build" && build=$(cd "$build" && pwd)
if [[ $target == all ]]; then
    status=0
    for harness in "$root"/tests/fuzz/fuzz_*.c; do
        name=$(basename "$harness" .c)
        FUZZ_FIGURES=${FUZZ_FIGURES:-$root/tests/fuzz/figures.json} "$0" "${name#fuzz_}" "$runs" \
            || status=1
    done
    exit $status
fi
harness=$root/tests/fuzz/fuzz_$target.c
if [[ ! -f $harness ]]; then
    available=$(cd "$root/tests/fuzz" && ls fuzz_*.c | sed 's/^fuzz_//; s/\.c$//' | tr '\n' ' ')
    echo "run.sh: no harness $harness; targets: $available all" >&2
    exit 2
fi
sources=()
for s in $(sed -n 's|^// FUZZ_SOURCES:||p' "$harness"); do
    if [[ $s == @core ]]; then
        # the portable library (firmware/sources.mk), as every build takes it
        while IFS= read -r f; do sources+=("$f"); done \
            < <(make -s -C "$root/firmware" print-sources)
    else
        sources+=("$root/$s")
    fi
done
mkdir -p "$build/corpus_$target"
coverage_flags=()
read -r -a unguided < <(sed -n 's|^// FUZZ_NO_COVERAGE:||p' "$harness" | tr '\n' ' ') || true
if (( ${#unguided[@]} )); then
    ignorelist=$build/no_coverage_$target.txt
    for p in "${unguided[@]}"; do
        if [[ -d $root/$p ]]; then echo "src:$root/$p/*"; else echo "src:$root/$p"; fi
    done >"$ignorelist"
    coverage_flags=("-fsanitize-coverage-ignorelist=$ignorelist")
fi
model_flags=()
read -r -a model < <(sed -n 's|^// FUZZ_MODEL:||p' "$harness") || true
if (( ${#model[@]} )); then
    header=$build/model_$target.h
    "$python" "$root/tests/fuzz/model_header.py" "${model[@]}" "$header"
    model_flags=("-DTP_MODEL_HEADER=\"$header\"")
fi
# A target may seed its corpus: tests/fuzz/seed_TARGET.py DIR writes real inputs into DIR.
seeder=$root/tests/fuzz/seed_$target.py
if [[ -f $seeder ]]; then
    "$python" "$seeder" "$build/corpus_$target"
fi
# shellcheck disable=SC2086  # FUZZ_CFLAGS is a list of flags
# FUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION (libFuzzer's convention): the core's debug checks,
# e.g. a refused blob's fault records the check's source line
clang -std=c99 -g -O1 -Wall -Wextra -Werror -DFUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION \
    -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all ${FUZZ_CFLAGS:-} \
    $(make -s -C "$root/firmware" print-cflags | sed 's/-std=c99 -ffp-contract=off//') \
    "${model_flags[@]}" "${coverage_flags[@]}" "$harness" "${sources[@]}" -o "$build/fuzz_$target"
# The corpus grows in build/; the committed minimized corpus and the inputs that once crashed
# (tests/fuzz/regressions_TARGET/) run first, read-only.
corpora=("$build/corpus_$target")
kept=$root/tests/fuzz/corpus_$target
if [[ -d $kept ]]; then
    corpora+=("$kept")
fi
if [[ -d $root/tests/fuzz/regressions_$target ]]; then
    corpora+=("$root/tests/fuzz/regressions_$target")
fi
log=$build/$target.log
rm -f "$build/$target"-{crash,leak,timeout,oom}-*
start=$(date +%s)
commit=$(git -C "$root" rev-parse --short HEAD) # the tree the target was built from
status=0
jobs=${FUZZ_JOBS:-1}
pids=()
# the fuzzers run in the background, where a script's children ignore SIGINT: Ctrl-C (or a
# SIGTERM) stops them here, each printing its final stats, so the figures count what ran
trap 'kill -TERM "${pids[@]}" 2>/dev/null' INT TERM
for (( job = 0; job < jobs; job++ )); do
    # shellcheck disable=SC2086  # FUZZ_FLAGS is a list of flags
    "$build/fuzz_$target" -runs=$(( (runs + jobs - 1) / jobs )) -seed=$(( ${FUZZ_SEED:-1} + job )) \
        -max_len=8192 -artifact_prefix="$build/$target-" -print_final_stats=1 ${FUZZ_FLAGS:-} \
        "${corpora[@]}" 2>"$log.$job" &
    pids+=($!)
done
for pid in "${pids[@]}"; do
    wait "$pid" || status=$?
done
for (( job = 0; job < jobs; job++ )); do
    cat "$log.$job"
    rm -f "$log.$job"
done >"$log"
seconds=$(( $(date +%s) - start ))
cat "$log" >&2
if [[ -n ${FUZZ_FIGURES:-} ]]; then
    # reproducers only: a slow-unit file is no crash
    crashes=$(find "$build" -maxdepth 1 \( -name "$target-crash-*" -o -name "$target-leak-*" \
        -o -name "$target-timeout-*" -o -name "$target-oom-*" \) | wc -l)
    "$python" "$root/tests/fuzz/figures.py" "$FUZZ_FIGURES" "$target" "$log" "$seconds" \
        "$crashes" "$commit"
    merged=$build/merged_$target
    rm -rf "$merged" && mkdir -p "$merged"
    mkdir -p "$kept"
    "$build/fuzz_$target" -merge=1 -max_len=8192 "$merged" "$build/corpus_$target" "$kept" \
        2>>"$log"
    # the committed corpus stays small: inputs of at most 2 KB (seeders regenerate larger ones)
    find "$merged" -type f -size +2k -delete
    rm -rf "$kept" && mv "$merged" "$kept"
fi
exit $status
