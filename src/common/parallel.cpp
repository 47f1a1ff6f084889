#include "headlab/common/parallel.h"

#include <omp.h>

#include "headlab/common/error.h"

namespace headlab {

int num_threads() {
  return omp_get_max_threads();
}

void set_num_threads(int n) {
  HEADLAB_CHECK(n >= 1, "set_num_threads: n=" << n << " must be at least 1");
  omp_set_num_threads(n);
}

bool in_parallel_region() {
  return omp_in_parallel() != 0;
}

}  // namespace headlab
