#include "sim/report/provenance.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <ctime>
#include <map>
#include <mutex>
#include <optional>
#include <tuple>

#include "io/build_info.h"
#include "io/input_file.h"
#include "sim/predict/content_hash.h"
#include "sim/predict/hardware_profile.h"

namespace kvlanes {
namespace {

using J = nlohmann::ordered_json;

struct FileDigest {
  int64_t bytes = 0;
  std::string xxh64;
};

// Size and hash of a regular file, memoized: sweeps replay one trace many times.
std::optional<FileDigest> DigestFile(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return std::nullopt;
  using Key = std::tuple<std::string, int64_t, int64_t, int64_t>;
  static std::mutex mu;
  static std::map<Key, FileDigest> memo;
  const Key key{path, static_cast<int64_t>(st.st_size), static_cast<int64_t>(st.st_mtim.tv_sec),
                static_cast<int64_t>(st.st_mtim.tv_nsec)};
  {
    const std::lock_guard<std::mutex> lock(mu);
    if (auto it = memo.find(key); it != memo.end()) return it->second;
  }
  // read(2) into a small buffer that stays in the cache: a stream with a 1 MiB buffer cost a
  // fresh megabyte of memory (page faults and its zero fill) for every file hashed.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  Xxh64 h;
  char buf[64 * 1024];
  int64_t bytes = 0;
  bool failed = false;
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) failed = true;
    if (n <= 0) break;
    h.Update(std::string_view(buf, static_cast<size_t>(n)));
    bytes += n;
  }
  ::close(fd);
  if (failed) return std::nullopt;
  const FileDigest d{bytes, h.Hex()};
  const std::lock_guard<std::mutex> lock(mu);
  memo[key] = d;
  return d;
}

}  // namespace

nlohmann::ordered_json BuildContext() {
  J b;
  b["version"] = BuildVersion();
  b["commit"] = BuildCommit();
  b["build_type"] = BuildType();
  // Reproducible builds' convention: a date only when the caller fixes it.
  if (const char* epoch = std::getenv("SOURCE_DATE_EPOCH"); epoch && *epoch) {
    char* end = nullptr;
    errno = 0;
    const long long t = std::strtoll(epoch, &end, 10);
    if (errno == 0 && end && *end == '\0' && t >= 0) {
      const std::time_t tt = static_cast<std::time_t>(t);
      std::tm tm{};
      gmtime_r(&tt, &tm);
      char buf[32];
      std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
      b["date"] = buf;
    }
  }
  return b;
}

nlohmann::ordered_json ReplayContext(const ReplayConfig& cfg,
                                     const std::vector<std::string>& trace_files) {
  J c;
  c["kvlanes"] = BuildContext();
  // Keys sorted (a plain nlohmann::json), as the executor hashes the plan header's config, so
  // a measurement's config_hash equals the report's config_fnv1a64 for the same config.
  c["config_fnv1a64"] = Fnv1a64Hex(nlohmann::json::parse(ConfigToJson(cfg).dump()).dump());
  J traces = J::array();
  for (const std::string& path : trace_files) {
    J t;
    t["path"] = JsonSafeText(path);
    if (const auto d = DigestFile(path)) {
      t["bytes"] = d->bytes;
      t["xxh64"] = d->xxh64;
    } else {
      t["bytes"] = nullptr;
      t["xxh64"] = nullptr;
    }
    traces.push_back(std::move(t));
  }
  c["traces"] = std::move(traces);
  if (cfg.hardware.profile.empty()) {
    c["hardware_profile"] = nullptr;
  } else {
    const std::string yaml = ReadHardwareProfileText(cfg.hardware.profile);
    c["hardware_profile"] = J{{"path", JsonSafeText(cfg.hardware.profile)},
                              {"name", ParseHardwareProfile(yaml, cfg.hardware.profile).name},
                              {"fnv1a64", Fnv1a64Hex(yaml)}};
  }
  return c;
}

}  // namespace kvlanes
