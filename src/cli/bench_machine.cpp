#include "bench_machine.h"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>

#include "headlab/common/timing.h"

namespace headlab::cli {

MachineSample MachineSample::now() {
  MachineSample s;
  s.wall = wall_seconds();
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  s.own_cpu = u.ru_utime.tv_sec + u.ru_utime.tv_usec * 1e-6 + u.ru_stime.tv_sec + u.ru_stime.tv_usec * 1e-6;
  // Machine-wide busy and steal CPU seconds from /proc/stat (as torch_ref.py computes them).
  std::ifstream f("/proc/stat");
  std::string cpu;
  long long user = 0, nice = 0, system = 0, idle = 0, iowait = 0, irq = 0, softirq = 0, steal = 0;
  if (f >> cpu >> user >> nice >> system >> idle >> iowait >> irq >> softirq >> steal) {
    const double hz = static_cast<double>(sysconf(_SC_CLK_TCK));
    s.machine_busy = static_cast<double>(user + nice + system + irq + softirq) / hz;
    s.machine_steal = static_cast<double>(steal) / hz;
  }
  return s;
}

void add_machine_use(JsonObject& json, const MachineSample& from, const MachineSample& to) {
  const double wall = to.wall - from.wall, own = to.own_cpu - from.own_cpu;
  const double foreign = std::max(0.0, (to.machine_busy - from.machine_busy) - own);
  json.raw("foreign_cores", json_fixed(foreign / wall, 2))
      .raw("steal_cores", json_fixed((to.machine_steal - from.machine_steal) / wall, 2))
      .raw("own_cores", json_fixed(own / wall, 2));
}

std::string loadavg() {
  std::ifstream f("/proc/loadavg");
  std::string first;
  f >> first;
  return first.empty() ? "null" : first;
}

double peak_rss_mb() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_maxrss) / 1024.0;
}

long minor_page_faults() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_minflt;
}

}  // namespace headlab::cli
