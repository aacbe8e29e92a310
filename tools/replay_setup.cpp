#include "tools/replay_setup.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "policies/registry.h"
#include "sim/cache/placement.h"
#include "traces/input_error.h"
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

// The checks ValidateConfig cannot make (sim/ knows no policy and opens no file), located where
// the key was set, so a config file's typo names its file and line: the policy name, and a
// hardware profile that cannot be opened (otherwise refused later, naming only the missing path).
void CheckNamedInputs(const ReplayConfig& c) {
  auto fail_at = [&c](const std::string& key, const std::string& msg) {
    const auto it = c.origins.find(key);
    if (it == c.origins.end()) throw InputError("", 0, key, msg);
    throw InputError(it->second.file, it->second.line, it->second.field, msg);
  };
  try {
    CheckPolicyName(c.policy);
  } catch (const InputError& e) {
    fail_at("policy", e.message());
  }
  const std::string& p = c.hardware.profile;
  struct stat st {};
  if (!p.empty() && ::stat(p.c_str(), &st) != 0) {
    std::string msg = "cannot open hardware profile '" + p + "': " + std::strerror(errno);
    const auto it = c.origins.find("hardware.profile");
    if (it != c.origins.end() && !it->second.file.empty())
      msg +=
          " (a relative hardware.profile in a config file is read relative to the file's own "
          "folder: copy the profile beside a copied config, or give --profile FILE)";
    fail_at("hardware.profile", msg);
  }
  if (!p.empty() && S_ISDIR(st.st_mode))
    fail_at("hardware.profile", "hardware profile '" + p + "' is a directory");
}

}  // namespace

ReplayInputs LoadReplayInputs(const po::variables_map& vm) {
  ReplayInputs in;
  if (vm.count("config")) LoadConfigFile(vm["config"].as<std::string>(), in.config);
  if (vm.count("policy")) {
    in.config.policy = vm["policy"].as<std::string>();
    in.config.origins["policy"] = ConfigOrigin{"", 0, "--policy"};
  }
  if (vm.count("profile")) {
    in.config.hardware.profile = vm["profile"].as<std::string>();
    in.config.origins["hardware.profile"] = ConfigOrigin{"", 0, "--profile"};
  }
  if (vm.count("format")) {
    try {
      ApplyConfigSetting("trace.format=" + vm["format"].as<std::string>(), in.config);
    } catch (const InputError& e) {  // named by the option given, not the --set it becomes
      throw InputError("", 0, "--format", e.message());
    }
    in.config.origins["trace.format"] = ConfigOrigin{"", 0, "--format"};
  }
  if (vm.count("set"))
    for (const auto& s : vm["set"].as<std::vector<std::string>>()) ApplyConfigSetting(s, in.config);
  ValidateConfig(in.config);
  CheckNamedInputs(in.config);
  in.trace = LoadTraceFor(in.config, vm);
  return in;
}

std::string HostTierWarning(const ReplayConfig& c) {
  const int64_t host = c.cache.host_pages_per_lane;
  const int64_t device = c.cache.device_pages_per_lane;
  if (host <= 0 || host >= device) return "";
  return "warning: the host tier is smaller than the device tier (cache.host_pages_per_lane " +
         std::to_string(host) + " < cache.device_pages_per_lane " + std::to_string(device) +
         "): the host can hold only part of what the device evicts, so host hits fall, and "
         "vanish once device pages pass host pages; raise cache.host_pages_per_lane, or set it to "
         "0 for no host tier";
}

Trace LoadTraceFor(const ReplayConfig& cfg, const po::variables_map& vm) {
  if (!vm.count("trace")) throw InputError("", 0, "--trace", "a trace file is required");
  TraceOptions opt;
  opt.page_tokens = cfg.cache.page_tokens;
  opt.block_tokens = cfg.trace.block_tokens;
  opt.allow_unsorted = vm.count("allow-unsorted") && vm["allow-unsorted"].as<bool>();
  if (vm.count("max-file-bytes")) opt.max_file_bytes = vm["max-file-bytes"].as<int64_t>();
  if (vm.count("max-line-bytes")) opt.max_line_bytes = vm["max-line-bytes"].as<int64_t>();
  std::optional<TraceFormat> fmt;
  if (cfg.trace.format != "auto") fmt = ParseTraceFormat(cfg.trace.format);
  Trace trace = LoadTrace(vm["trace"].as<std::vector<std::string>>(), fmt, opt);
  if (trace.requests.empty())
    throw InputError(trace.sources.empty() ? "" : trace.sources[0], 0, "",
                     "the trace holds no requests");
  return trace;
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
