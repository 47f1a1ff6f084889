// The two copies of the attention kernels every x86-64 build has (AttentionKernels::generic, with
// the generic float softmax, and ::avx512, with the intrinsic one; src/ops/attention/softmax.h),
// each against the naive loop reference and against each other, through the kernel API and the
// tape. The avx512 copy is skipped, with a warning, only on a CPU without AVX-512.
#include <catch2/catch.hpp>

#include <cstdint>
#include <cstdlib>
#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

#include "headlab/common/parallel.h"
#include "headlab/ops/attention.h"
#include "headlab/ops/elementwise.h"
#include "support/compare.h"
#include "support/naive_attention.h"
#include "support/random.h"

using namespace headlab;
using headlab::test::check_same_bits;
using headlab::test::random_tensor;
using headlab::test::require_close;
using headlab::test::to_vector;

namespace {

struct Shape5 {
  int64_t B, T, H, Hkv, Dh;
  bool causal, padded;
  double score_scale;  // q and k drawn from [-s, s]: at 12, most exponents fall below -87
};

template <typename T>
using Result = test::NaiveAttention<T>;  // out, probs, dq, dk, dv, dgates

template <typename T>
struct Problem {
  Tensor<T> q, k, v, gates, dout;
  std::vector<uint8_t> pad;
  AttentionOptions options;
};

template <typename T>
Problem<T> make_problem(Arena& arena, const Shape5& s, uint64_t seed) {
  Problem<T> p;
  p.q = random_tensor<T>(arena, {s.B, s.T, s.H, s.Dh}, seed, -s.score_scale, s.score_scale);
  p.k = random_tensor<T>(arena, {s.B, s.T, s.Hkv, s.Dh}, seed + 1, -s.score_scale, s.score_scale);
  p.v = random_tensor<T>(arena, {s.B, s.T, s.Hkv, s.Dh}, seed + 2);
  p.gates = random_tensor<T>(arena, {s.H}, seed + 3, 0.25, 1.5);
  p.gates.data()[0] = T(0);  // a pruned head
  p.dout = random_tensor<T>(arena, {s.B, s.T, s.H, s.Dh}, seed + 4);
  p.pad.assign(s.B * s.T, 1);
  for (int64_t t = 0; t < s.T; ++t) p.pad[t] = t < s.T - s.T / 3;  // item 0 right-padded
  p.options.causal = s.causal;
  p.options.key_padding = s.padded ? p.pad.data() : nullptr;
  return p;
}

// Forward (A kept) and backward through the kernel API with the given copy.
template <typename T>
Result<T> run_kernels(const Problem<T>& p, AttentionKernels kernels) {
  Arena arena;
  const int64_t B = p.q.size(0), T_ = p.q.size(1), H = p.q.size(2);
  AttentionOptions options = p.options;
  options.kernels = kernels;
  const AttentionInputs<T> inputs{.q = p.q, .k = p.k, .v = p.v, .gates = p.gates};
  const AttentionSaved<T> saved{.stats = arena.empty<T>({B, H, T_, 2})};
  const AttentionGrads<T> grads{.dq = arena.zeros<T>(p.q.shape()),
                                .dk = arena.zeros<T>(p.k.shape()),
                                .dv = arena.zeros<T>(p.v.shape()),
                                .dgates = arena.zeros<T>({H})};
  const AttentionScratch<T> scratch{
      .workspace = arena.empty<T>({num_threads(), attention_workspace_size(T_, p.k.size(1), p.q.size(3))}),
      .gate_partials = arena.empty<T>({B, H})};
  const Tensor<T> out = arena.empty<T>(p.q.shape()), probs = arena.empty<T>({B, H, T_, T_});
  attention_forward(out, saved, inputs, options, scratch);
  attention_forward(arena.empty<T>(p.q.shape()), {.probs = probs}, inputs, options, scratch);
  attention_backward(grads, p.dout, inputs, saved, options, scratch);
  return {to_vector(out),      to_vector(probs),    to_vector(grads.dq),
          to_vector(grads.dk), to_vector(grads.dv), to_vector(grads.dgates)};
}

// The same through the tape (L = sum(dout * out)), which must hand the choice to its backward.
template <typename T>
Result<T> run_tape(const Problem<T>& p, AttentionKernels kernels) {
  Arena arena;
  Tape<T> tape(arena);
  AttentionOptions options = p.options;
  options.kernels = kernels;
  Var<T> q = tape.leaf_with_grad(p.q), k = tape.leaf_with_grad(p.k), v = tape.leaf_with_grad(p.v);
  Var<T> gates = tape.leaf_with_grad(p.gates);
  Var<T> out = attention(q, k, v, options, gates);
  tape.backward(sum(mul(out, tape.constant(p.dout))));
  return {to_vector(out.value()), to_vector(attention_probs(out)), to_vector(q.grad()), to_vector(k.grad()),
          to_vector(v.grad()),    to_vector(gates.grad())};
}

// The kernels to test here: generic always, avx512 where the CPU has it.
std::vector<AttentionKernels> testable_kernels() {
  if (attention_kernels_available(AttentionKernels::avx512))
    return {AttentionKernels::generic, AttentionKernels::avx512};
  WARN("the CPU lacks AVX-512: the avx512 attention kernels are not tested here");
  return {AttentionKernels::generic};
}

const char* name(AttentionKernels k) {
  return k == AttentionKernels::avx512 ? "avx512" : "generic";
}

std::string describe(const Shape5& s) {
  std::ostringstream o;
  o << "B=" << s.B << " T=" << s.T << " H=" << s.H << " Hkv=" << s.Hkv << " Dh=" << s.Dh
    << (s.causal ? " causal" : " bidirectional") << (s.padded ? " padded" : "") << " score scale " << s.score_scale;
  return o.str();
}

}  // namespace

TEMPLATE_TEST_CASE("both attention kernel sets match the naive reference and each other", "[ops][attention]", float,
                   double) {
  // {B, T, H, Hkv, Dh, causal, padded, score scale}: 2 * 128 + 20 tokens span many 8-row blocks
  // and 16-lane key vectors with ragged ends; GQA and MQA; the softmax's widths (16 to 64 lanes
  // of float); scores large enough that most exponents leave fast_exp's range.
  const Shape5 s = GENERATE(values<Shape5>({
      {2, 2 * 128 + 20, 2, 1, 16, true, true, 1.0},
      {2, 2 * 128 + 20, 2, 2, 16, false, false, 1.0},
      {2, 45, 4, 2, 32, true, false, 1.0},
      {2, 45, 4, 2, 64, false, true, 1.0},
      {2, 70, 4, 1, 16, true, true, 12.0},
      {2, 70, 4, 4, 16, false, false, 12.0},
  }));
  INFO(describe(s));
  // Scores of a few hundred carry float rounding of ~3e-5 (in the reference too): 1e-4 there.
  const double tol = std::is_same_v<TestType, float> ? (s.score_scale > 1 ? 1e-4 : 1e-5) : 1e-12;
  Arena arena;
  const Problem<TestType> p = make_problem<TestType>(arena, s, 101);
  const auto naive = test::naive_attention(p.q, p.k, p.v, p.gates, s.causal, p.options.key_padding, p.dout);
  std::vector<Result<TestType>> results;
  for (const AttentionKernels kernels : testable_kernels()) {
    INFO("kernels " << name(kernels));
    results.push_back(run_kernels(p, kernels));
    require_close(results.back(), naive, tol);
    check_same_bits(run_tape(p, kernels), results.back());
  }
  // The sets differ only in the float softmax's exp and its lane code: a few ulp.
  if (results.size() == 2) require_close(results[1], results[0], std::is_same_v<TestType, float> ? 1e-6 : 1e-15);
}

TEST_CASE("explicit attention kernels: generic is the baseline copy, avx512 the intrinsic one or one line",
          "[ops][attention]") {
  CHECK(std::string(attention_kernels_in_use(AttentionKernels::generic)) == "baseline");
  if (attention_kernels_available(AttentionKernels::avx512)) {
    CHECK(std::string(attention_kernels_in_use(AttentionKernels::avx512)) == "avx512");
    return;
  }
  CHECK_THROWS_WITH(attention_kernels_in_use(AttentionKernels::avx512),
                    Catch::Contains("attention: kernels=avx512 needs a CPU with AVX-512"));
  Arena arena;
  const Problem<float> p = make_problem<float>(arena, {1, 4, 1, 1, 4, true, false, 1.0}, 7);
  REQUIRE_THROWS_WITH(run_kernels(p, AttentionKernels::avx512),
                      Catch::Contains("attention: kernels=avx512 needs a CPU with AVX-512"));
}

TEST_CASE("automatic attention kernels follow the build, the CPU and HEADLAB_NO_AVX512",
          "[ops][attention][kernel_choice]") {
  // The rule of include/headlab/ops/attention.h. A native build compiles these tests with the
  // library's -march=native, so __AVX512F__ here says whether the library's build targets it.
  // A portable build's CTest entry attention_baseline runs this case once more with HEADLAB_NO_AVX512=1.
  const char* off = std::getenv("HEADLAB_NO_AVX512");
  const bool forced_off = off != nullptr && *off != '\0' && std::string(off) != "0";
  const bool cpu = attention_kernels_available(AttentionKernels::avx512);
#if defined(__AVX512F__)
  const std::string expected = "avx512";
#else
  const std::string expected = cpu && !forced_off ? "avx512-generic" : "baseline";
#endif
  INFO("CPU has AVX-512: " << cpu << ", HEADLAB_NO_AVX512 set: " << forced_off);
  CHECK(std::string(attention_kernels_in_use()) == expected);
}
