// The attention kernels again, for AVX-512, in a portable build: attention_kernels.cpp compiled
// into namespace attention_kernels::avx512 for the x86-64-v4 feature set, chosen at run time by
// attention_kernels.h when the CPU has it. Empty in a native build, which compiles the kernels
// once for the build machine.
//
// The features come from a target pragma placed after every header, not from -m flags on this
// file: functions from headers (std::fill, fast_exp, ...) are then compiled for the baseline here
// too. With -m flags their AVX-512 copies would be link-once duplicates the linker may pick for
// the whole program, which would then fail on CPUs without AVX-512.
#if defined(HEADLAB_PORTABLE_KERNELS)
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <string>
#include <type_traits>

#include "attention_kernels.h"
#include "headlab/ops/fast_exp.h"

#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512dq,avx512vl,avx512cd,avx2,fma,bmi,bmi2")
#define HEADLAB_KERNEL_ISA avx512
#define HEADLAB_KERNEL_SECOND_COPY
#include "attention_kernels.cpp"
#pragma GCC pop_options
#endif
