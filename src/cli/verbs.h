// The CLI's verbs: one function per verb, each in its own src/cli/<verb>.cpp, each parsing its
// own options with cxxopts through parse_options (options.h). They return the process exit code
// and throw headlab::Error for bad input, which main() turns into one line on stderr and exit
// code 2.
#pragma once

namespace headlab::cli {

int run_train(int argc, char** argv);
int run_eval(int argc, char** argv);
int run_sample(int argc, char** argv);
int run_translate(int argc, char** argv);
int run_info(int argc, char** argv);
int run_bench(int argc, char** argv);
int run_sweep(int argc, char** argv);
int run_plot(int argc, char** argv);
int run_analyze(int argc, char** argv);
int run_circuits(int argc, char** argv);
int run_prune(int argc, char** argv);
int run_report(int argc, char** argv);
int run_version(int argc, char** argv);  // in info.cpp, which prints the same lines

}  // namespace headlab::cli
