#!/usr/bin/env bash
# Installs the Debian 12 packages moetier's build and tests need. Idempotent: installs
# only what is missing, so a second run is a no-op.
set -euo pipefail
packages=(
  build-essential cmake pkg-config
  libfmt-dev nlohmann-json3-dev libssl-dev libpcre2-dev
  libcpp-httplib-dev                  # moetier serve (HTTP)
  libvulkan-dev libvulkan-volk-dev glslc   # the Vulkan GPU backend (headers, run-time loader, shader compiler)
  mesa-vulkan-drivers                 # lavapipe: Vulkan on the CPU, so the GPU kernels are tested without a GPU
  libgtest-dev libgmock-dev
  chromium                   # the web UI test (tests/node/webui_test.mjs): headless, driven by puppeteer-core
  librsvg2-bin               # rsvg-convert: bench --chart FILE.png (SVG -> PNG)
  clang libclang-rt-14-dev   # libFuzzer target and sanitizer runtime
  g++-mingw-w64-x86-64-posix mingw-w64-tools dpkg-dev   # the Windows build (scripts/build-windows.sh)
  wine64 xvfb xauth curl python3   # its tests under Wine (scripts/windows-tests.sh); Wine's Vulkan needs an X display
  python3-jinja2             # template_parity: chat templates rendered by Jinja2 and by moetier (scripts/template-parity.py)
)
# The Windows build compiles PCRE2 and cpp-httplib from Debian's own source packages
# (apt-get source): that needs a deb-src entry for the release.
need_update=0
if ! grep -rqsE '^(Types:.*deb-src|deb-src )' /etc/apt/sources.list /etc/apt/sources.list.d/; then
  echo "setup: adding a deb-src entry for bookworm (the Windows build's PCRE2 and cpp-httplib sources)"
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  printf 'Types: deb-src\nURIs: http://deb.debian.org/debian\nSuites: bookworm\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' |
    $SUDO tee /etc/apt/sources.list.d/moetier-deb-src.sources >/dev/null
  need_update=1
fi
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# Node.js and npm for the OpenAI client test (tests/node): any installed Node >= 18 will do.
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
  missing+=(nodejs npm)
fi
if [ ${#missing[@]} -gt 0 ] || [ "$need_update" -eq 1 ]; then
  [ ${#missing[@]} -eq 0 ] || echo "setup: installing ${missing[*]}"
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  [ ${#missing[@]} -eq 0 ] || $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
else
  echo "setup: all packages present"
fi
