// The Q8_0 kernels of q8_0_avx2.cpp compiled again with AVX-VNNI (-mavxvnni: __AVXVNNI__),
// which turns its helpers into VPDPWSSD / VPDPBUSD and its names into *_avxvnni (avx2_util.h).
#include "cpu/dot/q8_0_avx2.cpp"
