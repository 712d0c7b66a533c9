// The Q6_K kernels of q6_k_avx2.cpp compiled again with AVX-VNNI (-mavxvnni: __AVXVNNI__),
// which turns its helpers into VPDPWSSD / VPDPBUSD and its names into *_avxvnni (avx2_util.h).
#include "cpu/dot/q6_k_avx2.cpp"
