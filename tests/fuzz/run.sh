#!/usr/bin/env bash
# Build and run a libFuzzer target (clang, -fsanitize=fuzzer,address,undefined).
#
#   tests/fuzz/run.sh [TARGET] [RUNS]      default: proto 1000000
#
# TARGET names a harness tests/fuzz/fuzz_TARGET.c, which defines LLVMFuzzerTestOneInput and lists
# the firmware sources it links in one comment line, e.g. "// FUZZ_SOURCES: firmware/proto/tp_proto.c":
# adding a target is adding that one file. Builds and the growing corpus go to $FUZZ_BUILD
# (default build/fuzz); a target's seed_TARGET.py, if any, seeds that corpus first (with
# $FUZZ_PYTHON, default the repo's .venv); "@core" in FUZZ_SOURCES stands for the portable core.
# FUZZ_SEED fixes the run (default 1); extra libFuzzer flags go in $FUZZ_FLAGS, extra compiler
# flags (e.g. -fno-sanitize=alignment, to look past a known finding) in $FUZZ_CFLAGS. Exits
# non-zero on a crash, a sanitizer report or a failed check, leaving the reproducer in
# $FUZZ_BUILD/crash-*.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
target=${1:-proto}
runs=${2:-1000000}
harness=$root/tests/fuzz/fuzz_$target.c
if [[ ! -f $harness ]]; then
    available=$(cd "$root/tests/fuzz" && ls fuzz_*.c | sed 's/^fuzz_//; s/\.c$//' | tr '\n' ' ')
    echo "run.sh: no harness $harness; targets: $available" >&2
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
build=${FUZZ_BUILD:-$root/build/fuzz}
mkdir -p "$build/corpus_$target"
# A target may seed its corpus: tests/fuzz/seed_TARGET.py DIR writes real inputs into DIR.
seeder=$root/tests/fuzz/seed_$target.py
if [[ -f $seeder ]]; then
    "${FUZZ_PYTHON:-$root/.venv/bin/python}" "$seeder" "$build/corpus_$target"
fi
# shellcheck disable=SC2086  # FUZZ_CFLAGS is a list of flags
# FUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION (libFuzzer's convention): the core's debug checks,
# e.g. a refused blob's fault records the check's source line
clang -std=c99 -g -O1 -Wall -Wextra -Werror -DFUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION \
    -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all ${FUZZ_CFLAGS:-} \
    $(make -s -C "$root/firmware" print-cflags | sed 's/-std=c99 -ffp-contract=off//') "$harness" "${sources[@]}" -o "$build/fuzz_$target"
# Inputs that once crashed (tests/fuzz/regressions_TARGET/) run first, as a read-only corpus.
corpora=("$build/corpus_$target")
if [[ -d $root/tests/fuzz/regressions_$target ]]; then
    corpora+=("$root/tests/fuzz/regressions_$target")
fi
# shellcheck disable=SC2086  # FUZZ_FLAGS is a list of flags
"$build/fuzz_$target" -runs="$runs" -seed="${FUZZ_SEED:-1}" -max_len=8192 \
    -artifact_prefix="$build/" -print_final_stats=1 ${FUZZ_FLAGS:-} "${corpora[@]}"
