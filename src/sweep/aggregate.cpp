// Aggregating a sweep: DIR/grid.csv names the runs and their grid values; each run's metrics.csv
// gives its final validation metrics. Points that differ only in a seed key (train.seed,
// data.seed) form one row of DIR/results.csv with the mean and sample standard deviation over the
// finished seeds; DIR/summary.md is the same as a Markdown table with `mean ± std`.
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "headlab/common/files.h"
#include "headlab/common/error.h"
#include "headlab/io/csv.h"
#include "headlab/sweep/sweep.h"

namespace headlab {

namespace fs = std::filesystem;

namespace {

std::optional<double> parse_number(const std::string& text) {
  if (text.empty()) return std::nullopt;
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (end == text.c_str() || *end != '\0') return std::nullopt;
  return v;
}

std::string format_number(const std::optional<double>& v, const char* format = "%.6g") {
  return v ? csv_number(format, *v) : "";
}

// "1.2345 ± 0.0123", "1.2345" for one seed, "–" for none.
std::string format_mean_std(const MeanStd& m, const char* format) {
  if (!m.mean) return "–";
  std::string s = format_number(m.mean, format);
  if (m.std) s += " ± " + format_number(m.std, format);
  return s;
}

std::string with_thousands(int64_t n) {
  std::string digits = std::to_string(n), out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

std::string md_cell(const std::string& text) {  // a '|' would end the cell
  std::string out;
  for (const char c : text) out += c == '|' ? std::string("\\|") : std::string(1, c);
  return out;
}

struct Run {
  std::string name;
  std::vector<std::string> values;  // per grid key
  int64_t params = 0, steps = 0;
  std::optional<RunMetrics> metrics;
  bool finished = false;
  std::string failure;  // RUN/failed.txt of an unfinished run: why its last attempt failed
};

struct Group {
  std::vector<std::string> values;  // per non-seed key
  std::vector<const Run*> runs;
};

}  // namespace

MeanStd mean_std(const std::vector<double>& values) {
  MeanStd m;
  m.n = static_cast<int>(values.size());
  if (values.empty()) return m;
  double sum = 0;
  for (const double v : values) sum += v;
  m.mean = sum / m.n;
  if (m.n >= 2) {
    double squares = 0;
    for (const double v : values) squares += (v - *m.mean) * (v - *m.mean);
    m.std = std::sqrt(squares / (m.n - 1));
  }
  return m;
}

std::string sweep_name(const std::string& sweep_dir) {
  std::ifstream in(fs::path(sweep_dir) / kSweepNameFile);
  std::string name;
  std::getline(in, name);
  const size_t first = name.find_first_not_of(" \t\r"), last = name.find_last_not_of(" \t\r");
  if (first != std::string::npos) return name.substr(first, last - first + 1);
  fs::path dir = fs::path(sweep_dir).lexically_normal();
  if (dir.filename().empty()) dir = dir.parent_path();  // "runs/x/"
  return dir.filename().string();
}

RunMetrics read_run_metrics(const std::string& metrics_csv) {
  const CsvTable table = read_csv(metrics_csv, "headlab metrics file");
  const size_t step = table.column("step"), val_loss = table.column("val_loss"),
               val_accuracy = table.column("val_accuracy"), val_bpb = table.column("val_bpb"),
               tokens_per_s = table.column("tokens_per_s");
  const std::optional<size_t> val_bleu = table.find_column("val_bleu");  // absent before translation
  RunMetrics m;
  std::vector<double> rates;
  for (size_t r = 0; r < table.rows.size(); ++r) {
    const std::vector<std::string>& f = table.rows[r];
    const std::optional<double> s = parse_number(f[step]);
    // A step is a count: a value past 2^53 (or inf) does not convert to int64_t (found by fuzz_run_folder).
    HEADLAB_CHECK(s && *s >= 0 && *s <= 9007199254740992.0,
                  metrics_csv << ": row '" << table.row_text(r) << "' has no step");
    m.last_step = static_cast<int64_t>(*s);
    if (const auto loss = parse_number(f[val_loss])) {
      m.val_loss = loss;
      m.val_accuracy = parse_number(f[val_accuracy]);
      m.val_bpb = parse_number(f[val_bpb]);
      m.val_bleu = val_bleu ? parse_number(f[*val_bleu]) : std::nullopt;
    }
    if (const auto rate = parse_number(f[tokens_per_s])) rates.push_back(*rate);
  }
  // The first row's rate includes start-up (first BLIS calls, page faults): left out when others exist.
  if (rates.size() > 1) rates.erase(rates.begin());
  m.tokens_per_s = mean_std(rates).mean;
  return m;
}

void aggregate_sweep(const std::string& sweep_dir) {
  const fs::path dir(sweep_dir), grid_path = dir / "grid.csv";
  HEADLAB_CHECK(fs::is_regular_file(grid_path),
                sweep_dir << " is not a sweep folder (no grid.csv; headlab sweep writes it)");
  const CsvTable grid = read_csv(grid_path);
  const std::vector<std::string>& header = grid.header;
  std::string header_text = csv_line(header);
  header_text.pop_back();
  HEADLAB_CHECK(
      header.size() >= 4 && header.front() == "run" && header[header.size() - 2] == "params" &&
          header.back() == "steps",
      grid_path.string() << ": unexpected header '" << header_text << "' (expected run,<grid keys>,params,steps)");
  const std::vector<std::string> keys(header.begin() + 1, header.end() - 2);

  std::vector<Run> runs;
  for (size_t r = 0; r < grid.rows.size(); ++r) {
    const std::vector<std::string>& f = grid.rows[r];
    Run run;
    run.name = f.front();
    // A folder name inside DIR: grid.csv is read back from disk, so it may have been edited.
    HEADLAB_CHECK(
        !run.name.empty() && run.name.size() <= 255 && run.name != "." && run.name != ".." &&
            run.name.find('/') == std::string::npos && run.name.find('\0') == std::string::npos,
        grid_path.string() << ": row '" << grid.row_text(r) << "' names run '" << run.name << "', not a folder name");
    run.values.assign(f.begin() + 1, f.end() - 2);
    run.params = std::strtoll(f[f.size() - 2].c_str(), nullptr, 10);  // strtoll saturates; atoll's overflow is UB
    run.steps = std::strtoll(f.back().c_str(), nullptr, 10);
    const fs::path metrics = dir / run.name / "metrics.csv";
    if (fs::exists(metrics)) {
      run.metrics = read_run_metrics(metrics.string());
      run.finished = run.metrics->last_step >= run.steps && run.metrics->val_loss.has_value();
    }
    if (const fs::path failed = dir / run.name / kFailedFile; !run.finished && fs::exists(failed)) {
      run.failure = read_text_file(failed, "failure note");
      while (!run.failure.empty() && (run.failure.back() == '\n' || run.failure.back() == '\r')) run.failure.pop_back();
    }
    runs.push_back(std::move(run));
  }
  HEADLAB_CHECK(!runs.empty(), grid_path.string() << " lists no runs");

  std::vector<size_t> group_keys;  // indices into keys of the non-seed keys
  std::vector<std::string> seed_keys;
  for (size_t k = 0; k < keys.size(); ++k) {
    if (is_seed_key(keys[k]))
      seed_keys.push_back(keys[k]);
    else
      group_keys.push_back(k);
  }
  std::vector<Group> groups;
  std::map<std::vector<std::string>, size_t> group_index;
  for (const Run& run : runs) {
    std::vector<std::string> values;
    for (const size_t k : group_keys) values.push_back(run.values[k]);
    auto [it, inserted] = group_index.emplace(values, groups.size());
    if (inserted) groups.push_back({values, {}});
    groups[it->second].runs.push_back(&run);
  }

  struct Row {
    int n_runs = 0, n_failed = 0;
    std::string failures;  // "run: why; run: why"
    int64_t params = 0;
    MeanStd loss, accuracy, bpb, bleu, rate;
  };
  std::vector<Row> rows;
  for (const Group& g : groups) {
    Row row;
    row.n_runs = static_cast<int>(g.runs.size());
    row.params = g.runs.front()->params;
    std::vector<double> loss, accuracy, bpb, bleu, rate;
    for (const Run* r : g.runs) {
      if (!r->failure.empty()) {
        ++row.n_failed;
        row.failures += (row.failures.empty() ? "" : "; ") + r->name + ": " + r->failure;
      }
      if (!r->finished) continue;
      loss.push_back(*r->metrics->val_loss);
      if (r->metrics->val_accuracy) accuracy.push_back(*r->metrics->val_accuracy);
      if (r->metrics->val_bpb) bpb.push_back(*r->metrics->val_bpb);
      if (r->metrics->val_bleu) bleu.push_back(*r->metrics->val_bleu);
      if (r->metrics->tokens_per_s) rate.push_back(*r->metrics->tokens_per_s);
    }
    row.loss = mean_std(loss);
    row.accuracy = mean_std(accuracy);
    row.bpb = mean_std(bpb);
    row.bleu = mean_std(bleu);
    row.rate = mean_std(rate);
    rows.push_back(row);
  }

  // results.csv: a fixed schema (empty cells where a metric does not apply).
  std::vector<std::string> columns;
  for (const size_t k : group_keys) columns.push_back(keys[k]);
  columns.insert(columns.end(), {"n_seeds", "n_runs", "params", "val_loss_mean", "val_loss_std", "val_accuracy_mean",
                                 "val_accuracy_std", "val_bpb_mean", "val_bpb_std", "val_bleu_mean", "val_bleu_std",
                                 "tokens_per_s", "n_failed", "failures"});
  CsvWriter csv(columns);
  for (size_t g = 0; g < groups.size(); ++g) {
    const Row& r = rows[g];
    std::vector<std::string> fields = groups[g].values;
    fields.insert(fields.end(), {std::to_string(r.loss.n), std::to_string(r.n_runs), std::to_string(r.params),
                                 format_number(r.loss.mean), format_number(r.loss.std), format_number(r.accuracy.mean),
                                 format_number(r.accuracy.std), format_number(r.bpb.mean), format_number(r.bpb.std),
                                 format_number(r.bleu.mean), format_number(r.bleu.std),
                                 format_number(r.rate.mean, "%.1f"), std::to_string(r.n_failed), r.failures});
    csv.row(fields);
  }

  // summary.md: the same table for reading; metric columns no point has are left out.
  bool any_accuracy = false, any_bpb = false, any_bleu = false;
  int n_finished = 0;
  for (const Row& r : rows)
    any_accuracy |= r.accuracy.mean.has_value(), any_bpb |= r.bpb.mean.has_value(), any_bleu |= r.bleu.mean.has_value();
  for (const Run& r : runs) n_finished += r.finished;
  std::string averaged = seed_keys.empty() ? std::string("one run per point (no seed key is swept)")
                                           : "mean ± sample standard deviation over ";
  for (size_t i = 0; i < seed_keys.size(); ++i) averaged += (i ? " x " : "") + seed_keys[i];
  std::ostringstream md;
  md << "# Sweep " << sweep_name(sweep_dir) << "\n\n"
     << runs.size() << " runs, " << n_finished << " finished, in " << groups.size()
     << " grid points. Final validation metrics (the last evaluation, at train.steps); " << averaged
     << ". Loss is cross-entropy in nats per token; bits per byte only for text; BLEU only for translation "
        "(greedy, on train.eval_bleu_sentences val sentences); tokens/s is the training throughput, mean over "
        "the run.\n\n";
  columns.clear();
  for (const size_t k : group_keys) columns.push_back(keys[k]);
  columns.insert(columns.end(), {"seeds", "parameters", "val loss (nats)"});
  if (any_accuracy) columns.push_back("val accuracy");
  if (any_bpb) columns.push_back("val bits/byte");
  if (any_bleu) columns.push_back("val BLEU (greedy)");
  columns.push_back("tokens/s");
  for (const std::string& c : columns) md << "| " << md_cell(c) << " ";
  md << "|\n";
  for (size_t c = 0; c < columns.size(); ++c) md << (c < group_keys.size() ? "|---" : "|---:");
  md << "|\n";
  for (size_t g = 0; g < groups.size(); ++g) {
    const Row& r = rows[g];
    for (const std::string& v : groups[g].values) md << "| " << md_cell(v) << " ";
    md << "| " << r.loss.n << "/" << r.n_runs << " | " << with_thousands(r.params) << " | "
       << format_mean_std(r.loss, "%.4f") << " ";
    if (any_accuracy) md << "| " << format_mean_std(r.accuracy, "%.4f") << " ";
    if (any_bpb) md << "| " << format_mean_std(r.bpb, "%.4f") << " ";
    if (any_bleu) md << "| " << format_mean_std(r.bleu, "%.2f") << " ";
    md << "| " << (r.rate.mean ? format_number(r.rate.mean, "%.0f") : "–") << " |\n";
  }
  std::vector<std::string> unfinished;
  for (const Run& r : runs) {
    if (r.finished) continue;
    const std::string progress =
        r.metrics && r.metrics->last_step > 0
            ? "at step " + std::to_string(r.metrics->last_step) + " of " + std::to_string(r.steps)
            : std::string("no metrics yet");
    unfinished.push_back(r.name + " (" + progress + (r.failure.empty() ? "" : "; FAILED: " + r.failure) + ")");
  }
  if (!unfinished.empty()) {
    md << "\nNot finished, so not in the table:\n\n";
    for (const std::string& u : unfinished) md << "- " << md_cell(u) << "\n";
  }

  write_file_atomically(dir / "results.csv", csv.text());
  write_file_atomically(dir / "summary.md", md.str());
}

}  // namespace headlab
