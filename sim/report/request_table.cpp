#include "sim/report/request_table.h"

#include <cstdio>
#include <stdexcept>

#include "sim/cache/decisions.h"
#include "sim/engine/scheduler.h"
#include "sim/report/report.h"

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

const std::vector<std::string> kIntegerColumns = {
    "request",         "replica",     "input_tokens",    "device_hit_tokens", "host_hit_tokens",
    "computed_tokens", "cached",      "evicted_pages",   "load_back_pages",   "write_back_pages",
    "backup_pages",    "prefix_runs", "waited_for_pages"};

}  // namespace

RequestTable::RequestTable(const ReplayConfig& cfg)
    : page_tokens_(cfg.cache.page_tokens), serving_(cfg.serving.Enabled()) {}

void RequestTable::Attach(ReplaySinks& sinks) {
  if (serving_) {
    sinks.on_admit_at = [this](size_t i, const RequestPlan& p) { AddAt(i, p); };
    sinks.on_served = [this](const ServingResult& r) { Served(r); };
  } else {
    sinks.on_request = [this](const RequestPlan& p, const RequestCost* c) { Add(p, c); };
  }
}

RequestTable::Row RequestTable::FromPlan(const RequestPlan& p) const {
  Row r;
  r.request = p.request;
  r.replica = p.replica < 0 ? 0 : p.replica;
  r.arrival_s = static_cast<double>(p.arrival_ns) * 1e-9;
  r.input_tokens = p.input_tokens;
  r.device_hit_tokens = p.device_hit_pages * page_tokens_;
  r.host_hit_tokens = p.loaded_pages * page_tokens_;
  r.computed_tokens = p.computed_tokens;
  r.cached = p.cached ? 1 : 0;
  for (const auto& e : p.evictions)
    if (e.tier == Tier::kDevice) r.evicted_pages += static_cast<int64_t>(e.slots.size());
  r.load_back_pages = Pages(p.load_back);
  r.write_back_pages = Pages(p.write_back);
  r.backup_pages = Pages(p.backup);
  r.prefix_runs = static_cast<int64_t>(p.runs.size());
  r.gather_method =
      p.prefix_pages > 0 ? std::string(kGatherMethodNames.Name(p.gather_method)) : "none";
  r.backup_schedule =
      p.backup.empty() ? "none" : std::string(kBackupScheduleNames.Name(p.backup_schedule));
  return r;
}

void RequestTable::Add(const RequestPlan& p, const RequestCost* cost) {
  if (!rows_.empty() && timed_ != (cost != nullptr))
    throw std::logic_error("RequestTable: a predicted cost on some rows only");
  timed_ = cost != nullptr;
  Row r = FromPlan(p);
  if (cost) {
    r.service_s = cost->service_s;
    r.queue_s = cost->queue_s;
    r.ttft_s = cost->ttft_s;
    r.compute_s = cost->compute_s;
    r.gather_s = cost->gather_s;
    r.load_back_stall_s = cost->load_back_exposed_s;
    r.backup_exposed_s = cost->backup.beyond_forward_s;
    r.hit_saved_s = cost->hit_saved_s;
  }
  rows_.push_back(std::move(r));
}

void RequestTable::AddAt(size_t index, const RequestPlan& p) {
  if (rows_.size() <= index) rows_.resize(index + 1);
  rows_[index] = FromPlan(p);
}

void RequestTable::Served(const ServingResult& res) {
  if (rows_.size() != res.requests.size())
    throw std::logic_error("RequestTable: not every served request was admitted");
  timed_ = true;
  for (size_t i = 0; i < rows_.size(); ++i) {
    const ServedRequest& s = res.requests[i];
    Row& r = rows_[i];
    r.request = static_cast<int64_t>(i);  // the plan counts within its replica
    r.replica = s.replica;
    r.queue_s = static_cast<double>(s.admit_ns - s.arrival_ns) * 1e-9;
    r.service_s = static_cast<double>(s.first_token_ns - s.admit_ns) * 1e-9;
    r.ttft_s = static_cast<double>(s.first_token_ns - s.arrival_ns) * 1e-9;
    r.compute_s = s.compute_s;
    r.gather_s = s.extra.gather_s;
    r.load_back_stall_s = s.extra.load_back_stall_s;
    r.backup_exposed_s = s.extra.backup_exposed_s;
    r.hit_saved_s = s.extra.hit_saved_s;
    r.pass_base_s = s.pass_base_s;
    r.batch_mates_s = BatchMatesS(s);
    r.waited_for_pages = s.waited_for_pages ? 1 : 0;
  }
}

std::vector<std::string> RequestTable::Columns() const {
  // `replica` in both modes (0 in sequential mode), so tables of the two modes line up.
  std::vector<std::string> c = {"request", "replica"};
  c.insert(c.end(),
           {"arrival_s", "input_tokens", "device_hit_tokens", "host_hit_tokens", "computed_tokens",
            "cached", "evicted_pages", "load_back_pages", "write_back_pages", "backup_pages",
            "prefix_runs", "gather_method", "backup_schedule"});
  if (timed_)
    c.insert(c.end(), {"service_s", "queue_s", "ttft_s", "compute_s", "gather_s",
                       "load_back_stall_s", "backup_exposed_s", "hit_saved_s"});
  if (timed_ && serving_) c.insert(c.end(), {"pass_base_s", "batch_mates_s", "waited_for_pages"});
  return c;
}

RequestTable::Kind RequestTable::ColumnKind(const std::string& c) const {
  for (const char* real :
       {"arrival_s", "service_s", "queue_s", "ttft_s", "compute_s", "gather_s", "load_back_stall_s",
        "backup_exposed_s", "hit_saved_s", "pass_base_s", "batch_mates_s"})
    if (c == real) return Kind::kReal;
  if (c == "gather_method" || c == "backup_schedule") return Kind::kText;
  for (const auto& k : kIntegerColumns)
    if (k == c) return Kind::kInteger;
  throw std::out_of_range("RequestTable: no column '" + c + "'");
}

std::vector<int64_t> RequestTable::Integers(const std::string& c) const {
  int64_t Row::*field = nullptr;
  if (c == "request") field = &Row::request;
  if (c == "replica") field = &Row::replica;
  if (c == "input_tokens") field = &Row::input_tokens;
  if (c == "device_hit_tokens") field = &Row::device_hit_tokens;
  if (c == "host_hit_tokens") field = &Row::host_hit_tokens;
  if (c == "computed_tokens") field = &Row::computed_tokens;
  if (c == "cached") field = &Row::cached;
  if (c == "evicted_pages") field = &Row::evicted_pages;
  if (c == "load_back_pages") field = &Row::load_back_pages;
  if (c == "write_back_pages") field = &Row::write_back_pages;
  if (c == "backup_pages") field = &Row::backup_pages;
  if (c == "prefix_runs") field = &Row::prefix_runs;
  if (timed_ && serving_ && c == "waited_for_pages") field = &Row::waited_for_pages;
  if (!field) throw std::out_of_range("RequestTable: no integer column '" + c + "'");
  std::vector<int64_t> v;
  v.reserve(rows_.size());
  for (const Row& r : rows_) v.push_back(r.*field);
  return v;
}

std::vector<double> RequestTable::Reals(const std::string& c) const {
  double Row::*field = nullptr;
  if (c == "arrival_s") field = &Row::arrival_s;
  if (timed_ && c == "service_s") field = &Row::service_s;
  if (timed_ && c == "queue_s") field = &Row::queue_s;
  if (timed_ && c == "ttft_s") field = &Row::ttft_s;
  if (timed_ && c == "compute_s") field = &Row::compute_s;
  if (timed_ && c == "gather_s") field = &Row::gather_s;
  if (timed_ && c == "load_back_stall_s") field = &Row::load_back_stall_s;
  if (timed_ && c == "backup_exposed_s") field = &Row::backup_exposed_s;
  if (timed_ && c == "hit_saved_s") field = &Row::hit_saved_s;
  if (timed_ && serving_ && c == "pass_base_s") field = &Row::pass_base_s;
  if (timed_ && serving_ && c == "batch_mates_s") field = &Row::batch_mates_s;
  if (!field) throw std::out_of_range("RequestTable: no real column '" + c + "'");
  std::vector<double> v;
  v.reserve(rows_.size());
  for (const Row& r : rows_) v.push_back(r.*field);
  return v;
}

std::vector<std::string> RequestTable::Texts(const std::string& c) const {
  std::string Row::*field = nullptr;
  if (c == "gather_method") field = &Row::gather_method;
  if (c == "backup_schedule") field = &Row::backup_schedule;
  if (!field) throw std::out_of_range("RequestTable: no text column '" + c + "'");
  std::vector<std::string> v;
  v.reserve(rows_.size());
  for (const Row& r : rows_) v.push_back(r.*field);
  return v;
}

std::string RequestTable::ToCsv() const {
  const std::vector<std::string> cols = Columns();
  std::vector<Kind> kinds;
  for (const auto& c : cols) kinds.push_back(ColumnKind(c));
  std::vector<std::vector<int64_t>> ints(cols.size());
  std::vector<std::vector<double>> reals(cols.size());
  std::vector<std::vector<std::string>> texts(cols.size());
  for (size_t k = 0; k < cols.size(); ++k) {
    if (kinds[k] == Kind::kInteger) ints[k] = Integers(cols[k]);
    if (kinds[k] == Kind::kReal) reals[k] = Reals(cols[k]);
    if (kinds[k] == Kind::kText) texts[k] = Texts(cols[k]);
  }
  std::string out;
  for (size_t k = 0; k < cols.size(); ++k) out += (k ? "," : "") + cols[k];
  out += "\n";
  char buf[64];
  for (size_t i = 0; i < rows(); ++i) {
    for (size_t k = 0; k < cols.size(); ++k) {
      if (k) out += ",";
      switch (kinds[k]) {
        case Kind::kText:
          out += CsvField(texts[k][i]);
          break;
        case Kind::kReal:
          std::snprintf(buf, sizeof buf, "%.9g", reals[k][i]);
          out += buf;
          break;
        case Kind::kInteger:
          out += std::to_string(ints[k][i]);
          break;
      }
    }
    out += "\n";
  }
  return out;
}

}  // namespace kvlanes
