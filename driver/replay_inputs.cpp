#include "driver/replay_inputs.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>

#include "io/input_error.h"
#include "policies/registry.h"

namespace kvlanes::driver {

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

ReplayInputs LoadReplayInputs(const ReplaySources& src) {
  ReplayInputs in;
  if (src.config_file) LoadConfigFile(*src.config_file, in.config);
  if (src.policy) {
    in.config.policy = *src.policy;
    in.config.origins["policy"] = ConfigOrigin{"", 0, src.policy_field};
  }
  if (src.profile) {
    in.config.hardware.profile = *src.profile;
    in.config.origins["hardware.profile"] = ConfigOrigin{"", 0, src.profile_field};
  }
  if (src.format) {
    try {
      ApplyConfigSetting("trace.format=" + *src.format, in.config);
    } catch (const InputError& e) {  // named by the option given, not the --set it becomes
      throw InputError("", 0, src.format_field, e.message());
    }
    in.config.origins["trace.format"] = ConfigOrigin{"", 0, src.format_field};
  }
  for (const std::string& s : src.sets) ApplyConfigSetting(s, in.config);
  ValidateConfig(in.config);
  CheckNamedInputs(in.config);
  if (!in.config.hardware.profile.empty()) {
    const auto it = in.config.origins.find("hardware.profile");
    const std::string field =
        it == in.config.origins.end() ? "hardware.profile"
        : it->second.file.empty()
            ? it->second.field
            : "hardware.profile (" + it->second.file + ":" + std::to_string(it->second.line) + ")";
    CheckDistinctOutputs(src.outputs, {{field, in.config.hardware.profile}});
  }
  if (src.traces.empty()) throw InputError("", 0, src.traces_field, "a trace file is required");
  in.trace = LoadTraceFor(in.config, src.traces, src.trace_options);
  return in;
}

Trace LoadTraceFor(const ReplayConfig& cfg, const std::vector<std::string>& paths,
                   TraceOptions opt) {
  opt.page_tokens = cfg.cache.page_tokens;
  opt.block_tokens = cfg.trace.block_tokens;
  std::optional<TraceFormat> fmt;
  if (cfg.trace.format != "auto") fmt = ParseTraceFormat(cfg.trace.format);
  Trace trace = LoadTrace(paths, fmt, opt);
  if (trace.requests.empty())
    throw InputError(trace.sources.empty() ? "" : trace.sources[0], 0, "",
                     "the trace holds no requests");
  return trace;
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

}  // namespace kvlanes::driver
