#!/usr/bin/env bash
# The SDK as a user gets it: install attnlab, build one of examples/out_of_tree_* against the
# install alone (no build type given: it must come out Release), run the plugin's own tests with
# ctest in its build as a user would (TESTS: how many test cases must run and pass; none found or
# another count fails, so a test that stops being registered fails the suite), list it with the
# installed runner (OPTION must be among its options) and train the example's 2-epoch experiment
# with it (data from ATTNLAB_DATA_MIRROR into a scratch data_dir). FIGURES, when given,
# are the figures the run must declare: `runner plot --figures` draws each as <name>.png and
# `runner report` puts each on its page (the tools draw what the plugins declared).
#   out_of_tree.sh BUILD_DIR SOURCE_DIR EXAMPLE KIND NAME OPTION TESTS [FIGURES]
#   e.g. out_of_tree.sh build . out_of_tree_scorer scorer luong_general scale 3
#        out_of_tree.sh build . out_of_tree_dataset dataset noisy_sine periods 2 noisy_sine,noisy_sine_samples
set -euo pipefail
[ $# -eq 7 ] || [ $# -eq 8 ] ||
  { echo "usage: out_of_tree.sh BUILD_DIR SOURCE_DIR EXAMPLE KIND NAME OPTION TESTS [FIGURES]" >&2; exit 2; }
build=$1 src=$2 kind=$4 name=$5 option=$6 tests=$7 figures=${8:-}
[ -n "${ATTNLAB_DATA_MIRROR:-}" ] || { echo "FAIL: ATTNLAB_DATA_MIRROR is not set (the encoder example trains on fra-eng)" >&2; exit 1; }
. "$(dirname "$0")/install.sh"  # $work, fail(), attnlab installed into $prefix

example=$src/examples/$3
lines=$(grep -cv '^\s*\(#.*\)\?$' "$example/CMakeLists.txt")
[ "$lines" -le 10 ] || fail "the example's CMakeLists.txt has $lines lines (at most 10)"

cmake -S "$example" -B "$work/build" -G Ninja -DCMAKE_PREFIX_PATH="$prefix" \
  -DCMAKE_CXX_COMPILER_LAUNCHER=ccache >"$work/configure.log" 2>&1 || { cat "$work/configure.log"; fail "configure"; }
grep -q "building plugins as Release" "$work/configure.log" || { cat "$work/configure.log"; fail "no Release default"; }
cmake --build "$work/build" -j 2 >"$work/build.log" 2>&1 || { cat "$work/build.log"; fail "build"; }
grep -q -- "-O3" "$work/build/build.ninja" || fail "the plugin was not compiled with optimisation"
plugin=$work/build/plugins/libattnlab_${kind}_${name}.so
[ -f "$plugin" ] || fail "no $plugin"
(cd "$work/build" && ctest --output-on-failure --no-tests=error) >"$work/ctest.log" 2>&1 ||
  { cat "$work/ctest.log"; fail "the plugin's own tests"; }
ran=$(sed -n 's/.* tests failed out of \([0-9]*\)$/\1/p' "$work/ctest.log")
[ "$ran" = "$tests" ] || { cat "$work/ctest.log"; fail "ctest ran ${ran:-no} tests of the plugin's, expected $tests"; }

runner=$prefix/bin/runner
"$runner" plugins >"$work/list.txt" || fail "installed runner plugins"
grep -q "dot_product" "$work/list.txt" || { cat "$work/list.txt"; fail "installed runner does not find the in-tree plugins"; }
"$runner" plugins "$kind/$name" --plugin-path "$work/build/plugins" >"$work/one.txt" || fail "plugins $name"
grep -q -- "$option" "$work/one.txt" || { cat "$work/one.txt"; fail "$name's options not shown"; }
(cd "$work" && "$runner" "$example/experiment.yaml" --plugin-path "$work/build/plugins" --results "$work/run.h5" -q \
   data_dir="$work/datasets") || fail "the example experiment"
"$runner" compare "$work/run.h5" >"$work/compare.txt" || fail "compare"
grep -q "completed" "$work/compare.txt" || { cat "$work/compare.txt"; fail "the run did not complete"; }
grep -q "$name" <(strings "$work/run.h5") || fail "the results file does not record the plugin"
if [ -n "$figures" ]; then
  "$runner" plot "$work/run.h5" --figures -o "$work/plots" >"$work/plot.txt" || { cat "$work/plot.txt"; fail "plot --figures"; }
  "$runner" report "$work/run.h5" -o "$work/report.html" >/dev/null || fail "report"
  for f in ${figures//,/ }; do
    [ -s "$work/plots/$f.png" ] || { cat "$work/plot.txt"; fail "runner plot drew no $f.png"; }
    grep -q "\"name\":\"$f\"" "$work/report.html" || fail "runner report's page holds no figure '$f'"
  done
fi
if [ "$kind" = scorer ]; then
  # A head mask reaches the out-of-tree scorer's heads without a line of its own (the framework's
  # attention module applies it): the run records the mask and trains to another loss.
  (cd "$work" && "$runner" "$example/experiment.yaml" --plugin-path "$work/build/plugins" --results "$work/masked.h5" \
     -q data_dir="$work/datasets" 'interventions.head_mask={decoder_cross: {1: [1, 2]}}') ||
    fail "the example experiment with a head mask"
  grep -q 'decoder_cross:1:\[1,2\]' <(strings "$work/masked.h5") || fail "the masked run does not record its head mask"
  "$runner" compare "$work/run.h5" "$work/masked.h5" --format csv >"$work/masked.csv" || fail "compare the masked run"
  python3 - "$work/masked.csv" <<'PY' || fail "switching heads off changed nothing"
import csv, sys
plain, masked = list(csv.DictReader(open(sys.argv[1])))
assert masked["status"] == "completed", masked["status"]
assert plain["val/loss final"] != masked["val/loss final"], (plain["val/loss final"], masked["val/loss final"])
PY
fi
echo "out-of-tree $kind $name: built against the installed SDK, its $tests tests passed, trained 2 epochs"
