// Ctrl-C and SIGTERM as a request to stop, for the loops that can stop cleanly (the trainer at a
// step boundary, the sweep runner between runs). While a StopOnSignal lives, the first SIGINT or
// SIGTERM is recorded and the loop polls stop_signal(); a second one gets the default action and
// ends the process at once (the handler resets itself, SA_RESETHAND). The old handlers come back
// when it goes out of scope.
//   StopOnSignal signals;
//   for (...) { ...; if (stop_signal()) break; }
#pragma once

#include <csignal>

namespace headlab {

class StopOnSignal {
 public:
  StopOnSignal();  // clears any signal recorded before
  ~StopOnSignal();
  StopOnSignal(const StopOnSignal&) = delete;
  StopOnSignal& operator=(const StopOnSignal&) = delete;

 private:
  struct sigaction old_int_ {
  }, old_term_{};
};

// The signal received since the innermost StopOnSignal began, 0 if none.
int stop_signal();

}  // namespace headlab
