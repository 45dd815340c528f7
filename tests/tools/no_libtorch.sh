#!/usr/bin/env bash
# bin/runner runs compare, plot and report without LibTorch (issue 39): neither it nor any library it
# loads is LibTorch, c10 or libattnlab. Its LibTorch part, which it execs for everything else, does
# load them (the positive control: this check would see them).
#   no_libtorch.sh BUILD_DIR
set -euo pipefail
build=$1
front=$build/bin/runner
part=$build/libexec/attnlab/runner-torch
for f in "$front" "$part"; do
  [ -x "$f" ] || { echo "no_libtorch: $f is not an executable" >&2; exit 1; }
done
torch_libs='lib(torch|torch_cpu|c10|attnlab)\.so'
# ldd's output whole first: `ldd | grep -q` under pipefail fails when grep stops reading early (SIGPIPE).
front_libs=$(ldd "$front")
part_libs=$(ldd "$part")
if grep -E "$torch_libs" <<<"$front_libs"; then
  echo "no_libtorch: $front loads the libraries above; the tools must not (framework/src/tools)" >&2
  exit 1
fi
if ! grep -qE "$torch_libs" <<<"$part_libs"; then
  echo "no_libtorch: $part loads no LibTorch, so this check cannot see it" >&2
  exit 1
fi
# The front runs a tool itself: compare --help answers.
out=$("$front" compare --help)
grep -q "compare" <<<"$out" || { echo "no_libtorch: runner compare --help printed nothing useful" >&2; exit 1; }
echo "bin/runner loads no LibTorch; libexec/attnlab/runner-torch does"
