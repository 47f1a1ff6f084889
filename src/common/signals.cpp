#include "headlab/common/signals.h"

#include <atomic>

namespace headlab {

namespace {
std::atomic<int> received{0};
extern "C" void record_stop_signal(int sig) {
  received = sig;
}
}  // namespace

StopOnSignal::StopOnSignal() {
  received = 0;
  struct sigaction action {};
  action.sa_handler = record_stop_signal;
  action.sa_flags = SA_RESETHAND;  // the second signal: default action
  sigemptyset(&action.sa_mask);
  sigaction(SIGINT, &action, &old_int_);
  sigaction(SIGTERM, &action, &old_term_);
}

StopOnSignal::~StopOnSignal() {
  sigaction(SIGINT, &old_int_, nullptr);
  sigaction(SIGTERM, &old_term_, nullptr);
}

int stop_signal() {
  return received.load();
}

}  // namespace headlab
