#!/usr/bin/env bash
# Builds Intel's opencl-intercept-layer (the peer bench/bench_floor.py measures kprof beside)
# from its source, into a cache outside the repository: its code is never copied here.
#
#   bench/build_intercept.sh [SOURCE]      # SOURCE: a checkout, or a git dir to archive
#
# SOURCE defaults to $KPROF_INTERCEPT_SRC, else the read-only mirror below. The result is
# $KPROF_INTERCEPT_DIR (default ~/.cache/kprof-bench/intercept)/lib/libOpenCL.so: an
# interceptor that a program opens in place of the OpenCL loader, and that forwards to the
# real loader named by CLI_OpenCLFileName.
set -euo pipefail

src=${1:-${KPROF_INTERCEPT_SRC:-/work/.mirror/intel+opencl-intercept-layer/repo}}
cache=${KPROF_INTERCEPT_DIR:-$HOME/.cache/kprof-bench/intercept}
jobs=$(nproc 2>/dev/null || echo 2)

mkdir -p "$cache"
rm -rf "$cache/src" "$cache/build"
if [ -f "$src/CMakeLists.txt" ]; then
    cp -r "$src" "$cache/src" # a work tree
else
    # A git dir (the mirror has no work tree): its HEAD, exported; the commit is recorded.
    mkdir -p "$cache/src"
    git -C "$src" archive HEAD | tar -x -C "$cache/src"
    git -C "$src" rev-parse HEAD >"$cache/commit"
fi

# Release: the layer as a user would measure with it (RelWithDebInfo, its default, is -O2 -g).
# No MDAPI (Intel GPU counters only) and no cliloader: the benchmark opens the library by path.
cmake -S "$cache/src" -B "$cache/build" -DCMAKE_BUILD_TYPE=Release \
    -DENABLE_MDAPI=OFF -DENABLE_CLILOADER=OFF -DCMAKE_INSTALL_PREFIX="$cache" >/dev/null
cmake --build "$cache/build" --target OpenCL -j "$jobs"
mkdir -p "$cache/lib"
cp -L "$(find "$cache/build" -name 'libOpenCL.so*' -type f | head -1)" "$cache/lib/libOpenCL.so"
echo "$cache/lib/libOpenCL.so"
