// Run-time CPU feature detection. Kernels for an ISA live in their own translation
// units compiled with that ISA's flags; the dispatcher asks these flags which to call,
// so one binary runs on any x86-64 machine.
#pragma once

#include <string>
#include <string_view>

#include "core/status.h"

namespace moetier {

struct CpuFeatures {
  bool sse42 = false;
  bool avx = false;
  bool avx2 = false;
  bool fma = false;
  bool f16c = false;
  bool avx512f = false;
  bool avx512bw = false;
  bool avx512vl = false;
  bool avx512vnni = false;
  bool avx512bf16 = false;
  bool avxvnni = false;
  std::string isa_limit;   // "" or the --cpu-isa tier the features were capped to

  // The ISA set the *_avx2.cpp / *_avx512.cpp units are compiled for (see CMakeLists.txt).
  bool has_avx2_set() const { return avx2 && fma && f16c; }
  bool has_avx512_set() const { return has_avx2_set() && avx512f && avx512bw && avx512vl && avx512vnni; }

  // "AVX2 FMA F16C AVX512F ..." for logs and bench output.
  std::string describe() const;
};

// Detected once on first call (cpuid + OS support for the register state via xgetbv),
// then capped by limit_cpu_isa when that was called first.
const CpuFeatures& cpu_features();

// --cpu-isa: use no kernels above this tier, so the AVX2 path (the users' laptops) can be
// measured on an AVX-512 machine: "auto" (what the CPU has), "avx512", "avx2" (+AVX-VNNI
// where present), "avx2-novnni", "scalar". A process-wide setting like the CPU itself, made
// once by the command line before anything runs kernels; errors for an unknown tier, for a
// tier the CPU lacks, or when cpu_features() was already read.
Status limit_cpu_isa(std::string_view tier);

}  // namespace moetier
