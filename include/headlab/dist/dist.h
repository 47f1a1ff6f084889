// The processes a command runs on: one (always, and the only case without mpirun), or the ranks
// of an MPI job started by `mpirun -np P headlab ...`. Everything MPI is behind this header, so
// the rest of headlab reads the same with and without MPI, and a build without MPI has only the
// one-process branch of each call.
//
// Collectives are deterministic: sum_over_ranks adds in a fixed binary tree over rank order (not
// MPI_Allreduce, whose order is up to the library), so a result depends on the rank count only
// through which partial sums meet, never on timing. See docs/distributed.md.
//   dist::Session session(&argc, &argv);   // MPI_Init when started by mpirun, else nothing
//   if (dist::rank() == 0) write_metrics(...);
//   dist::sum_over_ranks(grads, n);          // every rank ends with the same bits
#pragma once

#include <cstdint>
#include <exception>
#include <string>
#include <vector>

#include "headlab/common/error.h"

namespace headlab::dist {

// True when mpirun (or another PMI launcher) started this process: its environment says so.
bool launched_by_mpi();
// This process's rank as the launcher's environment gives it (0 without one): usable before
// MPI_Init, or in a build without MPI.
int rank_from_launcher();

// MPI_Init on construction when launched by mpirun (an error if this build has no MPI), MPI_Finalize
// on destruction. Without mpirun it does nothing and rank() = 0, size() = 1.
class Session {
 public:
  Session(int* argc, char*** argv);
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;
};

int rank();  // 0 .. size() - 1
int size();  // ranks in the job; 1 without mpirun
bool built_with_mpi();

// The cores this rank may use: the machine's (OpenMP's default) shared among its local ranks.
int cores_per_rank(int machine_cores);

// data[0..n) <- the sum over ranks, on every rank, bit-identical everywhere. The additions form
// the canonical binary tree over ranks: at level k, rank r (a multiple of 2^(k+1)) adds rank
// r + 2^k's partial, for k = 0, 1, ... With P a power of two it runs as a reduce-scatter by
// recursive halving then an all-gather by recursive doubling (2 (P-1)/P n floats sent per rank,
// like a ring); otherwise as a binomial-tree reduce to rank 0 and a broadcast.
void sum_over_ranks(float* data, int64_t n);

// Every rank's `count` values, in rank order, on every rank (out has size() * count entries).
void all_gather(const double* values, int64_t count, double* out);
int64_t sum_over_ranks(int64_t value);
bool any_rank(bool flag);

// Rank 0's string, on every rank.
std::string broadcast(const std::string& text);

// Point-to-point text messages (the distributed sweep's work queue). receive_text blocks;
// poll_text returns at once, with the sender's rank, when a message with `tag` is waiting.
void send_text(int to, int tag, const std::string& text);
std::string receive_text(int from, int tag);
struct TextMessage {
  int from = -1;  // -1: nothing was waiting
  std::string text;
};
TextMessage poll_text(int tag);

// An error that every rank of the job raised together (after agree()): the launcher prints it
// once, from rank 0, and every rank exits normally with the error code.
class JobError : public Error {
 public:
  JobError(const std::string& message, int failed_rank) : Error(message), failed_rank(failed_rank) {}
  int failed_rank;
};

// A collective check point: if any rank's `local` holds an exception, every rank throws a
// JobError with the first failing rank's message (prefixed "rank r of P: " when P > 1); else
// returns. With one process it rethrows `local` as it is.
void agree(std::exception_ptr local);

// For an error outside agree(): true if every rank reaches this call within timeout_s (they all
// met the same bad input, e.g. an unreadable config), false if this rank is alone in failing.
bool all_ranks_failed(double timeout_s);

// Ends the whole job at once from this rank (MPI_Abort), after it has printed why.
[[noreturn]] void abort_job(int exit_code);

// Runs `body` and then agree()s on its outcome: the ranks either all go on or all throw.
template <typename F>
void together(F&& body) {
  std::exception_ptr error;
  try {
    body();
  } catch (...) {
    error = std::current_exception();
  }
  agree(error);
}

}  // namespace headlab::dist
