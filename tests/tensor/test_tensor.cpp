#include <catch2/catch.hpp>

#include "headlab/tensor/arena.h"

using namespace headlab;

TEST_CASE("tensor views select a head's slice without copying", "[tensor]") {
  Arena arena;
  // x [B=2, T=3, H=4, Dh=5] holding its own flat index.
  Tensor<float> x = arena.empty<float>({2, 3, 4, 5});
  for (int64_t i = 0; i < x.numel(); ++i) x.data()[i] = static_cast<float>(i);
  Tensor<float> head = x.select(2, 1);  // [2, 3, 5]
  REQUIRE(head.shape() == Shape{2, 3, 5});
  CHECK(head.data() == x.data() + 5);
  CHECK(head.stride(1) == 20);  // token stride H*Dh
  CHECK(head(1, 2, 3) == x(1, 2, 1, 3));
  CHECK_FALSE(head.is_contiguous());
  Tensor<float> t = x.select(0, 1).select(1, 2).transpose(0, 1);  // [Dh, T] view of batch 1, head 2
  CHECK(t(4, 2) == x(1, 2, 2, 4));
  Tensor<float> n = x.narrow(3, 2, 2);
  CHECK(n.shape() == Shape{2, 3, 4, 2});
  CHECK(n(0, 0, 0, 1) == 3.0f);
}

TEST_CASE("tensor copy_from handles strided sources and checks shapes", "[tensor]") {
  Arena arena;
  Tensor<double> x = arena.empty<double>({3, 4});
  for (int64_t i = 0; i < 12; ++i) x.data()[i] = static_cast<double>(i);
  Tensor<double> xt = arena.empty<double>({4, 3});
  xt.copy_from(x.transpose(0, 1));
  CHECK(xt(3, 2) == 11.0);
  CHECK(xt(1, 0) == 1.0);
  CHECK(xt.data()[1] == 4.0);  // row 0 of x^T is column 0 of x: 0, 4, 8
  REQUIRE_THROWS_WITH(xt.copy_from(x), Catch::Contains("copy_from: shape [3, 4] into [4, 3]"));
  REQUIRE_THROWS_WITH(x.reshape({5, 2}), Catch::Contains("reshape: cannot view [3, 4] as [5, 2]"));
  REQUIRE_THROWS_WITH(x.transpose(0, 1).reshape({12}), Catch::Contains("not contiguous"));
}

TEST_CASE("tensor memory is 64-byte aligned", "[tensor][arena]") {
  Arena arena;
  for (int64_t n : {1, 3, 17, 1000}) {
    Tensor<float> t = arena.empty<float>({n});
    CHECK(reinterpret_cast<uintptr_t>(t.data()) % 64 == 0);
  }
  Buffer buffer(100);
  CHECK(reinterpret_cast<uintptr_t>(buffer.data()) % 64 == 0);
}

TEST_CASE("arena stops calling the system allocator once a step's peak is known", "[tensor][arena]") {
  Arena arena(1024);
  auto step = [&] {
    for (int i = 0; i < 50; ++i) arena.zeros<float>({1000 + i});
    arena.reset();
  };
  step();  // overflows the 1 KiB block: grows, then merges on reset
  const int64_t before = tensor_system_allocations();
  for (int i = 0; i < 5; ++i) step();
  CHECK(tensor_system_allocations() == before);
  CHECK(arena.bytes_in_use() == 0);
}
