// GEMM speed through the engine against a direct BLIS call, side by side in one run.
// For each shape it alternates: direct bli_sgemm_ex, headlab::gemm (the engine's wrapper), and
// the tape's linear op (y = x w^T, the projection every layer runs), and prints median GFLOP/s
// and the engine/direct ratio. Also prints the BLIS kernel set the engine selected.
//   ./build/bench_gemm [reps]        (threads: OMP_NUM_THREADS, default all cores)
#include <blis.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "headlab/common/parallel.h"
#include "headlab/common/timing.h"
#include "headlab/linalg/gemm.h"
#include "headlab/ops/matmul.h"

using namespace headlab;

namespace {}  // namespace

int main(int argc, char** argv) {
  init_blis();
  const int reps = argc > 1 ? std::atoi(argv[1]) : 15;
  std::printf("blis kernels: %s, threads: %d, reps: %d (median GFLOP/s)\n", blis_kernel_name().c_str(), num_threads(),
              reps);
  std::printf("%-18s %10s %10s %10s %12s %12s\n", "M x K x N", "direct", "gemm()", "linear", "gemm/direct",
              "linear/direct");
  struct GemmShape {
    int64_t m, k, n;
  };
  const GemmShape shapes[] = {{2048, 2048, 2048}, {2048, 256, 768},  {2048, 256, 1024},
                              {2048, 1024, 256},  {2048, 512, 1536}, {128, 64, 128}};
  for (const GemmShape& s : shapes) {
    Arena arena;
    Tensor<float> x = arena.empty<float>({s.m, s.k});  // activations [M, K]
    Tensor<float> w = arena.empty<float>({s.n, s.k});  // weight [N, K] (PyTorch orientation)
    Tensor<float> y = arena.empty<float>({s.m, s.n});
    for (int64_t i = 0; i < x.numel(); ++i) x.data()[i] = static_cast<float>((i % 17) - 8) * 0.01f;
    for (int64_t i = 0; i < w.numel(); ++i) w.data()[i] = static_cast<float>((i % 13) - 6) * 0.01f;
    const double flops = 2.0 * s.m * s.n * s.k;
    std::vector<double> direct, engine, op;
    rntm_t rntm = BLIS_RNTM_INITIALIZER;
    bli_rntm_set_num_threads(num_threads(), &rntm);
    float one = 1, zero = 0;
    Arena step_arena;
    for (int r = 0; r < reps + 2; ++r) {
      double t0 = wall_seconds();
      bli_sgemm_ex(BLIS_NO_TRANSPOSE, BLIS_TRANSPOSE, s.m, s.n, s.k, &one, x.data(), s.k, 1, w.data(), s.k, 1, &zero,
                   y.data(), s.n, 1, nullptr, &rntm);
      double t1 = wall_seconds();
      gemm(x, w.transpose(0, 1), y, 1.0f, 0.0f);
      double t2 = wall_seconds();
      {
        Tape<float> tape(step_arena);
        NoGradGuard<float> no_grad(tape);
        linear(tape.constant(x), tape.constant(w));
        tape.reset();
      }
      double t3 = wall_seconds();
      if (r < 2) continue;  // warm-up
      direct.push_back(t1 - t0);
      engine.push_back(t2 - t1);
      op.push_back(t3 - t2);
    }
    const double gd = flops / median(direct) * 1e-9, ge = flops / median(engine) * 1e-9, gl = flops / median(op) * 1e-9;
    char label[64];
    std::snprintf(label, sizeof label, "%ldx%ldx%ld", static_cast<long>(s.m), static_cast<long>(s.k),
                  static_cast<long>(s.n));
    std::printf("%-18s %10.1f %10.1f %10.1f %12.3f %12.3f\n", label, gd, ge, gl, ge / gd, gl / gd);
  }
  return 0;
}
