// Attention forward + backward time as the head count grows at fixed d_model = 256 (Dh = 256/H):
// the cost of "more heads" that head studies pay. B = 16, T = 128, causal, float, 2 threads,
// q/k/v as strided slices of one fused [B, T, 3*256] projection (the model's layout). Calls the
// kernels directly (no tape). Prints median/min/max over reps after warm-up, the forward and
// backward medians, useful GFLOP/s (causal half of the 6 products) and the ratio to H = 1.
//   ./build/bench_attention [reps=20] [threads=2]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "headlab/common/parallel.h"
#include "headlab/linalg/gemm.h"
#include "headlab/ops/attention.h"

using namespace headlab;

namespace {

double seconds_now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

void fill_pattern(const Tensor<float>& t, int salt) {
  for (int64_t i = 0; i < t.numel(); ++i) t.data()[i] = static_cast<float>((i * 7 + salt) % 23 - 11) * 0.02f;
}

}  // namespace

int main(int argc, char** argv) {
  init_blis();
  const int reps = argc > 1 ? std::atoi(argv[1]) : 20;
  set_num_threads(argc > 2 ? std::atoi(argv[2]) : 2);
  const int64_t B = 16, T = 128, C = 256;
  std::printf("blis kernels: %s, threads: %d, reps: %d, B=%ld T=%ld d_model=%ld causal float\n",
              blis_kernel_name().c_str(), num_threads(), reps, static_cast<long>(B), static_cast<long>(T),
              static_cast<long>(C));
  std::printf("%4s %4s %10s %10s %10s %10s %10s %8s %9s\n", "H", "Dh", "fwd ms", "bwd ms", "total ms", "min ms",
              "max ms", "GFLOP/s", "vs H=1");
  const double flops = 6.0 * 2.0 * B * T * T * C / 2.0;  // 6 products of [T,T]x[T,Dh] per head, causal half
  double base = 0;
  for (int64_t H : {1, 2, 4, 8, 16}) {
    const int64_t Dh = C / H;
    Arena arena;
    const Tensor<float> qkv = arena.empty<float>({B, T, 3 * H, Dh});  // fused projection output
    fill_pattern(qkv, 1);
    const Tensor<float> q = qkv.narrow(2, 0, H), k = qkv.narrow(2, H, H), v = qkv.narrow(2, 2 * H, H);
    const Tensor<float> out = arena.empty<float>({B, T, H, Dh}), dout = arena.empty<float>({B, T, H, Dh});
    fill_pattern(dout, 2);
    const Tensor<float> probs = arena.empty<float>({B, H, T, T});
    const Tensor<float> scratch = arena.empty<float>({num_threads(), T, T});
    const Tensor<float> dq = arena.zeros<float>({B, T, H, Dh}), dk = arena.zeros<float>({B, T, H, Dh}),
                        dv = arena.zeros<float>({B, T, H, Dh});
    AttentionOptions options;  // causal
    std::vector<double> forward, backward, total;
    for (int r = 0; r < reps + 3; ++r) {
      const double t0 = seconds_now();
      attention_forward(out, probs, q, k, v, Tensor<float>(), options);
      const double t1 = seconds_now();
      attention_backward(dq, dk, dv, Tensor<float>(), dout, q, k, v, Tensor<float>(), probs, options, scratch,
                         Tensor<float>());
      const double t2 = seconds_now();
      if (r < 3) continue;  // warm-up
      forward.push_back(t1 - t0);
      backward.push_back(t2 - t1);
      total.push_back(t2 - t0);
    }
    const double med = median(total);
    if (H == 1) base = med;
    std::printf("%4ld %4ld %10.3f %10.3f %10.3f %10.3f %10.3f %8.1f %9.2f\n", static_cast<long>(H),
                static_cast<long>(Dh), median(forward) * 1e3, median(backward) * 1e3, med * 1e3,
                *std::min_element(total.begin(), total.end()) * 1e3,
                *std::max_element(total.begin(), total.end()) * 1e3, flops / med * 1e-9, med / base);
  }
  return 0;
}
