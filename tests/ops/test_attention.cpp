#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

#include "headlab/common/parallel.h"
#include "headlab/ops/attention.h"
#include "headlab/ops/elementwise.h"
#include "support/compare.h"
#include "support/gradcheck.h"
#include "support/naive_attention.h"
#include "support/random.h"

using namespace headlab;
using headlab::test::check_same_bits;
using headlab::test::gradcheck;
using headlab::test::random_tensor;
using headlab::test::require_close;
using headlab::test::same_bits;
using headlab::test::to_vector;

namespace {

// A "long" sequence: T = 2 * 128 + 20 spans many of the kernels' 8-row blocks and several 32-key
// tiles, with ragged ends.
constexpr int64_t kLongT = 2 * 128 + 20;

enum class Gates { none, gated, pruned };  // pruned: gated, with gates[0] = 0 exactly
// mixed: item 0 right-padded, item 1 left-padded (its first causal rows see no real key);
// all_of_last: the last batch item is all padding (every row fully masked, causal or not).
enum class Padding { none, mixed, all_of_last };

struct Case {
  int64_t B, T, H, Hkv, Dh;
  bool causal;
  Gates gates;
  Padding padding;
  bool strided;      // q/k/v are narrow() views of one fused [B, T, H + 2 Hkv, Dh] tensor
  int64_t keys = 0;  // Tk: 0 = T (self-attention); else cross-attention or a cached decoding step
  int64_t tk() const { return keys > 0 ? keys : T; }
};

std::string describe(const Case& c) {
  std::ostringstream s;
  s << "B=" << c.B << " T=" << c.T << " Tk=" << c.tk() << " H=" << c.H << " Hkv=" << c.Hkv << " Dh=" << c.Dh
    << (c.causal ? " causal" : " bidirectional") << " gates=" << static_cast<int>(c.gates)
    << " padding=" << static_cast<int>(c.padding) << (c.strided ? " strided" : "");
  return s.str();
}

// [B, Tk]: the keys' padding.
std::vector<uint8_t> make_padding(const Case& c) {
  const int64_t Tk = c.tk();
  std::vector<uint8_t> pad(c.B * Tk, 1);
  for (int64_t b = 0; b < c.B; ++b)
    for (int64_t t = 0; t < Tk; ++t) {
      uint8_t& p = pad[b * Tk + t];
      if (c.padding == Padding::mixed) p = b % 2 == 0 ? t < Tk - Tk / 3 : t >= (Tk + 1) / 2;
      if (c.padding == Padding::all_of_last && b == c.B - 1) p = 0;
    }
  return pad;
}

AttentionOptions make_options(const Case& c, const std::vector<uint8_t>& pad) {
  AttentionOptions options;
  options.causal = c.causal;
  options.key_padding = c.padding == Padding::none ? nullptr : pad.data();
  return options;
}

template <typename T>
struct Inputs {
  Tensor<T> fused, q, k, v, gates;
};

template <typename T>
Inputs<T> make_inputs(Arena& arena, const Case& c, uint64_t seed) {
  Inputs<T> in;
  if (c.strided) {
    in.fused = random_tensor<T>(arena, {c.B, c.T, c.H + 2 * c.Hkv, c.Dh}, seed);
    in.q = in.fused.narrow(2, 0, c.H);
    in.k = in.fused.narrow(2, c.H, c.Hkv);
    in.v = in.fused.narrow(2, c.H + c.Hkv, c.Hkv);
  } else {
    in.q = random_tensor<T>(arena, {c.B, c.T, c.H, c.Dh}, seed);
    in.k = random_tensor<T>(arena, {c.B, c.tk(), c.Hkv, c.Dh}, seed + 1);
    in.v = random_tensor<T>(arena, {c.B, c.tk(), c.Hkv, c.Dh}, seed + 2);
  }
  if (c.gates != Gates::none) {
    in.gates = random_tensor<T>(arena, {c.H}, seed + 3, 0.25, 1.5);
    if (c.gates == Gates::pruned) in.gates.data()[0] = T(0);
  }
  return in;
}

template <typename T>
using Run = test::NaiveAttention<T>;  // out, probs, dq, dk, dv, dgates

// Forward and backward through the tape, with L = sum(dout * out) so out's gradient is dout.
template <typename T>
Run<T> run_tape(const Inputs<T>& in, const AttentionOptions& options, const Tensor<T>& dout) {
  Arena arena;
  Tape<T> tape(arena);
  Var<T> q = tape.leaf_with_grad(in.q), k = tape.leaf_with_grad(in.k), v = tape.leaf_with_grad(in.v);
  Var<T> gates = in.gates.empty() ? Var<T>{} : tape.leaf_with_grad(in.gates);
  Var<T> out = attention(q, k, v, options, gates);
  tape.backward(sum(mul(out, tape.constant(dout))));
  Run<T> r{to_vector(out.value()), to_vector(attention_probs(out)),
           to_vector(q.grad()),    to_vector(k.grad()),
           to_vector(v.grad()),    {}};
  if (gates.defined()) r.dgates = to_vector(gates.grad());
  return r;
}

// A test-only view op (the engine has no narrow on Vars yet): out = x.narrow(dim, start, length),
// no copy; the backward adds dout into that slice of dx. Rank-4 inputs only.
void narrow_view_backward(Tape<double>& tape, const Node<double>& node) {
  const Tensor<double> dx = tape.input_grad(node, 0);
  if (dx.empty()) return;
  const Tensor<double> slice = dx.narrow(static_cast<int>(node.ints[0]), node.ints[1], node.ints[2]);
  const Tensor<double>& g = node.grad;
  for (int64_t a = 0; a < g.size(0); ++a)
    for (int64_t b = 0; b < g.size(1); ++b)
      for (int64_t c = 0; c < g.size(2); ++c)
        for (int64_t d = 0; d < g.size(3); ++d) slice(a, b, c, d) += g(a, b, c, d);
}

Var<double> narrow_view(Var<double> x, int dim, int64_t start, int64_t length) {
  Node<double>& node = x.tape->record(x.value().narrow(dim, start, length), narrow_view_backward, {x});
  node.ints[0] = dim;
  node.ints[1] = start;
  node.ints[2] = length;
  return x.tape->last();
}

// Runs the tape op on case c (inputs from `seed`, upstream gradient from `dout_seed`) and requires
// the output, the probabilities and every gradient to match the naive loop reference: 1e-5 in
// float, 1e-12 in double.
template <typename T>
void require_matches_naive(const Case& c, uint64_t seed, uint64_t dout_seed) {
  const double tol = std::is_same_v<T, float> ? 1e-5 : 1e-12;
  INFO(describe(c));
  Arena arena;
  const Inputs<T> in = make_inputs<T>(arena, c, seed);
  const Tensor<T> dout = random_tensor<T>(arena, {c.B, c.T, c.H, c.Dh}, dout_seed);
  const std::vector<uint8_t> pad = make_padding(c);
  const AttentionOptions options = make_options(c, pad);
  const Run<T> got = run_tape(in, options, dout);
  const auto want = test::naive_attention(in.q, in.k, in.v, in.gates, c.causal, options.key_padding, dout);
  require_close("out", got.out, want.out, tol);
  require_close("probs", got.probs, want.probs, tol);
  require_close("dq", got.dq, want.dq, tol);
  require_close("dk", got.dk, want.dk, tol);
  require_close("dv", got.dv, want.dv, tol);
  if (c.gates != Gates::none) require_close("dgates", got.dgates, want.dgates, tol);
}

}  // namespace

TEST_CASE("attention forward gives the hand-computed answer on a two-token case", "[ops][attention]") {
  // Dh = 4, so scores are q.k / 2. Both queries are (2,0,0,0); k0 = 0, k1 = (ln 3,0,0,0), so a
  // query that sees both keys scores (0, ln 3), softmax (1/4, 3/4), and outputs
  // v0/4 + 3 v1/4 = (4,0,1,0)/4 + 3 (8,4,1,2)/4 = (7, 3, 1, 1.5). Causal row 0 sees only k0: v0.
  Arena arena;
  Tape<double> tape(arena);
  const double ln3 = std::log(3.0);
  double q[] = {2, 0, 0, 0, 2, 0, 0, 0}, k[] = {0, 0, 0, 0, ln3, 0, 0, 0}, v[] = {4, 0, 1, 0, 8, 4, 1, 2};
  double half[] = {0.5};
  Var<double> qv = tape.constant(Tensor<double>(q, {1, 2, 1, 4}));
  Var<double> kv = tape.constant(Tensor<double>(k, {1, 2, 1, 4}));
  Var<double> vv = tape.constant(Tensor<double>(v, {1, 2, 1, 4}));
  auto require_row = [](const Tensor<double>& out, int64_t t, std::vector<double> want) {
    for (int64_t i = 0; i < 4; ++i) CHECK(out(0, t, 0, i) == Approx(want[i]).margin(1e-12));
  };
  AttentionOptions causal;
  causal.keep_probs = true;
  Var<double> c = attention(qv, kv, vv, causal);
  require_row(c.value(), 0, {4, 0, 1, 0});
  require_row(c.value(), 1, {7, 3, 1, 1.5});
  const Tensor<double> a = attention_probs(c);
  CHECK(a(0, 0, 0, 0) == 1);
  CHECK(a(0, 0, 0, 1) == 0);
  CHECK(a(0, 0, 1, 0) == Approx(0.25).margin(1e-12));
  CHECK(a(0, 0, 1, 1) == Approx(0.75).margin(1e-12));

  AttentionOptions bidirectional;
  bidirectional.causal = false;
  Var<double> bi = attention(qv, kv, vv, bidirectional, tape.constant(Tensor<double>(half, {1})));
  require_row(bi.value(), 0, {3.5, 1.5, 0.5, 0.75});  // gate 1/2 halves (7, 3, 1, 1.5)
  require_row(bi.value(), 1, {3.5, 1.5, 0.5, 0.75});

  const uint8_t pad[] = {1, 0};  // key 1 is padding: both rows see only v0
  bidirectional.key_padding = pad;
  Var<double> padded = attention(qv, kv, vv, bidirectional);
  require_row(padded.value(), 0, {4, 0, 1, 0});
  require_row(padded.value(), 1, {4, 0, 1, 0});
}

TEMPLATE_TEST_CASE("attention forward and backward match the naive loop reference", "[ops][attention]", float, double) {
  // T = 70: one causal block, ragged against the vector width.
  Case c{2,
         70,
         4,
         GENERATE(as<int64_t>{}, 4, 2, 1),
         8,
         GENERATE(true, false),
         GENERATE(Gates::none, Gates::pruned),
         GENERATE(Padding::none, Padding::mixed, Padding::all_of_last),
         GENERATE(false, true)};
  require_matches_naive<TestType>(c, 11, 17);
}

TEMPLATE_TEST_CASE("attention matches the naive loop reference across several causal row blocks", "[ops][attention]",
                   float, double) {
  // Two full blocks and a partial one; few heads, as the naive softmax Jacobian is O(T^3).
  Case c{2,   kLongT, 2, GENERATE(as<int64_t>{}, 2, 1), 4, true, Gates::pruned, GENERATE(Padding::none, Padding::mixed),
         true};
  require_matches_naive<TestType>(c, 13, 19);
}

TEMPLATE_TEST_CASE("attention with more keys than queries matches the naive loop reference", "[ops][attention]", float,
                   double) {
  // Cross-attention (bidirectional, source length != target length, padded sources) and cached
  // decoding steps (causal: the queries are the last of the keys), across blocks and key tiles.
  // {B, T, H, Hkv, Dh, causal, gates, padding, strided, keys}
  const Case c = GENERATE(values<Case>({
      {2, 5, 4, 2, 8, false, Gates::pruned, Padding::mixed, false, 9},         // short target, longer source
      {2, 70, 4, 4, 8, false, Gates::gated, Padding::mixed, false, 37},        // longer target than source
      {2, 23, 2, 1, 16, false, Gates::none, Padding::all_of_last, false, 77},  // MQA, a fully padded source
      {2, 1, 4, 2, 8, true, Gates::gated, Padding::none, false, kLongT},       // one decoding step, many keys
      {2, 3, 4, 4, 8, true, Gates::pruned, Padding::mixed, false, 40},         // a few cached steps, padded
      {2, 20, 2, 1, 4, true, Gates::gated, Padding::mixed, false, 20 + 33},    // two blocks of queries at the end
  }));
  require_matches_naive<TestType>(c, 61, 67);
}

TEST_CASE("attention with different query and key lengths matches central differences", "[ops][attention][grad]") {
  // {B, T, H, Hkv, Dh, causal, gates, padding, strided, keys}
  const Case c = GENERATE(values<Case>({
      {2, 3, 2, 1, 3, false, Gates::gated, Padding::mixed, false, 5},  // cross, MQA, padded source
      {2, 5, 4, 2, 2, false, Gates::pruned, Padding::none, false, 2},  // fewer keys than queries
      {2, 2, 2, 2, 3, true, Gates::gated, Padding::mixed, false, 6},   // cached causal steps
      {1, 1, 2, 1, 2, true, Gates::pruned, Padding::none, false, 4},   // one step
  }));
  INFO(describe(c));
  Arena arena;
  const Inputs<double> in = make_inputs<double>(arena, c, 9);
  const std::vector<uint8_t> pad = make_padding(c);
  const AttentionOptions options = make_options(c, pad);
  auto r = gradcheck(
      [&](Tape<double>&, const std::vector<Var<double>>& x) { return attention(x[0], x[1], x[2], options, x[3]); },
      {in.q, in.k, in.v, in.gates});
  INFO(r.str());
  REQUIRE(r.max_rel_error <= 1e-6);
}

TEST_CASE("a causal step over the last queries equals those rows of full causal attention, bit for bit",
          "[ops][attention]") {
  // What a KV cache relies on: queries [T - n, T) against all T keys give the same output and
  // probabilities as rows T - n .. T-1 of the full causal attention, bit for bit for n > 1 (the
  // same blocks); one query without grad reads K and V unpacked (forward_one_query), summed in
  // another order: the same to float rounding.
  const Case full{2, kLongT, 4, 2, 16, true, Gates::pruned, Padding::mixed, false};
  Arena arena;
  const Inputs<float> in = make_inputs<float>(arena, full, 71);
  const std::vector<uint8_t> pad = make_padding(full);
  AttentionOptions options = make_options(full, pad);
  options.keep_probs = true;
  Tape<float> tape(arena);
  tape.set_grad_enabled(false);
  Var<float> all =
      attention(tape.constant(in.q), tape.constant(in.k), tape.constant(in.v), options, tape.constant(in.gates));
  const Tensor<float> all_probs = attention_probs(all);
  auto same = [](float a, float b) { return std::memcmp(&a, &b, sizeof a) == 0; };
  for (int64_t n : {int64_t{1}, int64_t{7}, int64_t{9}, int64_t{40}}) {
    INFO("last " << n << " queries");
    const int64_t t0 = kLongT - n;
    Var<float> step = attention(tape.constant(in.q.narrow(1, t0, n)), tape.constant(in.k), tape.constant(in.v), options,
                                tape.constant(in.gates));
    const Tensor<float> step_probs = attention_probs(step);
    for (int64_t b = 0; b < full.B; ++b)
      for (int64_t i = 0; i < n; ++i)
        for (int64_t h = 0; h < full.H; ++h) {
          if (n == 1) {
            for (int64_t d = 0; d < full.Dh; ++d)
              REQUIRE(step.value()(b, i, h, d) == Approx(all.value()(b, t0 + i, h, d)).epsilon(1e-5).margin(1e-6));
            for (int64_t s = 0; s < kLongT; ++s)
              REQUIRE(step_probs(b, h, i, s) == Approx(all_probs(b, h, t0 + i, s)).epsilon(1e-5).margin(1e-7));
            continue;
          }
          for (int64_t d = 0; d < full.Dh; ++d) REQUIRE(same(step.value()(b, i, h, d), all.value()(b, t0 + i, h, d)));
          for (int64_t s = 0; s < kLongT; ++s) REQUIRE(same(step_probs(b, h, i, s), all_probs(b, h, t0 + i, s)));
        }
  }
}

TEMPLATE_TEST_CASE("one query without grad (a decoding step) matches the naive loop reference", "[ops][attention]",
                   float, double) {
  // forward_one_query: causal or not, GQA/MQA, padding (a fully padded item too), a pruned head,
  // and keys/values whose d_head is strided (views of [B, Dh, Hkv, Tk] buffers).
  const double tol = std::is_same_v<TestType, float> ? 1e-5 : 1e-12;
  // {B, T, H, Hkv, Dh, causal, gates, padding, strided, keys}
  const Case c = GENERATE(values<Case>({
      {2, 1, 4, 2, 8, true, Gates::pruned, Padding::mixed, false, kLongT},
      {3, 1, 4, 1, 16, false, Gates::gated, Padding::all_of_last, false, 37},
      {2, 1, 2, 2, 5, true, Gates::none, Padding::none, false, 1},
  }));
  const bool strided_keys = GENERATE(false, true);
  INFO(describe(c) << (strided_keys ? " strided d_head" : ""));
  Arena arena;
  Inputs<TestType> in = make_inputs<TestType>(arena, c, 83);
  if (strided_keys) {
    const Tensor<TestType> kt = random_tensor<TestType>(arena, {c.B, c.Dh, c.Hkv, c.tk()}, 89);
    const Tensor<TestType> vt = random_tensor<TestType>(arena, {c.B, c.Dh, c.Hkv, c.tk()}, 97);
    in.k = kt.transpose(1, 3);
    in.v = vt.transpose(1, 3);
  }
  const std::vector<uint8_t> pad = make_padding(c);
  AttentionOptions options = make_options(c, pad);
  options.keep_probs = true;
  Tape<TestType> tape(arena);
  NoGradGuard<TestType> no_grad(tape);
  const Var<TestType> gates = in.gates.empty() ? Var<TestType>{} : tape.constant(in.gates);
  const Var<TestType> out = attention(tape.constant(in.q), tape.constant(in.k), tape.constant(in.v), options, gates);
  const auto want = test::naive_attention(in.q, in.k, in.v, in.gates, c.causal, options.key_padding);
  require_close("out", to_vector(out.value()), want.out, tol);
  require_close("probs", to_vector(attention_probs(out)), want.probs, tol);
}

TEST_CASE("causal attention with fewer keys than queries is one error line", "[ops][attention]") {
  Arena arena;
  Tape<float> tape(arena);
  Var<float> q = tape.constant(random_tensor<float>(arena, {1, 4, 2, 8}, 1));
  Var<float> kv = tape.constant(random_tensor<float>(arena, {1, 3, 2, 8}, 2));
  REQUIRE_THROWS_WITH(attention(q, kv, kv, {.causal = true}),
                      "attention: causal attention needs at least as many keys (3) as queries (4)");
  REQUIRE_NOTHROW(attention(q, kv, kv, {.causal = false}));
}

TEST_CASE("attention backward matches central differences", "[ops][attention][grad]") {
  // {B, T, H, Hkv, Dh, causal, gates, padding, strided}
  const Case c = GENERATE(values<Case>({
      {2, 4, 1, 1, 3, true, Gates::none, Padding::none, false},           // H = 1
      {2, 4, 1, 1, 3, false, Gates::gated, Padding::none, false},         // H = 1, bidirectional
      {2, 4, 4, 4, 1, true, Gates::none, Padding::none, false},           // H = C (Dh = 1)
      {2, 4, 4, 4, 1, false, Gates::pruned, Padding::none, false},        // H = C, pruned head
      {2, 5, 4, 2, 2, true, Gates::gated, Padding::none, false},          // GQA
      {2, 5, 4, 2, 2, false, Gates::pruned, Padding::mixed, false},       // GQA, pruned, padded
      {2, 5, 4, 1, 2, true, Gates::pruned, Padding::mixed, false},        // MQA, fully masked rows
      {2, 5, 4, 1, 2, false, Gates::gated, Padding::all_of_last, false},  // MQA, masked item
      {2, 5, 2, 2, 3, true, Gates::gated, Padding::all_of_last, false},   // masked item, causal
      {2, 1, 2, 1, 3, true, Gates::gated, Padding::none, false},          // T = 1
      {2, 1, 2, 1, 3, false, Gates::none, Padding::mixed, false},         // T = 1, item 1 masked
  }));
  INFO(describe(c));
  Arena arena;
  const Inputs<double> in = make_inputs<double>(arena, c, 5);
  const std::vector<uint8_t> pad = make_padding(c);
  const AttentionOptions options = make_options(c, pad);
  const bool gated = c.gates != Gates::none;
  std::vector<Tensor<double>> inputs = {in.q, in.k, in.v};
  if (gated) inputs.push_back(in.gates);
  auto r = gradcheck(
      [&](Tape<double>&, const std::vector<Var<double>>& x) {
        return attention(x[0], x[1], x[2], options, gated ? x[3] : Var<double>{});
      },
      inputs);
  INFO(r.str());
  REQUIRE(r.max_rel_error <= 1e-6);
}

TEST_CASE("attention backward matches central differences on strided slices of a fused qkv tensor",
          "[ops][attention][grad]") {
  // q, k and v are narrow() views of one [B, T, H + 2 Hkv, Dh] tensor: token stride (H+2Hkv) Dh.
  const Case c{2,   5, 4, GENERATE(as<int64_t>{}, 4, 2, 1), 2, GENERATE(true, false), Gates::pruned, Padding::mixed,
               true};
  INFO(describe(c));
  Arena arena;
  const Inputs<double> in = make_inputs<double>(arena, c, 7);
  const std::vector<uint8_t> pad = make_padding(c);
  const AttentionOptions options = make_options(c, pad);
  auto r = gradcheck(
      [&](Tape<double>&, const std::vector<Var<double>>& x) {
        return attention(narrow_view(x[0], 2, 0, c.H), narrow_view(x[0], 2, c.H, c.Hkv),
                         narrow_view(x[0], 2, c.H + c.Hkv, c.Hkv), options, x[1]);
      },
      {in.fused, in.gates});
  INFO(r.str());
  REQUIRE(r.max_rel_error <= 1e-6);
}

TEST_CASE("a fully masked query row gets zero output and zero gradient, never NaN", "[ops][attention]") {
  // Causal with key 0 padded: query 0 sees no key at all.
  const Case c{1, 3, 2, 1, 2, true, Gates::gated, Padding::none, false};
  Arena arena;
  const Inputs<double> in = make_inputs<double>(arena, c, 3);
  const uint8_t pad[] = {0, 1, 1};
  AttentionOptions options;
  options.key_padding = pad;
  const Run<double> r = run_tape(in, options, random_tensor<double>(arena, {1, 3, 2, 2}, 4));
  for (int64_t h = 0; h < 2; ++h)
    for (int64_t i = 0; i < 2; ++i) {
      CHECK(r.out[h * 2 + i] == 0);  // row t = 0 of out [1, 3, 2, 2]
      CHECK(r.dq[h * 2 + i] == 0);
    }
  for (int64_t s = 0; s < 3; ++s) CHECK(r.probs[s] == 0);  // head 0, query 0
  for (double x : r.dk) CHECK(std::isfinite(x));
  for (double x : r.dgates) CHECK(std::isfinite(x));
}

TEST_CASE("attention is bit-identical when run twice and on 1 or 2 threads", "[ops][attention]") {
  const Case c{3, 40, 4, 2, 8, GENERATE(true, false), Gates::pruned, Padding::mixed, true};
  INFO(describe(c));
  Arena arena;
  const Inputs<float> in = make_inputs<float>(arena, c, 21);
  const Tensor<float> dout = random_tensor<float>(arena, {c.B, c.T, c.H, c.Dh}, 22);
  const std::vector<uint8_t> pad = make_padding(c);
  const AttentionOptions options = make_options(c, pad);
  const int previous = num_threads();
  set_num_threads(2);
  const Run<float> first = run_tape(in, options, dout), second = run_tape(in, options, dout);
  set_num_threads(1);
  const Run<float> serial = run_tape(in, options, dout);
  set_num_threads(previous);
  check_same_bits(first, second);
  check_same_bits(first, serial);
}

TEST_CASE("attention allocates no tensor memory after a warm-up step", "[ops][attention]") {
  const Case c{2, 40, 4, 2, 8, true, Gates::gated, Padding::none, false};
  Arena inputs_arena;
  const Inputs<float> in = make_inputs<float>(inputs_arena, c, 31);
  Arena arena;
  Tape<float> tape(arena);
  auto step = [&] {
    Var<float> out = attention(tape.leaf_with_grad(in.q), tape.leaf_with_grad(in.k), tape.leaf_with_grad(in.v),
                               AttentionOptions{}, tape.leaf_with_grad(in.gates));
    tape.backward(sum(out));
    tape.reset();
  };
  step();
  const int64_t before = tensor_system_allocations();
  step();
  step();
  CHECK(tensor_system_allocations() == before);
}

TEST_CASE("attention keeps probabilities without grad only when asked", "[ops][attention]") {
  const Case c{1, 6, 2, 1, 4, true, Gates::none, Padding::none, false};
  Arena arena;
  const Inputs<double> in = make_inputs<double>(arena, c, 41);
  Tape<double> tape(arena);
  Var<double> q = tape.constant(in.q), k = tape.constant(in.k), v = tape.constant(in.v);
  {
    NoGradGuard<double> no_grad(tape);
    Var<double> dropped = attention(q, k, v);
    REQUIRE_THROWS_WITH(attention_probs(dropped), Catch::Contains("attention_probs: probabilities were not kept"));
    AttentionOptions keep;
    keep.keep_probs = true;
    const Tensor<double> a = attention_probs(attention(q, k, v, keep));
    REQUIRE(a.shape() == Shape{1, 2, 6, 6});
    for (int64_t h = 0; h < 2; ++h)
      for (int64_t t = 0; t < 6; ++t) {
        double row = 0;
        for (int64_t s = 0; s < 6; ++s) row += a(0, h, t, s);
        CHECK(row == Approx(1.0).margin(1e-12));
        for (int64_t s = t + 1; s < 6; ++s) CHECK(a(0, h, t, s) == 0);  // causal: future keys 0
      }
  }
  REQUIRE_THROWS_WITH(attention_probs(q), Catch::Contains("is not an attention output"));
}

TEST_CASE("attention rejects bad shapes with one-line messages", "[ops][attention]") {
  Arena arena;
  Tape<double> tape(arena);
  auto var = [&](Shape s) { return tape.constant(random_tensor<double>(arena, s, 1)); };
  REQUIRE_THROWS_WITH(attention(var({1, 2, 8, 4}), var({1, 2, 3, 4}), var({1, 2, 3, 4})),
                      "attention: n_kv_heads=3 does not divide n_heads=8");
  REQUIRE_THROWS_WITH(attention(var({1, 2, 8, 4}), var({1, 2, 2, 4}), var({1, 2, 2, 3})),
                      "attention: v [1, 2, 2, 3] differs from k [1, 2, 2, 4]");
  REQUIRE_THROWS_WITH(attention(var({2, 3, 8, 4}), var({1, 3, 2, 4}), var({1, 3, 2, 4})),
                      "attention: k [1, 3, 2, 4] does not match q [2, 3, 8, 4] in batch or d_head");
  REQUIRE_THROWS_WITH(attention(var({1, 3, 8, 4}), var({1, 3, 2, 5}), var({1, 3, 2, 5})),
                      "attention: k [1, 3, 2, 5] does not match q [1, 3, 8, 4] in batch or d_head");
  REQUIRE_THROWS_WITH(attention(var({2, 32}), var({1, 2, 2, 4}), var({1, 2, 2, 4})),
                      "attention: q [2, 32] must be [B, Tq, n_heads, d_head]");
  REQUIRE_THROWS_WITH(attention(var({1, 2, 8, 4}), var({1, 2, 2, 4}), var({1, 2, 2, 4}), {}, var({5})),
                      "attention: gates [5] must be [n_heads]=[8]");
}

TEMPLATE_TEST_CASE("attention matches the naive loop reference at the fused kernel's vector widths", "[ops][attention]",
                   float, double) {
  // d_head 16..128 fill whole 512-bit vectors (48: a 32-lane tile plus a 16-lane one); T = 45
  // leaves a partial 8-row block and a partial key tile.
  Case c{2,
         45,
         4,
         GENERATE(as<int64_t>{}, 4, 2, 1),
         GENERATE(as<int64_t>{}, 16, 32, 48, 64, 128),
         GENERATE(true, false),
         Gates::pruned,
         GENERATE(Padding::none, Padding::mixed, Padding::all_of_last),
         true};
  require_matches_naive<TestType>(c, 51, 53);
}

TEST_CASE("attention with d_head 16 and 32 is bit-identical on 1 or 2 threads", "[ops][attention]") {
  // The same property as above on the widths the bench runs (full vectors, many 8-row blocks).
  const Case c{3,
               100,
               4,
               GENERATE(as<int64_t>{}, 4, 1),
               GENERATE(as<int64_t>{}, 16, 32),
               GENERATE(true, false),
               Gates::gated,
               Padding::mixed,
               true};
  INFO(describe(c));
  Arena arena;
  const Inputs<float> in = make_inputs<float>(arena, c, 61);
  const Tensor<float> dout = random_tensor<float>(arena, {c.B, c.T, c.H, c.Dh}, 62);
  const std::vector<uint8_t> pad = make_padding(c);
  const AttentionOptions options = make_options(c, pad);
  const int previous = num_threads();
  set_num_threads(2);
  const Run<float> first = run_tape(in, options, dout);
  set_num_threads(1);
  const Run<float> serial = run_tape(in, options, dout);
  set_num_threads(previous);
  check_same_bits(first, serial);
}

TEMPLATE_TEST_CASE("a backward that recomputes A from the row stats equals one that reads the saved A, bit for bit",
                   "[ops][attention]", float, double) {
  // The tape saves only (row max, 1/sum) and recomputes A; the kernels can also keep A and read
  // it back. Both must give the same bits: the recomputation repeats the forward's arithmetic.
  const Case c{2, 77, 4, 2, GENERATE(as<int64_t>{}, 8, 32), GENERATE(true, false), Gates::pruned, Padding::mixed, true};
  INFO(describe(c));
  Arena arena;
  const Inputs<TestType> in = make_inputs<TestType>(arena, c, 71);
  const Tensor<TestType> dout = random_tensor<TestType>(arena, {c.B, c.T, c.H, c.Dh}, 72);
  const std::vector<uint8_t> pad = make_padding(c);
  const AttentionOptions options = make_options(c, pad);
  const Tensor<TestType> workspace = arena.empty<TestType>({num_threads(), attention_workspace_size(c.T, c.T, c.Dh)});
  const Tensor<TestType> probs = arena.empty<TestType>({c.B, c.H, c.T, c.T});
  const Tensor<TestType> stats = arena.empty<TestType>({c.B, c.H, c.T, 2});
  const Tensor<TestType> partials = arena.empty<TestType>({c.B, c.H});
  Tensor<TestType> out[2], dq[2], dk[2], dv[2], dgates[2];
  for (int kept = 0; kept < 2; ++kept) {
    out[kept] = arena.empty<TestType>({c.B, c.T, c.H, c.Dh});
    dq[kept] = arena.zeros<TestType>({c.B, c.T, c.H, c.Dh});
    dk[kept] = arena.zeros<TestType>({c.B, c.T, c.Hkv, c.Dh});
    dv[kept] = arena.zeros<TestType>({c.B, c.T, c.Hkv, c.Dh});
    dgates[kept] = arena.zeros<TestType>({c.H});
    const AttentionInputs<TestType> inputs{.q = in.q, .k = in.k, .v = in.v, .gates = in.gates};
    attention_forward(out[kept], {.probs = probs, .stats = stats}, inputs, options, {.workspace = workspace});
    attention_backward({.dq = dq[kept], .dk = dk[kept], .dv = dv[kept], .dgates = dgates[kept]}, dout, inputs,
                       {.probs = kept ? probs : Tensor<TestType>(), .stats = stats}, options,
                       {.workspace = workspace, .gate_partials = partials});
  }
  CHECK(same_bits(to_vector(out[0]), to_vector(out[1])));
  CHECK(same_bits(to_vector(dq[0]), to_vector(dq[1])));
  CHECK(same_bits(to_vector(dk[0]), to_vector(dk[1])));
  CHECK(same_bits(to_vector(dv[0]), to_vector(dv[1])));
  CHECK(same_bits(to_vector(dgates[0]), to_vector(dgates[1])));
}

TEST_CASE("attention probabilities recomputed for attention_probs equal the kept ones, bit for bit",
          "[ops][attention]") {
  const Case c{2, 50, 4, 2, 16, true, Gates::gated, Padding::mixed, true};
  Arena arena;
  const Inputs<float> in = make_inputs<float>(arena, c, 81);
  const Tensor<float> dout = random_tensor<float>(arena, {c.B, c.T, c.H, c.Dh}, 82);
  const std::vector<uint8_t> pad = make_padding(c);
  AttentionOptions options = make_options(c, pad);
  const Run<float> recomputed = run_tape(in, options, dout);
  options.keep_probs = true;
  const Run<float> kept = run_tape(in, options, dout);
  CHECK(same_bits(recomputed.probs, kept.probs));
  CHECK(same_bits(recomputed.out, kept.out));
  CHECK(same_bits(recomputed.dq, kept.dq));
}

TEST_CASE("the kernel API with A kept matches the tape", "[ops][attention]") {
  const Case c{2, 40, 4, 2, 16, true, Gates::gated, Padding::mixed, true};
  Arena arena;
  const Inputs<double> in = make_inputs<double>(arena, c, 91);
  const Tensor<double> dout = random_tensor<double>(arena, {c.B, c.T, c.H, c.Dh}, 92);
  const std::vector<uint8_t> pad = make_padding(c);
  const AttentionOptions options = make_options(c, pad);
  const Run<double> tape = run_tape(in, options, dout);
  const Tensor<double> out = arena.empty<double>({c.B, c.T, c.H, c.Dh}),
                       probs = arena.empty<double>({c.B, c.H, c.T, c.T});
  const Tensor<double> dq = arena.zeros<double>({c.B, c.T, c.H, c.Dh}),
                       dk = arena.zeros<double>({c.B, c.T, c.Hkv, c.Dh}),
                       dv = arena.zeros<double>({c.B, c.T, c.Hkv, c.Dh}), dgates = arena.zeros<double>({c.H});
  const Tensor<double> workspace = arena.empty<double>({num_threads(), attention_workspace_size(c.T, c.T, c.Dh)});
  const AttentionInputs<double> inputs{.q = in.q, .k = in.k, .v = in.v, .gates = in.gates};
  attention_forward(out, {.probs = probs}, inputs, options, {.workspace = workspace});
  attention_backward({.dq = dq, .dk = dk, .dv = dv, .dgates = dgates}, dout, inputs, {.probs = probs}, options,
                     {.workspace = workspace, .gate_partials = arena.empty<double>({c.B, c.H})});
  check_same_bits({to_vector(out), to_vector(probs), to_vector(dq), to_vector(dk), to_vector(dv), to_vector(dgates)},
                  tape);
}
