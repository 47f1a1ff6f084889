#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <random>

#include "headlab/common/parallel.h"
#include "headlab/optim/clip.h"
#include "headlab/optim/optimizer.h"
#include "headlab/optim/schedule.h"

using namespace headlab;

namespace {

// One parameter of each kind, so decay exclusion is visible: "w" is a weight of two elements,
// "b", "ln" and "emb" are one-element bias / norm / embedding parameters.
std::vector<ParamSpec> one_of_each_kind() {
  return {{"w", {2}, Init::zeros, 0, ParamKind::weight},
          {"b", {1}, Init::zeros, 0, ParamKind::bias},
          {"ln", {1}, Init::zeros, 0, ParamKind::norm},
          {"emb", {1}, Init::zeros, 0, ParamKind::embedding}};
}

// w = {1, -2}, every other parameter = 1; gradients: w[0], b, ln, emb get g, w[1] gets 0.
template <typename T>
void set_values_and_grads(Parameters<T>& p, bool set_values, double g) {
  if (set_values) {
    p.value("w")(0) = 1;
    p.value("w")(1) = -2;
    for (const char* name : {"b", "ln", "emb"}) p.value(name)(0) = 1;
  }
  p.grad("w")(0) = static_cast<T>(g);
  p.grad("w")(1) = 0;
  for (const char* name : {"b", "ln", "emb"}) p.grad(name)(0) = static_cast<T>(g);
}

// Several tensors whose sizes are not multiples of the padding or of the clip block.
std::vector<ParamSpec> large_specs() {
  return {{"a/weight", {1000, 513}, Init::normal, 0.02, ParamKind::weight},
          {"a/bias", {77}, Init::zeros, 0, ParamKind::bias},
          {"ln/weight", {301}, Init::ones, 0, ParamKind::norm},
          {"emb/weight", {300, 301}, Init::normal, 0.02, ParamKind::embedding}};
}

void fill_random_grads(Parameters<float>& p, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> dist(-1.0, 1.0);
  for (int i = 0; i < p.size(); ++i) {
    Tensor<float> g = p.grad(i);
    for (int64_t j = 0; j < g.numel(); ++j) g.data()[j] = static_cast<float>(dist(rng));
  }
}

bool same_bits(const float* a, const float* b, int64_t n) {
  return std::memcmp(a, b, n * sizeof(float)) == 0;
}

// Restores the thread count a test changed.
struct ThreadCountGuard {
  int saved = num_threads();
  ~ThreadCountGuard() { set_num_threads(saved); }
};

}  // namespace

// ---------------------------------------------------------------------------------------------
// AdamW

TEST_CASE("adamw matches hand-computed values for three steps with decay exclusion", "[optim][adamw]") {
  // lr = 0.1, beta1 = 0.5, beta2 = 0.75, eps = 0.01, weight_decay = 0.1, p0 = 1, g = 0.5, 1, -0.5.
  // Step 1: p = 1 * (1 - 0.1*0.1) = 0.99;  m = 0.5*0.5 = 0.25;  v = 0.25*0.25 = 0.0625;
  //         step_size = 0.1 / (1 - 0.5) = 0.2;  denom = sqrt(0.0625)/sqrt(1 - 0.75) + 0.01 = 0.51;
  //         p = 0.99 - 0.2 * 0.25 / 0.51 = 0.891960784313725...  (without decay 1 - 0.05/0.51 = 0.901960...)
  // Step 2: m = 0.5*0.25 + 0.5*1 = 0.625;  v = 0.75*0.0625 + 0.25*1 = 0.296875;
  //         p = 0.99 p1 - (0.1/0.75) * 0.625 / (sqrt(0.296875)/sqrt(0.4375) + 0.01)
  // Step 3: m = 0.0625, v = 0.28515625, likewise with t = 3.
  // Steps 2-3 evaluated with Python's decimal module at 40 digits from these formulas.
  const double decayed[3] = {0.8919607843137254901960784313725490196078, 0.7830916874698337742037623733095528254783,
                             0.7652330730343882611675207712690856949079};
  const double not_decayed[3] = {0.9019607843137254901960784313725490196078, 0.8020112953129710291057231576232783156744,
                                 0.7919835977522238538115191793159067133588};
  const double grads[3] = {0.5, 1.0, -0.5};
  const bool decay_others = GENERATE(false, true);

  Parameters<double> p(one_of_each_kind());
  AdamW<double> opt(p, {.beta1 = 0.5,
                        .beta2 = 0.75,
                        .eps = 0.01,
                        .weight_decay = 0.1,
                        .decay_biases = decay_others,
                        .decay_norms = decay_others,
                        .decay_embeddings = decay_others});
  set_values_and_grads(p, true, grads[0]);
  CHECK(opt.decays(p.index("w")));
  CHECK(opt.decays(p.index("b")) == decay_others);
  for (int t = 0; t < 3; ++t) {
    set_values_and_grads(p, false, grads[t]);
    opt.step(0.1);
    CHECK(opt.step_count() == t + 1);
    const double other = decay_others ? decayed[t] : not_decayed[t];
    CHECK(p.value("w")(0) == Approx(decayed[t]).epsilon(0).margin(1e-14));
    // Zero gradient: m = v = 0, the Adam term is 0 / eps = 0, only the decay acts: -2 * 0.99^t.
    CHECK(p.value("w")(1) == Approx(-2 * std::pow(0.99, t + 1)).epsilon(0).margin(1e-14));
    for (const char* name : {"b", "ln", "emb"}) {
      INFO(name);
      CHECK(p.value(name)(0) == Approx(other).epsilon(0).margin(1e-14));
    }
  }
  // State after step 3: m = 0.0625, v = 0.28515625 (exact in binary).
  auto state = opt.state_tensors();
  REQUIRE(state.size() == 8);
  CHECK(state[0].first == "optim/m/w");
  CHECK(state[4].first == "optim/v/w");
  CHECK(state[7].first == "optim/v/emb");
  CHECK(state[0].second(0) == 0.0625);
  CHECK(state[4].second(0) == 0.28515625);
}

TEST_CASE("adamw with zero weight decay decays nothing", "[optim][adamw]") {
  Parameters<double> p(one_of_each_kind());
  AdamW<double> opt(p, {.weight_decay = 0});
  for (int i = 0; i < p.size(); ++i) CHECK_FALSE(opt.decays(i));
  set_values_and_grads(p, true, 0.0);
  opt.step(0.1);
  CHECK(p.value("w")(1) == -2);  // zero gradient and no decay: unchanged
}

TEST_CASE("adamw minimises a quadratic", "[optim][adamw]") {
  // f(p) = sum_i c_i (p_i - target_i)^2 / 2 with curvatures from 0.1 to 10; grad = c (p - target).
  Parameters<float> p({{"x", {8}, Init::zeros, 0, ParamKind::weight}});
  AdamW<float> opt(p, {.weight_decay = 0});
  const float target[8] = {1, -2, 3, 0.5f, -0.25f, 4, -3, 2};
  const float curvature[8] = {0.1f, 0.5f, 1, 2, 4, 8, 10, 3};
  ScheduleOptions schedule{.lr = 0.1, .warmup_steps = 10, .total_steps = 1000, .min_lr_ratio = 0.01};
  for (int64_t step = 0; step < schedule.total_steps; ++step) {
    for (int i = 0; i < 8; ++i) p.grads()[i] = curvature[i] * (p.values()[i] - target[i]);
    opt.step(learning_rate(schedule, step));
  }
  for (int i = 0; i < 8; ++i) CHECK(p.values()[i] == Approx(target[i]).margin(1e-3));
}

// ---------------------------------------------------------------------------------------------
// SGD

TEST_CASE("sgd with momentum and coupled weight decay matches hand-computed values", "[optim][sgd]") {
  // lr = 0.1, momentum = 0.9, weight_decay = 0.1 (PyTorch SGD: d = g + wd*p), p0 = 1, g = 0.5, 1, -0.5.
  // decayed:     d = 0.6,      buf = 0.6,                    p = 1 - 0.06          = 0.94
  //              d = 1.094,    buf = 0.54 + 1.094 = 1.634,   p = 0.94 - 0.1634     = 0.7766
  //              d = -0.42234, buf = 1.4706 - 0.42234 = 1.04826, p = 0.7766 - 0.104826 = 0.671774
  // not decayed: buf = 0.5, 1.45, 0.805;  p = 0.95, 0.805, 0.7245
  const double decayed[3] = {0.94, 0.7766, 0.671774}, not_decayed[3] = {0.95, 0.805, 0.7245};
  const double decayed_buf[3] = {0.6, 1.634, 1.04826};
  const double grads[3] = {0.5, 1.0, -0.5};
  Parameters<double> p(one_of_each_kind());
  Sgd<double> opt(p, {.momentum = 0.9, .weight_decay = 0.1});  // default: embeddings decay, biases/norms don't
  set_values_and_grads(p, true, grads[0]);
  auto state = opt.state_tensors();
  REQUIRE(state.size() == 4);
  CHECK(state[0].first == "optim/momentum/w");
  for (int t = 0; t < 3; ++t) {
    set_values_and_grads(p, false, grads[t]);
    opt.step(0.1);
    CHECK(p.value("w")(0) == Approx(decayed[t]).epsilon(0).margin(1e-14));
    CHECK(state[0].second(0) == Approx(decayed_buf[t]).epsilon(0).margin(1e-14));
    CHECK(p.value("emb")(0) == Approx(decayed[t]).epsilon(0).margin(1e-14));
    CHECK(p.value("b")(0) == Approx(not_decayed[t]).epsilon(0).margin(1e-14));
    CHECK(p.value("ln")(0) == Approx(not_decayed[t]).epsilon(0).margin(1e-14));
  }
  CHECK(p.grad("w")(0) == -0.5);  // the gradient slab is left alone
}

TEST_CASE("sgd without momentum is plain gradient descent and keeps no state", "[optim][sgd]") {
  Parameters<double> p(one_of_each_kind());
  Sgd<double> opt(p);
  CHECK(opt.state_tensors().empty());
  set_values_and_grads(p, true, 0.5);
  opt.step(0.1);
  opt.step(0.1);
  CHECK(p.value("w")(0) == Approx(0.9).epsilon(0).margin(1e-15));  // 1 - 2 * 0.1 * 0.5
  CHECK(p.value("w")(1) == -2);
}

// ---------------------------------------------------------------------------------------------
// Both optimizers: checkpoint state, determinism, allocation, option checks

TEST_CASE("optimizer state round-trips through its named tensors bit-exactly", "[optim]") {
  const bool adamw = GENERATE(true, false);
  auto make = [&](Parameters<float>& p) -> std::unique_ptr<Optimizer<float>> {
    if (adamw) return std::make_unique<AdamW<float>>(p, AdamWOptions{.weight_decay = 0.1});
    return std::make_unique<Sgd<float>>(p, SgdOptions{.momentum = 0.9, .weight_decay = 0.01});
  };
  Parameters<float> a(large_specs());
  a.init(7);
  auto opt_a = make(a);
  for (int s = 0; s < 3; ++s) {
    fill_random_grads(a, 100 + s);
    opt_a->step(1e-2);
  }
  // "Checkpoint": copy values and state out, build a fresh optimizer, copy them in.
  Parameters<float> b(large_specs()), fresh(large_specs());
  std::memcpy(b.values(), a.values(), a.slab_size() * sizeof(float));
  std::memcpy(fresh.values(), a.values(), a.slab_size() * sizeof(float));
  auto opt_b = make(b);
  auto opt_fresh = make(fresh);
  auto state_a = opt_a->state_tensors(), state_b = opt_b->state_tensors();
  REQUIRE(state_a.size() == state_b.size());
  REQUIRE(state_a.size() == (adamw ? 8u : 4u));
  for (size_t i = 0; i < state_a.size(); ++i) {
    REQUIRE(state_a[i].first == state_b[i].first);
    std::vector<float> saved(state_a[i].second.data(), state_a[i].second.data() + state_a[i].second.numel());
    state_b[i].second.copy_from(Tensor<float>(saved.data(), state_a[i].second.shape()));
  }
  opt_b->set_step_count(opt_a->step_count());
  CHECK(opt_b->step_count() == 3);

  for (Parameters<float>* p : {&a, &b, &fresh}) fill_random_grads(*p, 200);
  opt_a->step(1e-2);
  opt_b->step(1e-2);
  opt_fresh->step(1e-2);
  CHECK(same_bits(a.values(), b.values(), a.slab_size()));
  for (size_t i = 0; i < state_a.size(); ++i)
    CHECK(same_bits(state_a[i].second.data(), state_b[i].second.data(), state_a[i].second.numel()));
  CHECK_FALSE(same_bits(a.values(), fresh.values(), a.slab_size()));  // the state did matter
}

TEST_CASE("optimizer steps give the same bits for 1 and 2 threads and allocate nothing", "[optim]") {
  ThreadCountGuard guard;
  const bool adamw = GENERATE(true, false);
  Parameters<float> p1(large_specs()), p2(large_specs());
  p1.init(3);
  p2.init(3);
  std::unique_ptr<Optimizer<float>> o1, o2;
  if (adamw) {
    o1 = std::make_unique<AdamW<float>>(p1, AdamWOptions{.weight_decay = 0.1});
    o2 = std::make_unique<AdamW<float>>(p2, AdamWOptions{.weight_decay = 0.1});
  } else {
    o1 = std::make_unique<Sgd<float>>(p1, SgdOptions{.momentum = 0.9, .weight_decay = 0.1});
    o2 = std::make_unique<Sgd<float>>(p2, SgdOptions{.momentum = 0.9, .weight_decay = 0.1});
  }
  const int64_t allocations = tensor_system_allocations();
  for (int s = 0; s < 3; ++s) {
    fill_random_grads(p1, 10 + s);
    fill_random_grads(p2, 10 + s);
    set_num_threads(1);
    o1->step(1e-3);
    set_num_threads(2);
    o2->step(1e-3);
  }
  CHECK(tensor_system_allocations() == allocations);
  CHECK(same_bits(p1.values(), p2.values(), p1.slab_size()));
}

TEST_CASE("optimizers reject bad options with one-line errors", "[optim]") {
  Parameters<float> p(one_of_each_kind());
  REQUIRE_THROWS_WITH(AdamW<float>(p, {.beta1 = 1.0}), "adamw: beta1=1 must be in [0, 1)");
  REQUIRE_THROWS_WITH(AdamW<float>(p, {.beta2 = -0.1}), "adamw: beta2=-0.1 must be in [0, 1)");
  REQUIRE_THROWS_WITH(AdamW<float>(p, {.eps = -1}), "adamw: eps=-1 must be finite and >= 0");
  REQUIRE_THROWS_WITH(AdamW<float>(p, {.weight_decay = -0.1}), "adamw: weight_decay=-0.1 must be finite and >= 0");
  REQUIRE_THROWS_WITH(Sgd<float>(p, {.momentum = 1.5}), "sgd: momentum=1.5 must be in [0, 1)");
  REQUIRE_THROWS_WITH(Sgd<float>(p, {.weight_decay = -1}), "sgd: weight_decay=-1 must be finite and >= 0");
  AdamW<float> adamw(p);
  REQUIRE_THROWS_WITH(adamw.step(-1e-3), "adamw: lr=-0.001 must be finite and >= 0");
  REQUIRE_THROWS_WITH(adamw.set_step_count(-1), "optimizer: step_count=-1 must be >= 0");
  Sgd<float> sgd(p);
  REQUIRE_THROWS_WITH(sgd.step(std::nan("")), Catch::Contains("sgd: lr=nan must be finite"));
}

// ---------------------------------------------------------------------------------------------
// Schedule

TEST_CASE("learning rate warms up linearly from lr/warmup to lr", "[optim][schedule]") {
  const LrDecay decay = GENERATE(LrDecay::cosine, LrDecay::linear, LrDecay::constant);
  ScheduleOptions o{.lr = 1e-3, .warmup_steps = 10, .total_steps = 111, .decay = decay};
  CHECK(learning_rate(o, 0) == Approx(1e-4).epsilon(1e-15));  // lr * 1/10
  CHECK(learning_rate(o, 4) == Approx(5e-4).epsilon(1e-15));  // lr * 5/10
  CHECK(learning_rate(o, 9) == 1e-3);                         // lr * 10/10, exactly
  CHECK(learning_rate(o, 10) == 1e-3);                        // first decay step, progress 0
}

TEST_CASE("cosine and linear schedules reach min_lr exactly at the last step", "[optim][schedule]") {
  // lr = 1, warmup 10, total 111: the decay runs over steps 10..110 with progress (step-10)/100.
  ScheduleOptions o{.lr = 1.0, .warmup_steps = 10, .total_steps = 111, .decay = LrDecay::cosine, .min_lr_ratio = 0.1};
  // Mid-cosine, progress 0.5: cos(pi/2) = 0, so 0.1 + 0.9 * 0.5 = 0.55.
  CHECK(learning_rate(o, 60) == Approx(0.55).epsilon(1e-15));
  // Progress 0.25: 0.1 + 0.9 * (1 + cos(pi/4)) / 2 = 0.1 + 0.45 * 1.7071067811865475 = 0.8681980515339464.
  CHECK(learning_rate(o, 35) == Approx(0.8681980515339464).epsilon(1e-15));
  CHECK(learning_rate(o, 110) == 0.1);
  CHECK(learning_rate(o, 500) == 0.1);  // past the end: min_lr
  o.decay = LrDecay::linear;
  CHECK(learning_rate(o, 35) == Approx(0.775).epsilon(1e-15));  // 1 - 0.9 * 0.25
  CHECK(learning_rate(o, 60) == Approx(0.55).epsilon(1e-15));
  CHECK(learning_rate(o, 110) == 0.1);
  o.decay = LrDecay::constant;
  CHECK(learning_rate(o, 60) == 1.0);
  CHECK(learning_rate(o, 500) == 1.0);
}

TEST_CASE("schedule without warmup starts at lr and a single decay step keeps lr", "[optim][schedule]") {
  CHECK(learning_rate({.lr = 0.5, .warmup_steps = 0, .total_steps = 100}, 0) == 0.5);
  CHECK(learning_rate({.lr = 0.5, .warmup_steps = 0, .total_steps = 1}, 0) == 0.5);
  CHECK(learning_rate({.lr = 0.5, .warmup_steps = 9, .total_steps = 10}, 9) == 0.5);
}

TEST_CASE("schedule rejects bad options and parses decay names", "[optim][schedule]") {
  REQUIRE_THROWS_WITH(learning_rate({.lr = -1}, 0), "schedule: lr=-1 must be finite and >= 0");
  REQUIRE_THROWS_WITH(learning_rate({.total_steps = 0}, 0), "schedule: total_steps=0 must be >= 1");
  REQUIRE_THROWS_WITH(learning_rate({.warmup_steps = 5, .total_steps = 4}, 0),
                      "schedule: warmup_steps=5 must be in [0, total_steps=4]");
  REQUIRE_THROWS_WITH(learning_rate({.min_lr_ratio = 1.5}, 0), "schedule: min_lr_ratio=1.5 must be in [0, 1]");
  REQUIRE_THROWS_WITH(learning_rate({}, -1), "schedule: step=-1 must be >= 0");
  CHECK(parse_lr_decay("linear") == LrDecay::linear);
  CHECK(parse_lr_decay("cosine") == LrDecay::cosine);
  CHECK(parse_lr_decay("constant") == LrDecay::constant);
  REQUIRE_THROWS_WITH(parse_lr_decay("step"),
                      "schedule: unknown lr decay 'step' (expected cosine, linear or constant)");
}

// ---------------------------------------------------------------------------------------------
// Clipping

TEST_CASE("grad norm of a known vector is exact and clipping scales it to max_norm", "[optim][clip]") {
  // Gradients {3, 4} and {12}: norm sqrt(9 + 16 + 144) = 13.
  Parameters<double> p({{"w", {2}, Init::zeros, 0, ParamKind::weight}, {"b", {1}, Init::zeros, 0, ParamKind::bias}});
  p.grad("w")(0) = 3;
  p.grad("w")(1) = 4;
  p.grad("b")(0) = 12;
  CHECK(grad_norm(p) == 13);
  CHECK(clip_grad_norm(p, 20.0) == 13);  // below max_norm: untouched
  CHECK(p.grad("w")(0) == 3);
  CHECK(clip_grad_norm(p, 0.0) == 13);  // off
  CHECK(p.grad("b")(0) == 12);
  CHECK(clip_grad_norm(p, 6.5) == 13);
  const double scale = 6.5 / (13 + 1e-6);
  CHECK(p.grad("w")(0) == 3 * scale);
  CHECK(p.grad("w")(1) == 4 * scale);
  CHECK(p.grad("b")(0) == 12 * scale);
  CHECK(grad_norm(p) == Approx(6.5).epsilon(1e-6));
}

TEST_CASE("clip returns a non-finite norm and leaves the gradients untouched", "[optim][clip]") {
  Parameters<float> p({{"w", {3}, Init::zeros, 0, ParamKind::weight}});
  p.grad("w")(0) = 1;
  p.grad("w")(1) = std::numeric_limits<float>::infinity();
  CHECK(std::isinf(clip_grad_norm(p, 1.0)));
  CHECK(p.grad("w")(0) == 1);
  p.grad("w")(1) = std::numeric_limits<float>::quiet_NaN();
  CHECK(std::isnan(clip_grad_norm(p, 1.0)));
  CHECK(p.grad("w")(0) == 1);
  REQUIRE_THROWS_WITH(clip_grad_norm(p, std::nan("")), "clip_grad_norm: max_norm is NaN");
}

TEST_CASE("grad norm and clipping give the same bits for 1, 2 and 3 threads on a large slab", "[optim][clip]") {
  ThreadCountGuard guard;
  Parameters<float> p(large_specs());
  fill_random_grads(p, 42);
  // Reference in long double, serial: agrees to well within double rounding of the blocked sum.
  long double reference = 0;
  for (int64_t i = 0; i < p.slab_size(); ++i) reference += static_cast<long double>(p.grads()[i]) * p.grads()[i];
  set_num_threads(1);
  const double norm1 = grad_norm(p);
  CHECK(norm1 == Approx(static_cast<double>(std::sqrt(reference))).epsilon(1e-12));
  std::vector<float> clipped1;
  for (int threads : {1, 2, 3}) {
    INFO("threads = " << threads);
    set_num_threads(threads);
    CHECK(grad_norm(p) == norm1);  // same bits
    Parameters<float> q(large_specs());
    std::memcpy(q.grads(), p.grads(), p.slab_size() * sizeof(float));
    const int64_t allocations = tensor_system_allocations();
    CHECK(clip_grad_norm(q, 1.0) == norm1);
    CHECK(tensor_system_allocations() == allocations);
    if (clipped1.empty())
      clipped1.assign(q.grads(), q.grads() + q.slab_size());
    else
      CHECK(same_bits(clipped1.data(), q.grads(), q.slab_size()));
  }
}
