// The attention kernels again, for AVX-512: forward.cpp and backward.cpp compiled into namespace
// attention_kernels::avx512 for the x86-64-v4 feature set, each float kernel twice: with the
// generic softmax and with the intrinsic one (Softmax::avx512, softmax.h's Avx512Lanes). Built on
// every x86-64 build, native or portable; kernels.h picks a copy and softmax at run time
// (AttentionOptions::kernels), so both softmaxes are built and tested everywhere.
//
// The features come from a target pragma placed after every header with external-linkage code,
// not from -m flags on this file: functions from those headers (std::fill, fast_exp, ...) are then
// compiled for the baseline here too. With -m flags their AVX-512 copies would be link-once
// duplicates the linker may pick for the whole program, which would then fail on CPUs without
// AVX-512. The kernel headers (tiles.h, softmax.h) keep everything in an anonymous namespace, so
// they are included after the pragma, for AVX-512.
// clang ignores GCC target pragmas: a clang build (the fuzz build) has the base copy only.
#if defined(__x86_64__) && !defined(__clang__)
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <string>
#include <type_traits>

#include "headlab/ops/fast_exp.h"
#include "kernels.h"

#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512dq,avx512vl,avx512cd,avx2,fma,bmi,bmi2")
#define HEADLAB_KERNEL_ISA avx512
#define HEADLAB_ATTENTION_AVX512_COPY
#include "backward.cpp"
#include "forward.cpp"
#pragma GCC pop_options
#endif
