#!/bin/sh
# Fails when a translation unit compiled with ISA flags (src/**/*_<tier>.cpp for every tier
# above scalar in MOETIER_ISA_TIERS, src/cpu/isa.h) defines a weak symbol: an inline function,
# template instance or inline variable emitted there is one copy among several, and the linker
# keeps one for every caller in the binary. If it keeps the AVX-512 unit's copy, an AVX2 machine
# dies with SIGILL wherever the generic code calls it (the delta rule had this bug once: its
# loops were `inline` in a named namespace). Kernel code shared by ISA units goes into an
# anonymous namespace (internal linkage, one copy per unit). The only weak symbols allowed are
# the compiler's DW.ref.* data words (pointers to the C++ personality routine, no code).
# Usage: isa_units_weak_symbols.sh OBJECT...   (ctest passes every object of moetier_lib)
set -eu
NM=${NM:-nm}
tier_list="$(dirname "$0")/../src/cpu/isa.h"
tiers=$(sed -n 's/^ *X(\([a-z0-9_]*\), *k[A-Za-z0-9]*,.*/\1/p' "$tier_list" | grep -v '^scalar$' || true)
if [ -z "$tiers" ]; then
  echo "no ISA tiers found in $tier_list (MOETIER_ISA_TIERS)" >&2
  exit 1
fi
checked=0
bad=0
for obj in "$@"; do
  isa_unit=0
  for tier in $tiers; do
    case "$obj" in
      *_"$tier".cpp.o) isa_unit=1 ;;
    esac
  done
  [ "$isa_unit" -eq 1 ] || continue
  checked=$((checked + 1))
  weak=$("$NM" -C --defined-only "$obj" | awk '$2 == "W" || $2 == "V" || $2 == "u" || $2 == "w" || $2 == "v"' |
    grep -v ' DW\.ref\.' || true)
  if [ -n "$weak" ]; then
    echo "weak symbols in ISA unit $obj:"
    echo "$weak"
    bad=$((bad + 1))
  fi
done
# The list must have held the ISA units (a changed object naming would otherwise pass).
if [ "$checked" -lt 10 ]; then
  echo "only $checked ISA objects among the $# given: the object names changed?" >&2
  exit 1
fi
if [ "$bad" -ne 0 ]; then
  echo "$bad of $checked ISA units define weak symbols (see tests/isa_units_weak_symbols.sh)" >&2
  exit 1
fi
echo "$checked ISA units ($(echo $tiers)), no weak symbols"
