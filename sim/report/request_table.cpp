#include "sim/report/request_table.h"

#include <cstdio>
#include <stdexcept>

#include "sim/cache/decisions.h"

namespace kvlanes {
namespace {

int64_t Pages(const std::vector<LaneCopy>& copies) {
  int64_t n = 0;
  for (const auto& c : copies) n += static_cast<int64_t>(c.pages.size());
  return n;
}

// CSV field: quoted when it holds a separator, a quote or a line break.
std::string CsvField(const std::string& s) {
  if (s.find_first_of(",\"\n\r") == std::string::npos) return s;
  std::string q = "\"";
  for (char c : s) q += c == '"' ? std::string("\"\"") : std::string(1, c);
  return q + "\"";
}

}  // namespace

RequestTable::RequestTable(const ReplayConfig& cfg, bool predicted)
    : page_tokens_(cfg.cache.page_tokens), predicted_(predicted) {}

void RequestTable::Add(const RequestPlan& p, const RequestCost* cost) {
  if (predicted_ != (cost != nullptr))
    throw std::logic_error("RequestTable: a predicted cost on some rows only");
  request_.push_back(p.request);
  arrival_s_.push_back(static_cast<double>(p.arrival_ns) * 1e-9);
  input_tokens_.push_back(p.input_tokens);
  device_hit_tokens_.push_back(p.device_hit_pages * page_tokens_);
  host_hit_tokens_.push_back(p.loaded_pages * page_tokens_);
  computed_tokens_.push_back(p.computed_tokens);
  cached_.push_back(p.cached ? 1 : 0);
  int64_t evicted = 0;
  for (const auto& e : p.evictions)
    if (e.tier == Tier::kDevice) evicted += static_cast<int64_t>(e.slots.size());
  evicted_pages_.push_back(evicted);
  load_back_pages_.push_back(Pages(p.load_back));
  write_back_pages_.push_back(Pages(p.write_back));
  backup_pages_.push_back(Pages(p.backup));
  prefix_runs_.push_back(static_cast<int64_t>(p.runs.size()));
  gather_method_.push_back(p.prefix_pages > 0
                               ? std::string(kGatherMethodNames.Name(p.gather_method))
                               : std::string("none"));
  backup_schedule_.push_back(p.backup.empty()
                                 ? std::string("none")
                                 : std::string(kBackupScheduleNames.Name(p.backup_schedule)));
  if (cost) {
    service_s_.push_back(cost->service_s);
    queue_s_.push_back(cost->queue_s);
    ttft_s_.push_back(cost->ttft_s);
  }
}

std::vector<std::string> RequestTable::Columns() const {
  std::vector<std::string> c = {
      "request",         "arrival_s",   "input_tokens",  "device_hit_tokens", "host_hit_tokens",
      "computed_tokens", "cached",      "evicted_pages", "load_back_pages",   "write_back_pages",
      "backup_pages",    "prefix_runs", "gather_method", "backup_schedule"};
  if (predicted_) c.insert(c.end(), {"service_s", "queue_s", "ttft_s"});
  return c;
}

bool RequestTable::IsReal(const std::string& c) const {
  return c == "arrival_s" || c == "service_s" || c == "queue_s" || c == "ttft_s";
}

bool RequestTable::IsText(const std::string& c) const {
  return c == "gather_method" || c == "backup_schedule";
}

const std::vector<int64_t>& RequestTable::Integers(const std::string& c) const {
  if (c == "request") return request_;
  if (c == "input_tokens") return input_tokens_;
  if (c == "device_hit_tokens") return device_hit_tokens_;
  if (c == "host_hit_tokens") return host_hit_tokens_;
  if (c == "computed_tokens") return computed_tokens_;
  if (c == "cached") return cached_;
  if (c == "evicted_pages") return evicted_pages_;
  if (c == "load_back_pages") return load_back_pages_;
  if (c == "write_back_pages") return write_back_pages_;
  if (c == "backup_pages") return backup_pages_;
  if (c == "prefix_runs") return prefix_runs_;
  throw std::out_of_range("RequestTable: no integer column '" + c + "'");
}

const std::vector<double>& RequestTable::Reals(const std::string& c) const {
  if (c == "arrival_s") return arrival_s_;
  if (predicted_) {
    if (c == "service_s") return service_s_;
    if (c == "queue_s") return queue_s_;
    if (c == "ttft_s") return ttft_s_;
  }
  throw std::out_of_range("RequestTable: no real column '" + c + "'");
}

const std::vector<std::string>& RequestTable::Texts(const std::string& c) const {
  if (c == "gather_method") return gather_method_;
  if (c == "backup_schedule") return backup_schedule_;
  throw std::out_of_range("RequestTable: no text column '" + c + "'");
}

std::string RequestTable::ToCsv() const {
  const std::vector<std::string> cols = Columns();
  std::string out;
  for (size_t k = 0; k < cols.size(); ++k) out += (k ? "," : "") + cols[k];
  out += "\n";
  char buf[64];
  for (size_t i = 0; i < rows(); ++i) {
    for (size_t k = 0; k < cols.size(); ++k) {
      if (k) out += ",";
      if (IsText(cols[k])) {
        out += CsvField(Texts(cols[k])[i]);
      } else if (IsReal(cols[k])) {
        std::snprintf(buf, sizeof buf, "%.9g", Reals(cols[k])[i]);
        out += buf;
      } else {
        out += std::to_string(Integers(cols[k])[i]);
      }
    }
    out += "\n";
  }
  return out;
}

}  // namespace kvlanes
