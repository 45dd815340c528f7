#!/usr/bin/env bash
# find_package(attnlab) called inside a CMake function, as larger projects wrap their dependencies:
# the variables it sets stay in that function, and attnlab_add_plugin() (called outside it) must
# still find the SDK hash, enable testing at the folder's scope and install into
# <prefix>/lib/attnlab/plugins. Builds examples/out_of_tree_scorer that way, runs its 3 tests with
# ctest (none found fails), installs the plugin beside the installed runner and lists it from there.
#   function_scope.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
[ $# -eq 2 ] || { echo "usage: function_scope.sh BUILD_DIR SOURCE_DIR" >&2; exit 2; }
build=$1 src=$2
. "$(dirname "$0")/install.sh"  # $work, fail(), attnlab installed into $prefix

mkdir "$work/src"
cp -r "$src/examples/out_of_tree_scorer/." "$work/src/"
cat >"$work/src/CMakeLists.txt" <<'CMAKE'
cmake_minimum_required(VERSION 3.25)
project(luong_scorer LANGUAGES CXX)
function(use_attnlab)
  find_package(attnlab REQUIRED)
endfunction()
use_attnlab()
attnlab_add_plugin(luong_general KIND scorer SOURCES luong_general.cpp TESTS tests/luong_general_test.cpp)
CMAKE
cmake -S "$work/src" -B "$work/build" -G Ninja -DCMAKE_PREFIX_PATH="$prefix" \
  -DCMAKE_CXX_COMPILER_LAUNCHER=ccache >"$work/configure.log" 2>&1 || { cat "$work/configure.log"; fail "configure"; }
cmake --build "$work/build" -j 2 >"$work/build.log" 2>&1 || { cat "$work/build.log"; fail "build"; }
(cd "$work/build" && ctest --output-on-failure --no-tests=error) >"$work/ctest.log" 2>&1 ||
  { cat "$work/ctest.log"; fail "the plugin's own tests (testing enabled inside the function only?)"; }
ran=$(sed -n 's/.* tests failed out of \([0-9]*\)$/\1/p' "$work/ctest.log")
[ "$ran" = 3 ] || { cat "$work/ctest.log"; fail "ctest ran ${ran:-no} tests of the plugin's, expected 3"; }
cmake --install "$work/build" --prefix "$prefix" >"$work/install.log" 2>&1 || { cat "$work/install.log"; fail "install"; }
[ -f "$prefix/lib/attnlab/plugins/libattnlab_scorer_luong_general.so" ] ||
  { cat "$work/install.log"; fail "the plugin was not installed into <prefix>/lib/attnlab/plugins"; }
"$prefix/bin/runner" plugins scorer/luong_general >"$work/one.txt" 2>&1 ||
  { cat "$work/one.txt"; fail "the installed runner does not find the installed plugin"; }
echo "find_package(attnlab) in a function: the plugin built, its 3 tests ran, installed beside the runner"
