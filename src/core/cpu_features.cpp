#include "core/cpu_features.h"

#include <utility>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

namespace moetier {

namespace {

#if defined(__x86_64__) || defined(__i386__)
unsigned long long read_xcr0() {
  unsigned int eax = 0, edx = 0;
  __asm__ volatile("xgetbv" : "=a"(eax), "=d"(edx) : "c"(0));
  return (static_cast<unsigned long long>(edx) << 32) | eax;
}
#endif

CpuFeatures detect() {
  CpuFeatures f;
#if defined(__x86_64__) || defined(__i386__)
  unsigned int a, b, c, d;
  if (!__get_cpuid(1, &a, &b, &c, &d)) return f;
  f.sse42 = c & bit_SSE4_2;
  const bool osxsave = c & bit_OSXSAVE;
  const unsigned long long xcr0 = osxsave ? read_xcr0() : 0;
  const bool ymm_ok = (xcr0 & 0x6) == 0x6;
  const bool zmm_ok = (xcr0 & 0xe6) == 0xe6;
  f.avx = ymm_ok && (c & bit_AVX);
  f.fma = f.avx && (c & bit_FMA);
  f.f16c = f.avx && (c & bit_F16C);
  if (__get_cpuid_count(7, 0, &a, &b, &c, &d)) {
    f.avx2 = f.avx && (b & bit_AVX2);
    f.avx512f = zmm_ok && (b & bit_AVX512F);
    f.avx512bw = f.avx512f && (b & bit_AVX512BW);
    f.avx512vl = f.avx512f && (b & bit_AVX512VL);
    f.avx512vnni = f.avx512f && (c & bit_AVX512VNNI);
  }
  if (__get_cpuid_count(7, 1, &a, &b, &c, &d)) {
    f.avxvnni = f.avx2 && (a & (1u << 4));
    f.avx512bf16 = f.avx512f && (a & (1u << 5));
  }
#endif
  return f;
}

}  // namespace

std::string CpuFeatures::describe() const {
  std::string s;
  auto add = [&](bool on, const char* name) {
    if (!on) return;
    if (!s.empty()) s += ' ';
    s += name;
  };
  add(sse42, "SSE4.2");
  add(avx, "AVX");
  add(avx2, "AVX2");
  add(fma, "FMA");
  add(f16c, "F16C");
  add(avxvnni, "AVX-VNNI");
  add(avx512f, "AVX512F");
  add(avx512bw, "AVX512BW");
  add(avx512vl, "AVX512VL");
  add(avx512vnni, "AVX512-VNNI");
  add(avx512bf16, "AVX512-BF16");
  if (s.empty()) s = "scalar";
  if (!isa_limit.empty()) s += " (--cpu-isa " + isa_limit + ")";
  return s;
}

namespace {

// The cap limit_cpu_isa sets before the first cpu_features() call (then never changes).
struct IsaState {
  std::string limit;
  bool read = false;
};
IsaState& isa_state() {
  static IsaState state;  // process-wide, like the CPU it describes
  return state;
}

CpuFeatures capped(CpuFeatures f, const std::string& limit) {
  if (limit.empty() || limit == "auto") return f;
  f.isa_limit = limit;
  if (limit == "avx512") return f;
  f.avx512f = f.avx512bw = f.avx512vl = f.avx512vnni = f.avx512bf16 = false;
  if (limit == "avx2") return f;
  f.avxvnni = false;
  if (limit == "avx2-novnni") return f;
  f.avx2 = f.fma = f.f16c = false;  // "scalar"
  return f;
}

}  // namespace

const CpuFeatures& cpu_features() {
  static const CpuFeatures features = [] {
    isa_state().read = true;
    return capped(detect(), isa_state().limit);
  }();
  return features;
}

Status limit_cpu_isa(std::string_view tier) {
  if (tier != "auto" && tier != "avx512" && tier != "avx2" && tier != "avx2-novnni" && tier != "scalar") {
    return Status::bad_input("--cpu-isa takes auto, avx512, avx2, avx2-novnni or scalar, not '" + std::string(tier) + "'");
  }
  if (isa_state().read) {
    return Status::runtime("--cpu-isa must be set before the CPU's features are used (a bug in the caller)");
  }
  const CpuFeatures have = detect();
  if (tier == "avx512" && !have.has_avx512_set()) {
    return Status::bad_input("--cpu-isa avx512: this CPU lacks AVX-512 (F, BW, VL and VNNI): " + have.describe());
  }
  if ((tier == "avx2" || tier == "avx2-novnni") && !have.has_avx2_set()) {
    return Status::bad_input("--cpu-isa " + std::string(tier) + ": this CPU lacks AVX2, FMA or F16C: " + have.describe());
  }
  isa_state().limit = std::string(tier);
  return Status::ok();
}

}  // namespace moetier
