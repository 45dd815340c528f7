#!/usr/bin/env bash
# A plugin compiled against installed headers that are not the ones the installed runner was built
# from must be refused at load, naming the plugin and the header mismatch, not loaded and called
# through a stale vtable. Installs attnlab, adds a virtual method to the installed Scorer
# (nn/scorer.hpp, as a later attnlab might), builds examples/out_of_tree_scorer's plugin against
# that install (find_package(attnlab) hashes the headers it finds, and warns that they differ),
# then: `runner plugins` skips the library with a warning naming it, and a run that asks for the
# scorer fails at load with the same reason (before calling any plugin's code, which blamed the
# built-in encoder when the installed SDK's hash was a constant).
#   stale_headers.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
[ $# -eq 2 ] || { echo "usage: stale_headers.sh BUILD_DIR SOURCE_DIR" >&2; exit 2; }
build=$1 src=$2
. "$(dirname "$0")/install.sh"  # $work, fail(), attnlab installed into $prefix

scorer=$prefix/include/attnlab/nn/scorer.hpp
sed -i 's/^  virtual torch::Tensor score(/  virtual void added_in_a_later_sdk() {}\n&/' "$scorer"
grep -q "added_in_a_later_sdk" "$scorer" || fail "could not add a virtual method to $scorer"

example=$src/examples/out_of_tree_scorer
cmake -S "$example" -B "$work/build" -G Ninja -DCMAKE_PREFIX_PATH="$prefix" \
  -DCMAKE_CXX_COMPILER_LAUNCHER=ccache >"$work/configure.log" 2>&1 || { cat "$work/configure.log"; fail "configure"; }
tr -s ' \n' ' ' <"$work/configure.log" | grep -q "are not those this attnlab was built from" ||  # CMake wraps warnings
  { cat "$work/configure.log"; fail "configuring against edited headers gave no warning"; }
cmake --build "$work/build" -j 2 --target plugin_scorer_luong_general >"$work/build.log" 2>&1 ||
  { cat "$work/build.log"; fail "build"; }

runner=$prefix/bin/runner
plugins=$work/build/plugins
"$runner" plugins --plugin-path "$plugins" >"$work/list.txt" 2>"$work/list.err" || { cat "$work/list.err"; fail "runner plugins"; }
grep -q "luong_general" "$work/list.txt" && { cat "$work/list.txt"; fail "runner plugins lists the stale plugin"; }
grep "libattnlab_scorer_luong_general.so" "$work/list.err" | grep -q "luong_general' was built against other attnlab SDK headers" ||
  { cat "$work/list.err"; fail "runner plugins gave no warning naming the plugin and the headers"; }

rc=0
(cd "$work" && "$runner" "$example/experiment.yaml" --plugin-path "$plugins" --results "$work/run.h5" -q \
   data_dir="$work/datasets") >"$work/run.out" 2>"$work/run.err" || rc=$?
[ "$rc" -ne 0 ] || fail "the run with the stale plugin succeeded"
grep -q "scorer plugin 'luong_general' is provided by .*libattnlab_scorer_luong_general.so, which could not be loaded: .*was built against other attnlab SDK headers" "$work/run.err" ||
  { cat "$work/run.err"; fail "the run's error does not name the plugin and the header mismatch"; }
grep -q "failed in " "$work/run.err" && { cat "$work/run.err"; fail "the run got as far as calling a plugin"; }
echo "stale headers: a plugin built against edited installed headers is refused at load, named"
