// Attention forward + backward time as the head count grows at fixed d_model = 256 (Dh = 256/H):
// the cost of "more heads" that head studies pay. Causal, float, q/k/v as strided slices of one
// fused [B, T, 3*256] projection (the model's layout). Calls the kernels directly (no tape).
// Variants, alternated rep by rep in one run so the ratios share the machine's state:
//   blis   the first kernel (kept here for comparison): per-head BLIS products on 128-row causal
//          blocks, A [B,H,T,T] saved by the forward and read by the backward;
//   fused  the library kernel (src/ops/attention/), A recomputed from row stats;
//   keep   the library kernel with A saved and read back. The tape uses `fused` below d_head
//          128 and `keep` from 128 on (kSaveProbsMinDHead in src/ops/attention.cpp): these
//          rows are the measurement behind that threshold.
// Prints, per variant, median forward / backward / total wall ms, the minimum total, the median
// process CPU ms of a rep (robust when other jobs share the cores; run with
// OMP_WAIT_POLICY=passive so waiting threads do not spin), useful GFLOP/s from the median (causal
// half of the 6 products) and the ratios to the first head count (wall and CPU).
//   ./build/bench_attention [reps=20] [threads=2] [T=128] [B=16] [variants=blis,fused,keep] [heads=1,2,4,8,16]
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <string>
#include <vector>

#include "headlab/common/parallel.h"
#include "headlab/common/timing.h"
#include "headlab/linalg/gemm.h"
#include "headlab/ops/attention.h"
#include "headlab/ops/fast_exp.h"

using namespace headlab;

namespace {

void fill_pattern(const Tensor<float>& t, int salt) {
  for (int64_t i = 0; i < t.numel(); ++i) t.data()[i] = static_cast<float>((i * 7 + salt) % 23 - 11) * 0.02f;
}

// ---- the first kernel: per-head gemm() on 128-row causal blocks (no gates, no padding) ----------

namespace blis_v1 {

constexpr int64_t kBlock = 128;

Tensor<float> head(const Tensor<float>& x, int64_t b, int64_t h) {
  return x.select(0, b).select(1, h);
}
Tensor<float> block(const Tensor<float>& m, int64_t r0, int64_t r1, int64_t c0, int64_t c1) {
  return m.narrow(0, r0, r1 - r0).narrow(1, c0, c1 - c0);
}

void softmax_row(float* row, int64_t n, int64_t width) {
  float max = -1e30f, sum = 0.0f;
#pragma omp simd reduction(max : max)
  for (int64_t s = 0; s < n; ++s) max = row[s] > max ? row[s] : max;
#pragma omp simd reduction(+ : sum)
  for (int64_t s = 0; s < n; ++s) {
    row[s] = fast_exp(row[s] - max);
    sum += row[s];
  }
  const float inv = 1.0f / sum;
#pragma omp simd
  for (int64_t s = 0; s < n; ++s) row[s] *= inv;
  std::fill(row + n, row + width, 0.0f);
}

void forward(const Tensor<float>& out, const Tensor<float>& probs, const Tensor<float>& q, const Tensor<float>& k,
             const Tensor<float>& v) {
  const int64_t B = q.size(0), T = q.size(1), H = q.size(2), Dh = q.size(3);
  const float scale = 1.0f / std::sqrt(static_cast<float>(Dh));
#pragma omp parallel for schedule(static)
  for (int64_t bh = 0; bh < B * H; ++bh) {
    const int64_t b = bh / H, h = bh % H;
    const Tensor<float> qh = head(q, b, h), kh = head(k, b, h), vh = head(v, b, h), oh = head(out, b, h);
    float* a = probs.data() + bh * T * T;
    const Tensor<float> A(a, {T, T});
    for (int64_t r0 = 0; r0 < T; r0 += kBlock) {
      const int64_t r1 = std::min(T, r0 + kBlock);
      gemm(qh.narrow(0, r0, r1 - r0), kh.narrow(0, 0, r1).transpose(0, 1), block(A, r0, r1, 0, r1), scale, 0.0f);
      for (int64_t t = r0; t < r1; ++t) softmax_row(a + t * T, t + 1, T);
      gemm(block(A, r0, r1, 0, r1), vh.narrow(0, 0, r1), oh.narrow(0, r0, r1 - r0), 1.0f, 0.0f);
    }
  }
}

void backward(const Tensor<float>& dq, const Tensor<float>& dk, const Tensor<float>& dv, const Tensor<float>& dout,
              const Tensor<float>& q, const Tensor<float>& k, const Tensor<float>& v, const Tensor<float>& probs,
              const Tensor<float>& scratch) {
  const int64_t B = q.size(0), T = q.size(1), H = q.size(2), Dh = q.size(3);
  const float scale = 1.0f / std::sqrt(static_cast<float>(Dh));
#pragma omp parallel for schedule(static)
  for (int64_t bh = 0; bh < B * H; ++bh) {
    const int64_t b = bh / H, h = bh % H;
    const Tensor<float> qh = head(q, b, h), kh = head(k, b, h), vh = head(v, b, h), doh = head(dout, b, h);
    float* ds = scratch.data() + omp_get_thread_num() * T * T;
    const Tensor<float> dS(ds, {T, T});
    float* a = probs.data() + bh * T * T;
    const Tensor<float> A(a, {T, T});
    for (int64_t r0 = 0; r0 < T; r0 += kBlock) {
      const int64_t r1 = std::min(T, r0 + kBlock);
      gemm(doh.narrow(0, r0, r1 - r0), vh.narrow(0, 0, r1).transpose(0, 1), block(dS, r0, r1, 0, r1), 1.0f, 0.0f);
    }
    for (int64_t t = 0; t < T; ++t) {
      float* gr = ds + t * T;
      const float* ar = a + t * T;
      float r = 0.0f;
#pragma omp simd reduction(+ : r)
      for (int64_t s = 0; s <= t; ++s) r += gr[s] * ar[s];
#pragma omp simd
      for (int64_t s = 0; s <= t; ++s) gr[s] = ar[s] * (gr[s] - r);
      std::fill(gr + t + 1, gr + std::min(T, (t / kBlock + 1) * kBlock), 0.0f);
    }
    for (int64_t r0 = 0; r0 < T; r0 += kBlock) {
      const int64_t r1 = std::min(T, r0 + kBlock);
      gemm(block(dS, r0, r1, 0, r1), kh.narrow(0, 0, r1), head(dq, b, h).narrow(0, r0, r1 - r0), scale, 1.0f);
    }
    for (int64_t c0 = 0; c0 < T; c0 += kBlock) {
      const int64_t c1 = std::min(T, c0 + kBlock);
      gemm(block(dS, c0, T, c0, c1).transpose(0, 1), qh.narrow(0, c0, T - c0), head(dk, b, h).narrow(0, c0, c1 - c0),
           scale, 1.0f);
      gemm(block(A, c0, T, c0, c1).transpose(0, 1), doh.narrow(0, c0, T - c0), head(dv, b, h).narrow(0, c0, c1 - c0),
           1.0f, 1.0f);
    }
  }
}

}  // namespace blis_v1

struct Timings {
  std::vector<double> forward, backward, total, cpu;
};

}  // namespace

int main(int argc, char** argv) {
  init_blis();
  const int reps = argc > 1 ? std::atoi(argv[1]) : 20;
  set_num_threads(argc > 2 ? std::atoi(argv[2]) : 2);
  const int64_t T = argc > 3 ? std::atol(argv[3]) : 128, B = argc > 4 ? std::atol(argv[4]) : 16, C = 256;
  const std::string wanted = argc > 5 ? argv[5] : "blis,fused,keep";
  std::vector<std::string> variants;
  for (const char* name : {"blis", "fused", "keep"})
    if (wanted.find(name) != std::string::npos) variants.push_back(name);
  std::printf("blis kernels: %s, threads: %d, reps: %d, B=%ld T=%ld d_model=%ld causal float\n",
              blis_kernel_name().c_str(), num_threads(), reps, static_cast<long>(B), static_cast<long>(T),
              static_cast<long>(C));
  std::printf("%-6s %4s %4s %9s %9s %9s %9s %9s %8s %8s %8s\n", "kernel", "H", "Dh", "fwd ms", "bwd ms", "total ms",
              "min ms", "cpu ms", "GFLOP/s", "vs 1st", "cpu/1st");
  const double flops = 6.0 * 2.0 * B * T * T * C / 2.0;  // 6 products of [T,T]x[T,Dh] per head, causal half
  std::vector<double> base(variants.size()), base_cpu(variants.size());
  std::vector<int64_t> heads;
  for (std::string list = argc > 6 ? argv[6] : "1,2,4,8,16"; !list.empty();) {
    const size_t comma = list.find(',');
    heads.push_back(std::atol(list.substr(0, comma).c_str()));
    list = comma == std::string::npos ? "" : list.substr(comma + 1);
  }
  for (const int64_t H : heads) {
    const int64_t Dh = C / H;
    Arena arena;
    const Tensor<float> qkv = arena.empty<float>({B, T, 3 * H, Dh});  // fused projection output
    fill_pattern(qkv, 1);
    const Tensor<float> q = qkv.narrow(2, 0, H), k = qkv.narrow(2, H, H), v = qkv.narrow(2, 2 * H, H);
    const Tensor<float> out = arena.empty<float>({B, T, H, Dh}), dout = arena.empty<float>({B, T, H, Dh});
    fill_pattern(dout, 2);
    const Tensor<float> probs = arena.empty<float>({B, H, T, T}), stats = arena.empty<float>({B, H, T, 2});
    const Tensor<float> scratch = arena.empty<float>({num_threads(), T, T});
    const Tensor<float> workspace = arena.empty<float>({num_threads(), attention_workspace_size(T, T, Dh)});
    const Tensor<float> dq = arena.zeros<float>({B, T, H, Dh}), dk = arena.zeros<float>({B, T, H, Dh}),
                        dv = arena.zeros<float>({B, T, H, Dh});
    AttentionOptions options;  // causal
    std::vector<Timings> timings(variants.size());
    for (int r = 0; r < reps + 3; ++r)
      for (size_t i = 0; i < variants.size(); ++i) {
        const std::string& name = variants[i];
        const Tensor<float> kept = name == "keep" ? probs : Tensor<float>();
        const double c0 = cpu_seconds(), t0 = wall_seconds();
        if (name == "blis") {
          blis_v1::forward(out, probs, q, k, v);
        } else {
          attention_forward(out, {.probs = kept, .stats = stats}, {.q = q, .k = k, .v = v}, options,
                            {.workspace = workspace});
        }
        const double t1 = wall_seconds();
        if (name == "blis") {
          blis_v1::backward(dq, dk, dv, dout, q, k, v, probs, scratch);
        } else {
          attention_backward({.dq = dq, .dk = dk, .dv = dv}, dout, {.q = q, .k = k, .v = v},
                             {.probs = kept, .stats = stats}, options, {.workspace = workspace});
        }
        const double t2 = wall_seconds(), c2 = cpu_seconds();
        if (r < 3) continue;  // warm-up
        timings[i].forward.push_back(t1 - t0);
        timings[i].backward.push_back(t2 - t1);
        timings[i].total.push_back(t2 - t0);
        timings[i].cpu.push_back(c2 - c0);
      }
    for (size_t i = 0; i < variants.size(); ++i) {
      const double med = median(timings[i].total), cpu = median(timings[i].cpu);
      if (H == heads.front()) base[i] = med, base_cpu[i] = cpu;
      std::printf("%-6s %4ld %4ld %9.3f %9.3f %9.3f %9.3f %9.3f %8.1f %8.2f %8.2f\n", variants[i].c_str(),
                  static_cast<long>(H), static_cast<long>(Dh), median(timings[i].forward) * 1e3,
                  median(timings[i].backward) * 1e3, med * 1e3,
                  *std::min_element(timings[i].total.begin(), timings[i].total.end()) * 1e3, cpu * 1e3,
                  flops / med * 1e-9, med / base[i], cpu / base_cpu[i]);
    }
  }
  return 0;
}
