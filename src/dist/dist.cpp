#include "headlab/dist/dist.h"

#include <algorithm>
#include <climits>
#include <cstdlib>

#include <unistd.h>

#if HEADLAB_MPI
// The C API only: the deprecated C++ bindings would need libmpi_cxx.
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>
#endif

namespace headlab::dist {

namespace {

int g_rank = 0, g_size = 1, g_local_size = 1;

#if HEADLAB_MPI
bool g_initialized = false;
MPI_Comm g_comm = MPI_COMM_NULL;          // a duplicate of MPI_COMM_WORLD: headlab's messages only
MPI_Comm g_failure_comm = MPI_COMM_NULL;  // only all_ranks_failed: never matched with g_comm's calls
constexpr int kSumTag = 101;

int mpi_count(int64_t n) {
  HEADLAB_CHECK(n <= INT_MAX, "MPI message of " << n << " elements is too large");
  return static_cast<int>(n);
}

std::vector<float>& scratch(int64_t n) {
  static std::vector<float> buffer;  // kept: a training step reuses it every step
  if (static_cast<int64_t>(buffer.size()) < n) buffer.resize(static_cast<size_t>(n));
  return buffer;
}

std::string broadcast_from(int root, std::string text) {
  int64_t length = static_cast<int64_t>(text.size());
  MPI_Bcast(&length, 1, MPI_INT64_T, root, g_comm);
  text.resize(static_cast<size_t>(length));
  MPI_Bcast(text.data(), mpi_count(length), MPI_CHAR, root, g_comm);
  return text;
}

// P a power of two: reduce-scatter by recursive halving (partners at distance 1, 2, 4, ...: the
// canonical tree's levels in order), then all-gather by recursive doubling.
void sum_recursive_halving(float* data, int64_t n) {
  struct Range {
    int64_t lo, hi;
  };
  std::vector<Range> before_split;
  int64_t lo = 0, hi = n;
  for (int d = 1; d < g_size; d <<= 1) {
    const int partner = g_rank ^ d;
    const bool lower = (g_rank & d) == 0;
    const int64_t mid = lo + (hi - lo) / 2;
    const int64_t keep_lo = lower ? lo : mid, keep_hi = lower ? mid : hi;
    const int64_t give_lo = lower ? mid : lo, give_hi = lower ? hi : mid;
    std::vector<float>& theirs = scratch(keep_hi - keep_lo);
    MPI_Sendrecv(data + give_lo, mpi_count(give_hi - give_lo), MPI_FLOAT, partner, kSumTag, theirs.data(),
                 mpi_count(keep_hi - keep_lo), MPI_FLOAT, partner, kSumTag, g_comm, MPI_STATUS_IGNORE);
    // The lower block's partial on the left (IEEE addition commutes, so this only documents).
    for (int64_t i = keep_lo; i < keep_hi; ++i)
      data[i] = lower ? data[i] + theirs[i - keep_lo] : theirs[i - keep_lo] + data[i];
    before_split.push_back({lo, hi});
    lo = keep_lo;
    hi = keep_hi;
  }
  for (int d = g_size / 2, level = static_cast<int>(before_split.size()) - 1; level >= 0; d >>= 1, --level) {
    const int partner = g_rank ^ d;
    const Range whole = before_split[static_cast<size_t>(level)];
    const int64_t mid = whole.lo + (whole.hi - whole.lo) / 2;
    const bool lower = (g_rank & d) == 0;
    const int64_t other_lo = lower ? mid : whole.lo, other_hi = lower ? whole.hi : mid;
    MPI_Sendrecv(data + lo, mpi_count(hi - lo), MPI_FLOAT, partner, kSumTag, data + other_lo,
                 mpi_count(other_hi - other_lo), MPI_FLOAT, partner, kSumTag, g_comm, MPI_STATUS_IGNORE);
    lo = whole.lo;
    hi = whole.hi;
  }
}

// Any P: the same tree as a binomial reduce to rank 0, then a broadcast (a copy, bit-exact).
void sum_binomial(float* data, int64_t n) {
  for (int d = 1; d < g_size; d <<= 1) {
    if (g_rank % (2 * d) == 0) {
      if (g_rank + d >= g_size) continue;
      std::vector<float>& theirs = scratch(n);
      MPI_Recv(theirs.data(), mpi_count(n), MPI_FLOAT, g_rank + d, kSumTag, g_comm, MPI_STATUS_IGNORE);
      for (int64_t i = 0; i < n; ++i) data[i] = data[i] + theirs[static_cast<size_t>(i)];
    } else {
      MPI_Send(data, mpi_count(n), MPI_FLOAT, g_rank - d, kSumTag, g_comm);
      break;
    }
  }
  MPI_Bcast(data, mpi_count(n), MPI_FLOAT, 0, g_comm);
}
#endif

[[maybe_unused]] std::string message_of(const std::exception_ptr& error) {
  try {
    std::rethrow_exception(error);
  } catch (const std::exception& e) {
    return e.what();
  } catch (...) {
    return "unknown error";
  }
}

}  // namespace

int rank_from_launcher() {
  for (const char* name : {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK"})
    if (const char* value = std::getenv(name)) return std::atoi(value);
  return 0;
}

bool launched_by_mpi() {
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK", "PMI_SIZE"})
    if (std::getenv(name) != nullptr) return true;
  return false;
}

bool built_with_mpi() {
  return HEADLAB_MPI != 0;
}

Session::Session([[maybe_unused]] int* argc, [[maybe_unused]] char*** argv) {
  if (!launched_by_mpi()) return;
#if HEADLAB_MPI
  int provided = 0;
  // Only the main thread calls MPI (OpenMP and the batch prefetcher never do).
  MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided);
  g_initialized = true;
  MPI_Comm_dup(MPI_COMM_WORLD, &g_comm);
  MPI_Comm_dup(MPI_COMM_WORLD, &g_failure_comm);
  MPI_Comm_rank(g_comm, &g_rank);
  MPI_Comm_size(g_comm, &g_size);
  MPI_Comm local;
  MPI_Comm_split_type(g_comm, MPI_COMM_TYPE_SHARED, g_rank, MPI_INFO_NULL, &local);
  MPI_Comm_size(local, &g_local_size);
  MPI_Comm_free(&local);
#else
  throw Error("started by mpirun, but this headlab was built without MPI (install libopenmpi-dev and rebuild)");
#endif
}

Session::~Session() {
#if HEADLAB_MPI
  if (!g_initialized) return;
  MPI_Comm_free(&g_comm);
  MPI_Comm_free(&g_failure_comm);
  MPI_Finalize();
  g_initialized = false;
#endif
}

int rank() {
  return g_rank;
}
int size() {
  return g_size;
}
int cores_per_rank(int machine_cores) {
  return std::max(1, machine_cores / g_local_size);
}

void sum_over_ranks([[maybe_unused]] float* data, [[maybe_unused]] int64_t n) {
  if (g_size == 1) return;
#if HEADLAB_MPI
  if ((g_size & (g_size - 1)) == 0 && n >= g_size)
    sum_recursive_halving(data, n);
  else
    sum_binomial(data, n);
#endif
}

void all_gather(const double* values, int64_t count, double* out) {
  if (g_size == 1) {
    std::copy(values, values + count, out);
    return;
  }
#if HEADLAB_MPI
  MPI_Allgather(values, mpi_count(count), MPI_DOUBLE, out, mpi_count(count), MPI_DOUBLE, g_comm);
#endif
}

int64_t sum_over_ranks(int64_t value) {
  if (g_size == 1) return value;
  int64_t total = value;
#if HEADLAB_MPI
  MPI_Allreduce(&value, &total, 1, MPI_INT64_T, MPI_SUM, g_comm);  // integers: any order is exact
#endif
  return total;
}

bool any_rank(bool flag) {
  if (g_size == 1) return flag;
  int mine = flag ? 1 : 0, any = mine;
#if HEADLAB_MPI
  MPI_Allreduce(&mine, &any, 1, MPI_INT, MPI_MAX, g_comm);
#endif
  return any != 0;
}

std::string broadcast(const std::string& text) {
  if (g_size == 1) return text;
#if HEADLAB_MPI
  return broadcast_from(0, text);
#else
  return text;
#endif
}

void send_text([[maybe_unused]] int to, [[maybe_unused]] int tag, [[maybe_unused]] const std::string& text) {
  HEADLAB_CHECK(g_size > 1, "send_text: no other rank");
#if HEADLAB_MPI
  MPI_Send(text.data(), mpi_count(static_cast<int64_t>(text.size())), MPI_CHAR, to, tag, g_comm);
#endif
}

#if HEADLAB_MPI
namespace {
std::string receive_probed(const MPI_Status& status) {
  int length = 0;
  MPI_Get_count(&status, MPI_CHAR, &length);
  std::string text(static_cast<size_t>(length), '\0');
  MPI_Recv(text.data(), length, MPI_CHAR, status.MPI_SOURCE, status.MPI_TAG, g_comm, MPI_STATUS_IGNORE);
  return text;
}
}  // namespace
#endif

std::string receive_text([[maybe_unused]] int from, [[maybe_unused]] int tag) {
  HEADLAB_CHECK(g_size > 1, "receive_text: no other rank");
#if HEADLAB_MPI
  MPI_Status status;
  MPI_Probe(from, tag, g_comm, &status);
  return receive_probed(status);
#else
  return "";
#endif
}

TextMessage poll_text([[maybe_unused]] int tag) {
  TextMessage message;
#if HEADLAB_MPI
  if (g_size == 1) return message;
  int waiting = 0;
  MPI_Status status;
  MPI_Iprobe(MPI_ANY_SOURCE, tag, g_comm, &waiting, &status);
  if (!waiting) return message;
  message.from = status.MPI_SOURCE;
  message.text = receive_probed(status);
#endif
  return message;
}

void agree(std::exception_ptr local) {
  if (g_size == 1) {
    if (local) std::rethrow_exception(local);
    return;
  }
#if HEADLAB_MPI
  const int mine = local ? g_rank : g_size;
  int first = mine;
  MPI_Allreduce(&mine, &first, 1, MPI_INT, MPI_MIN, g_comm);
  if (first == g_size) return;
  // A JobError from an inner agree() passes through with its own rank and message.
  std::string message;
  int failed_rank = first;
  if (g_rank == first) {
    try {
      std::rethrow_exception(local);
    } catch (const JobError& e) {
      message = e.what();
      failed_rank = e.failed_rank;
    } catch (...) {
      message = "rank " + std::to_string(first) + " of " + std::to_string(g_size) + ": " + message_of(local);
    }
  }
  MPI_Bcast(&failed_rank, 1, MPI_INT, first, g_comm);
  throw JobError(broadcast_from(first, message), failed_rank);
#endif
}

bool all_ranks_failed([[maybe_unused]] double timeout_s) {
  if (g_size == 1) return true;
#if HEADLAB_MPI
  MPI_Request request;
  MPI_Ibarrier(g_failure_comm, &request);
  const double deadline = MPI_Wtime() + timeout_s;
  int done = 0;
  while (!done && MPI_Wtime() < deadline) {
    MPI_Test(&request, &done, MPI_STATUS_IGNORE);
    if (!done) usleep(1000);
  }
  return done != 0;  // if not, the job ends (abort_job) with the barrier pending
#else
  return true;
#endif
}

void abort_job(int exit_code) {
#if HEADLAB_MPI
  if (g_initialized) MPI_Abort(MPI_COMM_WORLD, exit_code);
#endif
  std::_Exit(exit_code);
}

}  // namespace headlab::dist
