// Counts every call to the global operator new in this process (the test binary replaces it),
// so a test can check that a warmed-up training step allocates nothing at all — tensors come
// from the arena, and containers keep their capacity.
//   const int64_t before = heap_allocations(); step(); CHECK(heap_allocations() == before);
#pragma once

#include <cstdint>

namespace headlab::test {

int64_t heap_allocations();

}  // namespace headlab::test
