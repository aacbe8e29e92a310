#include "tools/replay_setup.h"

#include <unistd.h>

#include <cstdio>
#include <optional>

#include "io/input_error.h"
#include "traces/trace.h"
#include "traces/trace_reader.h"

namespace po = boost::program_options;

namespace kvlanes::cli {

void AddReplayOptions(po::options_description& desc, bool policy) {
  desc.add_options()("trace", po::value<std::vector<std::string>>()->composing(),
                     "trace file or directory (repeatable; several are merged by arrival time)")(
      "format", po::value<std::string>(),
      ("trace format: auto (detected per file) or one of " + kTraceFormatNames.List() +
       " (overrides trace.format)")
          .c_str())("config", po::value<std::string>(),
                    "YAML config file (see config/default.yaml)")(
      "profile", po::value<std::string>(),
      "hardware profile YAML for predictions (sets hardware.profile)")(
      "set", po::value<std::vector<std::string>>()->composing(),
      "override one config key: --set cache.cp_size=8 (repeatable)")(
      "allow-unsorted", po::bool_switch(), "accept timestamps going backwards (stable-sorts them)");
  if (policy)
    desc.add_options()("policy", po::value<std::string>(),
                       "cache policy (overrides `policy:` in the config)");
  AddTraceLimitOptions(desc);
}

void AddTraceLimitOptions(po::options_description& desc, TraceOptions* bind) {
  auto value = [&](int64_t TraceOptions::*field, int64_t def) {
    return (bind ? po::value<int64_t>(&(bind->*field)) : po::value<int64_t>())->default_value(def);
  };
  desc.add_options()("max-file-bytes",
                     value(&TraceOptions::max_file_bytes, TraceOptions::kDefaultMaxFileBytes),
                     "largest trace file read (a FIFO or device stops there)")(
      "max-line-bytes", value(&TraceOptions::max_line_bytes, TraceOptions::kDefaultMaxLineBytes),
      "longest JSONL record line read");
}

namespace {

TraceOptions TraceOptionsOf(const po::variables_map& vm) {
  TraceOptions opt;
  opt.allow_unsorted = vm.count("allow-unsorted") && vm["allow-unsorted"].as<bool>();
  if (vm.count("max-file-bytes")) opt.max_file_bytes = vm["max-file-bytes"].as<int64_t>();
  if (vm.count("max-line-bytes")) opt.max_line_bytes = vm["max-line-bytes"].as<int64_t>();
  return opt;
}

}  // namespace

ReplayInputs LoadReplayInputs(const po::variables_map& vm,
                              std::initializer_list<const char*> outputs) {
  driver::ReplaySources src;
  auto text = [&vm](const char* option) -> std::optional<std::string> {
    if (!vm.count(option)) return std::nullopt;
    return vm[option].as<std::string>();
  };
  src.config_file = text("config");
  src.policy = text("policy");
  src.policy_field = "--policy";
  src.profile = text("profile");
  src.profile_field = "--profile";
  src.format = text("format");
  src.format_field = "--format";
  if (vm.count("set")) src.sets = vm["set"].as<std::vector<std::string>>();
  if (vm.count("trace")) src.traces = vm["trace"].as<std::vector<std::string>>();
  src.traces_field = "--trace";
  src.trace_options = TraceOptionsOf(vm);
  for (const char* o : outputs)
    if (vm.count(o)) src.outputs.push_back({std::string("--") + o, vm[o].as<std::string>()});
  return driver::LoadReplayInputs(src);
}

Trace LoadTraceFor(const ReplayConfig& cfg, const po::variables_map& vm) {
  if (!vm.count("trace")) throw InputError("", 0, "--trace", "a trace file is required");
  return driver::LoadTraceFor(cfg, vm["trace"].as<std::vector<std::string>>(), TraceOptionsOf(vm));
}

Progress::Progress(std::string what, size_t total, bool enabled)
    : what_(std::move(what)), total_(total), enabled_(enabled), tty_(isatty(2) != 0) {}

void Progress::Update(size_t done) {
  if (!enabled_ || total_ == 0) return;
  if (!open_line_ && last_decile_ == 0 &&
      std::chrono::steady_clock::now() - start_ < std::chrono::seconds(1))
    return;
  if (tty_) {
    std::fprintf(stderr, "\r%s: %zu/%zu requests (%zu%%)", what_.c_str(), done, total_,
                 done * 100 / total_);
    open_line_ = true;
    return;
  }
  const size_t decile = done * 10 / total_;
  if (decile > last_decile_) {
    last_decile_ = decile;
    std::fprintf(stderr, "%s: %zu/%zu requests (%zu%%)\n", what_.c_str(), done, total_,
                 decile * 10);
  }
}

void Progress::Finish() {
  if (open_line_) std::fprintf(stderr, "\n");
  open_line_ = false;
}

}  // namespace kvlanes::cli
