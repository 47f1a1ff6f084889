"""What the PyTorch references record about the machine around a measurement (the keys
`headlab bench` prints, src/cli/bench_machine.cpp): the BLAS mapped in, machine-wide busy CPU
seconds, the CPU capability torch uses."""
import os


def blas_library():
    """Real path of the BLAS shared object mapped into this process (follows alternatives)."""
    libs = set()
    with open("/proc/self/maps") as f:
        for line in f:
            path = line.split()[-1] if len(line.split()) >= 6 else ""
            name = os.path.basename(path)
            if "blas" in name or "blis" in name:
                libs.add(path)
    return sorted(libs)


def cpu_busy_seconds():
    """Machine-wide busy CPU seconds (all cores) and steal seconds, from /proc/stat."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    hz = os.sysconf("SC_CLK_TCK")
    user, nice, system, idle, iowait, irq, softirq, steal = v[:8]
    return (user + nice + system + irq + softirq) / hz, steal / hz


def cpu_capability():
    import torch

    for line in torch.__config__.show().splitlines():
        if "CPU capability usage" in line:
            return line.split(":", 1)[1].strip()
    return None
