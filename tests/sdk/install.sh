# Sourced by the tests/sdk scripts: a scratch folder $work (removed on exit), fail(), ccache for the
# out-of-tree builds, no ATTNLAB_PLUGIN_PATH (only what the install and --plugin-path give), and
# attnlab installed from the build folder $build into $prefix = $work/prefix, as a user installs it.
work=$(mktemp -d "${TMPDIR:-/tmp}/attnlab-sdk.XXXXXX")
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
export CCACHE_DIR=${CCACHE_DIR:-${ATTNLAB_CACHE:-$HOME/.cache/attnlab}/ccache} CCACHE_BASEDIR=$work
export CCACHE_SLOPPINESS=include_file_mtime,include_file_ctime
unset ATTNLAB_PLUGIN_PATH
prefix=$work/prefix
cmake --install "$build" --prefix "$prefix" >/dev/null
