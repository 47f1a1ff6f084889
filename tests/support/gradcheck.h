// The one gradient checker: compares a graph's backward with central finite differences in
// double precision. The graph maps the inputs to any tensor y; the checker differentiates the
// scalar L = sum(w * y) for a fixed random w, so every output element's gradient path counts.
// A NaN or infinite gradient (analytic or numeric), and a check of no element at all, give an
// infinite max_rel_error: they fail every tolerance. tests/support/test_gradcheck.cpp checks that
// it fails broken backwards (NaN, wrong sign, missing term).
//   auto r = gradcheck([](Tape<double>& t, const std::vector<Var<double>>& in) {
//     return gelu(in[0]); }, {x});
//   REQUIRE(r.max_rel_error <= 1e-6);   // r.str() names the worst input and index
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "headlab/autograd/tape.h"

namespace headlab::test {

using GraphFn = std::function<Var<double>(Tape<double>&, const std::vector<Var<double>>&)>;

struct GradCheckResult {
  double max_rel_error = 0;
  int worst_input = -1;
  int64_t worst_index = -1;
  double analytic = 0, numeric = 0;
  int64_t checked = 0;
  std::string str() const;
};

struct GradCheckOptions {
  double step = 1e-5;           // central-difference step
  double floor = 1e-3;          // relative error = |a - n| / max(|a|, |n|, floor)
  int64_t max_per_input = 300;  // above this, a seeded random subset of elements is checked
  uint64_t seed = 1234;
  std::vector<bool> differentiable;  // per input; default all true
};

// Fills the arena's first `bytes` with NaN and resets it, so later allocations start on NaNs: a
// backward that reads a buffer nothing wrote (an unzeroed gradient, Tape::input_grad_target)
// turns its results into NaN. A fresh arena's memory would be zero pages and hide that.
void fill_arena_with_nan(Arena& arena, size_t bytes);

// Inputs are modified in place during the check and restored afterwards. The arena the backward
// runs in starts on NaNs (fill_arena_with_nan).
GradCheckResult gradcheck(const GraphFn& graph, const std::vector<Tensor<double>>& inputs,
                          const GradCheckOptions& options = {});

// The comparison underneath gradcheck(), for graphs that own their inputs (a whole model):
// perturbs values[i] for the chosen indices, calls loss() (which must not record a backward) and
// compares the central difference with analytic[i]. `input` labels the result.
void compare_with_central_differences(const std::function<double()>& loss, double* values, const double* analytic,
                                      const std::vector<int64_t>& indices, int input, const GradCheckOptions& options,
                                      GradCheckResult& result);

}  // namespace headlab::test
