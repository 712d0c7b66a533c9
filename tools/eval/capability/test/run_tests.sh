#!/bin/sh
# ctest's entry for the capability-v1 tests: Node's test runner on test/*.test.mjs. Exits 77
# (ctest: skipped) when Node.js, puppeteer-core or Chromium is missing, unless
# MOETIER_REQUIRE_NODE / MOETIER_REQUIRE_CHROMIUM (set by scripts/test.sh) say they must be there.
cd "$(dirname "$0")/.." || exit 1
missing() {
  echo "capability tests: $1" >&2
  if [ -n "$MOETIER_REQUIRE_NODE$MOETIER_REQUIRE_CHROMIUM" ]; then exit 1; fi
  exit 77
}
command -v node >/dev/null 2>&1 || missing "Node.js is missing (scripts/setup.sh installs it)"
[ -f node_modules/puppeteer-core/package.json ] || missing "puppeteer-core is missing (run: cd tools/eval/capability && npm ci)"
chromium="${MOETIER_CHROMIUM:-}"
for c in /usr/bin/chromium /usr/bin/chromium-browser /usr/bin/google-chrome; do
  [ -z "$chromium" ] && [ -x "$c" ] && chromium="$c"
done
[ -n "$chromium" ] || missing "Chromium is missing (apt-get install chromium, or scripts/setup.sh)"
export MOETIER_CHROMIUM="$chromium"
exec node --test test/*.test.mjs
