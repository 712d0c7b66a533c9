#!/usr/bin/env bash
# Cross-builds moetier for 64-bit Windows on Debian 12 with MinGW-w64 into build-win/:
# moetier.exe (static: no DLLs beyond Windows' own) and the test binaries, which run here
# under Wine, and build-win/moetier-windows-x64.zip (moetier.exe + packaging/windows/README.txt).
# With the Vulkan backend: volk opens the Windows loader (vulkan-1.dll) at run time, so
# moetier.exe starts, and falls back to the CPU, where there is none; under Wine the GPU
# tests run on the build machine's lavapipe (scripts/windows-gpu-tests.sh).
#
#   scripts/build-windows.sh [TARGET...]    default targets: moetier moetier_unit_tests
#                                           moetier_kernel_tests moetier_gpu_tests
#
# Environment: JOBS (parallel jobs; default: all cores), NICE (e.g. "nice -n 19"),
# MOETIER_REF_DIR (reference data for the tests; default ../shared/ref), MOETIER_VULKAN
# (OFF: CPU only), MOETIER_SPIRV_DIR (a build's shaders/ folder whose up-to-date SPIR-V is
# reused instead of running glslc again; default build/shaders, the Linux build's, when it
# exists; empty: compile every shader here).
# Needs: g++-mingw-w64-x86-64-posix mingw-w64-tools cmake, dpkg-dev (apt-get source), wine64
# (to run the tests), the Linux build's header packages (libfmt-dev nlohmann-json3-dev; for
# the GPU backend libvulkan-dev libvulkan-volk-dev, and glslc, which runs on this machine) and
# a deb-src entry for bookworm (/etc/apt/sources.list.d/: "Types: deb-src", "Suites: bookworm"):
# PCRE2, cpp-httplib's whole header and GoogleTest come from Debian's source packages and
# are built into build-win/deps/, never into the repository.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
out=$root/build-win
deps=$out/deps
src=$deps/src
prefix=$deps/prefix
toolchain=$root/cmake/mingw-w64-x86_64.cmake
jobs=${JOBS:-$(nproc 2>/dev/null || echo 2)}
nice_cmd=${NICE:-}
ref_dir=${MOETIER_REF_DIR:-$(cd "$root/.." && pwd)/shared/ref}
targets=("$@")
vulkan=${MOETIER_VULKAN:-ON}
spirv_dir=${MOETIER_SPIRV_DIR-$root/build/shaders}
[ -d "$spirv_dir" ] || spirv_dir=""
[ ${#targets[@]} -gt 0 ] || targets=(moetier moetier_unit_tests moetier_kernel_tests moetier_gpu_tests)

for tool in x86_64-w64-mingw32-g++-posix cmake; do
  command -v "$tool" >/dev/null || { echo "build-windows: $tool not found (apt-get install g++-mingw-w64-x86-64-posix mingw-w64-tools cmake)" >&2; exit 1; }
done
mkdir -p "$src" "$prefix/include"

# A Debian source package unpacked under deps/src (once); prints its folder.
source_dir() {
  local pkg=$1 dir
  dir=$(find "$src" -maxdepth 1 -type d -name "$pkg-[0-9]*" | head -1)
  if [ -z "$dir" ]; then
    if ! (cd "$src" && apt-get source -qq "$pkg" >&2); then
      echo "build-windows: 'apt-get source $pkg' failed: add a deb-src entry for bookworm and run apt-get update" >&2
      exit 1
    fi
    dir=$(find "$src" -maxdepth 1 -type d -name "$pkg-[0-9]*" | head -1)
  fi
  echo "$dir"
}

# A CMake project cross-built and installed into the prefix (once: a stamp marks it done).
build_dep() {
  local name=$1 dir=$2
  shift 2
  [ -f "$deps/$name.done" ] && return 0
  echo "build-windows: building $name for Windows from $dir"
  $nice_cmd cmake -S "$dir" -B "$deps/build-$name" -DCMAKE_TOOLCHAIN_FILE="$toolchain" -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_INSTALL_PREFIX="$prefix" -DBUILD_SHARED_LIBS=OFF "$@" >"$deps/$name.log"
  $nice_cmd cmake --build "$deps/build-$name" -j"$jobs" --target install >>"$deps/$name.log"
  touch "$deps/$name.done"
}

# Header-only dependencies: the Linux packages' headers, copied into the prefix (fmt is
# compiled header-only there; see cmake/windows_deps.cmake).
for h in fmt nlohmann; do
  [ -d "/usr/include/$h" ] || { echo "build-windows: /usr/include/$h missing (apt-get install libfmt-dev nlohmann-json3-dev)" >&2; exit 1; }
  [ -d "$prefix/include/$h" ] || cp -r "/usr/include/$h" "$prefix/include/"
done
# libcpp-httplib-dev's httplib.h declares only (its code is in the shared library): take the
# whole header from the source package.
if [ ! -f "$prefix/include/httplib.h" ]; then
  cp "$(source_dir cpp-httplib)/httplib.h" "$prefix/include/httplib.h"
fi

# The Vulkan backend: Debian's Vulkan headers (OS-independent; vk_video is what they include)
# and volk (volk.h and the volk.c the build compiles, which opens vulkan-1.dll on Windows),
# copied into the prefix; CMake builds without the backend if any of it, or glslc, is missing.
if [ "$vulkan" != OFF ]; then
  for h in vulkan vk_video volk.h volk.c; do
    if [ ! -e "/usr/include/$h" ]; then
      echo "build-windows: /usr/include/$h missing: building without the GPU backend (apt-get install libvulkan-dev libvulkan-volk-dev glslc)" >&2
      vulkan=OFF
      break
    fi
    [ -e "$prefix/include/$h" ] || cp -r "/usr/include/$h" "$prefix/include/"
  done
fi

build_dep pcre2 "$(source_dir pcre2)" \
  -DPCRE2_BUILD_PCRE2_8=ON -DPCRE2_BUILD_PCRE2_16=OFF -DPCRE2_BUILD_PCRE2_32=OFF -DPCRE2_SUPPORT_JIT=ON \
  -DPCRE2_SUPPORT_UNICODE=ON -DPCRE2_BUILD_PCRE2GREP=OFF -DPCRE2_BUILD_TESTS=OFF \
  -DPCRE2_SUPPORT_LIBZ=OFF -DPCRE2_SUPPORT_LIBBZ2=OFF -DPCRE2_SUPPORT_LIBEDIT=OFF -DPCRE2_SUPPORT_LIBREADLINE=OFF
# GoogleTest: Debian's sources as the googletest package installs them (with libgtest-dev),
# else its source package.
gtest_src=/usr/src/googletest
[ -f "$gtest_src/CMakeLists.txt" ] || gtest_src=$(source_dir googletest)
build_dep googletest "$gtest_src" -DBUILD_GMOCK=OFF -DINSTALL_GTEST=ON

# The test binaries run under Wine: at build time (the tests' discovery) and in ctest.
emulator=()
wine=$(command -v wine64 || true)
[ -n "$wine" ] || { [ -x /usr/lib/wine/wine64 ] && wine=/usr/lib/wine/wine64; }
if [ -n "$wine" ]; then
  emulator=(-DCMAKE_CROSSCOMPILING_EMULATOR="env;WINEDEBUG=-all;$wine")
else
  echo "build-windows: no wine64: building without the tests" >&2
  emulator=(-DMOETIER_TESTS=OFF)
fi
launcher=()
if command -v ccache >/dev/null; then
  launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache)
fi

$nice_cmd cmake -S . -B "$out" -DCMAKE_TOOLCHAIN_FILE="$toolchain" -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_FIND_ROOT_PATH="$prefix" -DMOETIER_VULKAN="$vulkan" -DMOETIER_SPIRV_DIR="$spirv_dir" -DMOETIER_REF_DIR="$ref_dir" \
  "${emulator[@]}" "${launcher[@]}" >/dev/null
$nice_cmd cmake --build "$out" -j"$jobs" --target "${targets[@]}"

# The zip a Windows user downloads: moetier.exe and a short README (packaging/windows/).
if [ -f "$out/moetier.exe" ]; then
  rm -rf "$out/package" && mkdir -p "$out/package/moetier"
  cp "$out/moetier.exe" "$root/packaging/windows/README.txt" "$out/package/moetier/"
  (cd "$out/package" && cmake -E tar cf "$out/moetier-windows-x64.zip" --format=zip moetier)
  echo "build-windows: $out/moetier-windows-x64.zip ($(du -h "$out/moetier-windows-x64.zip" | cut -f1))"
fi
