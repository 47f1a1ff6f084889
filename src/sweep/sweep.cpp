// Sweeps: reading the sweep file, expanding and validating the grid into points, and the run
// folders' state. Running the points is src/sweep/runner.cpp.
#include "headlab/common/files.h"
#include "headlab/sweep/sweep.h"

#include <cctype>
#include <filesystem>
#include <map>
#include <set>

#include "headlab/common/error.h"
#include "headlab/io/csv.h"
#include "headlab/train/run_folder.h"
#include "headlab/train/checkpointing.h"
#include "headlab/train/setup.h"

namespace headlab {

namespace fs = std::filesystem;

namespace {

// ---------------------------------------------------------------------------------------------
// The sweep file.

// `[set]` and `[grid]` accept quoted dotted keys ("model.n_heads" = ...), dotted keys
// (model.n_heads = ...) and sub-tables ([grid.model]); read_toml_entries flattens all of them into
// one list in file order.
const std::vector<TomlEntry>& flat_section(const TomlEntry& section, const std::string& path) {
  HEADLAB_CHECK(section.kind == TomlEntry::Kind::table, "sweep file " << path << ":" << section.line << ": '"
                                                                      << section.key << "' must be a table (["
                                                                      << section.key << "])");
  return section.entries;
}

std::string where(const std::string& path, const TomlEntry& entry) {
  return path + ":" + std::to_string(entry.line);
}

std::string resolve_base(const std::string& base, const std::string& sweep_path, int line) {
  const fs::path p(base);
  std::error_code ec;
  if (p.is_absolute()) {
    HEADLAB_CHECK(fs::is_regular_file(p, ec),
                  "sweep file " << sweep_path << ":" << line << ": base config '" << base << "' does not exist");
    return p.string();
  }
  const fs::path next_to_sweep = fs::path(sweep_path).parent_path() / p;
  if (fs::is_regular_file(next_to_sweep, ec)) return next_to_sweep.lexically_normal().string();
  if (fs::is_regular_file(p, ec)) return p.string();
  throw Error("sweep file " + sweep_path + ":" + std::to_string(line) + ": base config '" + base +
              "' not found next to the sweep file (" + next_to_sweep.lexically_normal().string() +
              ") or in the working directory");
}

}  // namespace

// ---------------------------------------------------------------------------------------------

bool is_seed_key(const std::string& key) {
  return key == "train.seed" || key == "data.seed";
}

SweepSpec parse_sweep_text(const std::string& toml_text, const std::string& path) {
  const std::vector<TomlEntry> document = read_toml_entries(toml_text, "sweep file " + path);
  SweepSpec spec;
  spec.path = path;
  spec.name = fs::path(path).stem().string();
  std::set<std::string> set_keys;
  for (const TomlEntry& node : document) {
    const std::string& key = node.key;
    const std::string at = where(path, node);
    if (key == "base" || key == "name") {
      HEADLAB_CHECK(node.kind == TomlEntry::Kind::string, "sweep file " << at << ": '" << key << "' must be a string");
      if (key == "base")
        spec.base = resolve_base(node.string_value, path, static_cast<int>(node.line));
      else
        spec.name = node.string_value;
    } else if (key == "set") {
      for (const TomlEntry& leaf : flat_section(node, path)) {
        HEADLAB_CHECK(set_keys.insert(leaf.key).second,
                      "sweep file " << where(path, leaf) << ": '" << leaf.key << "' is set twice in [set]");
        spec.set.push_back(leaf.key + "=" + leaf.text);
        spec.set_origins.push_back(where(path, leaf) + " [set]");
      }
    } else if (key == "grid") {
      for (const TomlEntry& leaf : flat_section(node, path)) {
        HEADLAB_CHECK(leaf.kind == TomlEntry::Kind::array && !leaf.items.empty(),
                      "sweep file " << where(path, leaf) << ": grid key '" << leaf.key
                                    << "' must be a non-empty list of values, e.g. \"" << leaf.key << "\" = [1, 2]");
        for (const SweepAxis& axis : spec.grid)
          HEADLAB_CHECK(axis.key != leaf.key,
                        "sweep file " << where(path, leaf) << ": '" << leaf.key << "' appears twice in [grid]");
        spec.grid.push_back({leaf.key, leaf.items, where(path, leaf) + " [grid]"});
      }
    } else {
      throw Error("sweep file " + at + ": unknown key '" + key + "'; a sweep file has base, name, [set] and [grid]");
    }
  }
  HEADLAB_CHECK(!spec.grid.empty(), "sweep file " << path
                                                  << ": [grid] is empty; list at least one key with its values, "
                                                  << "e.g. \"model.n_heads\" = [1, 2, 4]");
  for (const SweepAxis& axis : spec.grid)
    HEADLAB_CHECK(!set_keys.count(axis.key),
                  "sweep file " << path << ": '" << axis.key << "' is in both [set] and [grid]; keep it in one");
  HEADLAB_CHECK(!spec.name.empty() && spec.name.find('/') == std::string::npos,
                "sweep file " << path << ": name '" << spec.name << "' must be a non-empty folder name");
  return spec;
}

SweepSpec load_sweep(const std::string& path) {
  return parse_sweep_text(read_text_file(path, "sweep file"), path);
}

std::string run_folder_name(const std::vector<std::pair<std::string, std::string>>& values) {
  std::string name;
  for (const auto& [key, value] : values) {
    std::string text = value;
    if (!text.empty() && text.front() == '[') {  // "[1, 3]" -> "1_3"
      std::string items;
      for (const char c : text)
        if (c != '[' && c != ']' && c != ' ') items += c == ',' ? '_' : c;
      text = items;
    }
    if (!name.empty()) name += ',';
    name += key + '=';
    for (const char c : text) {
      const bool keep = std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == '+' || c == '_';
      name += keep ? c : '_';
    }
  }
  return name;
}

std::vector<SweepPoint> expand_sweep(const SweepSpec& spec) {
  size_t total = 1;
  for (const SweepAxis& axis : spec.grid) total *= axis.values.size();
  std::vector<SweepPoint> points;
  std::vector<std::string> errors;
  std::map<std::string, std::string> dataset_errors;  // one dataset build per distinct data setup
  for (size_t index = 0; index < total; ++index) {
    SweepPoint point;
    point.overrides = spec.set;
    point.override_origins = spec.set_origins;
    std::string label;  // the values as written, for errors (the folder name needs a valid config)
    size_t rest = index;
    std::vector<size_t> choice(spec.grid.size());
    for (size_t a = spec.grid.size(); a-- > 0;) {  // the last key varies fastest
      choice[a] = rest % spec.grid[a].values.size();
      rest /= spec.grid[a].values.size();
    }
    for (size_t a = 0; a < spec.grid.size(); ++a) {
      const std::string item = spec.grid[a].key + "=" + spec.grid[a].values[choice[a]];
      point.overrides.push_back(item);
      point.override_origins.push_back(spec.grid[a].origin + " " + item);
      label += (a ? "," : "") + item;
    }
    try {
      point.config = spec.base.empty()
                         ? parse_config_text("", "<built-in defaults>", point.overrides, point.override_origins)
                         : load_config(spec.base, point.overrides, point.override_origins);
      const ModelSpec model = model_spec(point.config);
      validate(model);
      for (const ParamSpec& p : parameter_specs(model)) point.n_params += p.shape.numel();
      // Everything make_dataset reads: the data section and three model keys.
      std::string data_key = std::to_string(point.config.model.vocab_size) + "|" + point.config.model.kind + "|" +
                             std::to_string(point.config.model.n_classes);
      for (const std::string& key : config_keys())
        if (key.rfind("data.", 0) == 0) data_key += "|" + config_value(point.config, key);
      auto [it, inserted] = dataset_errors.emplace(data_key, "");
      if (inserted) {
        try {
          make_dataset(point.config);
        } catch (const std::exception& e) {
          it->second = e.what();
        }
      }
      HEADLAB_CHECK(it->second.empty(), it->second);
      for (const SweepAxis& axis : spec.grid) point.values.emplace_back(axis.key, config_value(point.config, axis.key));
      point.name = run_folder_name(point.values);
      HEADLAB_CHECK(point.name.size() <= 200, "folder name '" << point.name << "' is too long (over 200 characters)");
    } catch (const std::exception& e) {
      errors.push_back("grid point " + label + ": " + e.what());
      continue;
    }
    points.push_back(std::move(point));
  }
  if (!errors.empty()) {
    std::string line = errors.front();
    if (errors.size() > 1)
      line += " (" + std::to_string(errors.size()) + " of " + std::to_string(total) + " grid points are invalid)";
    throw Error(line);
  }
  std::set<std::string> seen;  // folder names
  for (const SweepPoint& p : points) {
    HEADLAB_CHECK(seen.insert(p.name).second,
                  "two grid points share the folder name '" << p.name << "': a value is listed twice");
  }
  return points;
}

RunStatus run_status(const std::string& run_dir, const Config& config) {
  RunStatus status;
  if (auto newest = newest_checkpoint(run_dir)) {
    status.step = newest->step;
    status.checkpoint = newest->path;
    status.state = newest->step >= config.train.steps ? RunState::finished : RunState::resume;
  }
  return status;
}

void write_grid_csv(const std::string& out_dir, const std::vector<SweepPoint>& points) {
  HEADLAB_CHECK(!points.empty(), "write_grid_csv: no grid points");
  std::vector<std::string> header = {"run"};
  for (const auto& [key, value] : points.front().values) header.push_back(key);
  header.insert(header.end(), {"params", "steps"});
  CsvWriter csv(header);
  for (const SweepPoint& p : points) {
    std::vector<std::string> fields = {p.name};
    for (const auto& [key, value] : p.values) fields.push_back(value);
    fields.insert(fields.end(), {std::to_string(p.n_params), std::to_string(p.config.train.steps)});
    csv.row(fields);
  }
  write_file_atomically(fs::path(out_dir) / "grid.csv", csv.text());
}

}  // namespace headlab
