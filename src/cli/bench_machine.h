// What `headlab bench` records about the machine around a measurement, with the keys
// bench/torch_ref.py prints: CPU seconds this process used, CPU seconds the whole machine was
// busy (to tell whether something else ran), the 1-minute load.
#pragma once

#include <string>

#include "headlab/io/json.h"

namespace headlab::cli {

struct MachineSample {
  double wall = 0, own_cpu = 0, machine_busy = 0, machine_steal = 0;
  static MachineSample now();
};

// Adds the cores busy with other processes, hypervisor steal, and this process's cores between
// two samples: keys foreign_cores, steal_cores, own_cores.
void add_machine_use(JsonObject& json, const MachineSample& from, const MachineSample& to);

std::string loadavg();     // the first field of /proc/loadavg, or "null"
double peak_rss_mb();      // ru_maxrss of this process so far
long minor_page_faults();  // ru_minflt of this process so far

}  // namespace headlab::cli
