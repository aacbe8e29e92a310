// The per-request table of a replay (`kvlanes replay --requests-csv`, the Python module's
// `requests` columns): one row per request, in trace order, from its plan and, with a hardware
// profile, its predicted cost (sequential mode) or what the serving scheduler did with it
// (serving mode). Column meanings: docs/replay.md "Per-request table".
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sim/config.h"
#include "sim/predict/cost_model.h"
#include "sim/predict/plan.h"

namespace kvlanes {

struct ReplaySinks;
struct ServingResult;

class RequestTable {
 public:
  explicit RequestTable(const ReplayConfig& cfg);

  // Points the replay's sinks at this table (either mode); keep the table alive during it.
  void Attach(ReplaySinks& sinks);

  size_t rows() const { return rows_.size(); }
  // Column names in output order (the timing ones only where the replay predicts them).
  std::vector<std::string> Columns() const;
  enum class Kind { kInteger, kReal, kText };
  Kind ColumnKind(const std::string& column) const;
  std::vector<int64_t> Integers(const std::string& column) const;
  std::vector<double> Reals(const std::string& column) const;
  std::vector<std::string> Texts(const std::string& column) const;

  // One header line, then one line per request; reals with 9 significant digits.
  std::string ToCsv() const;

 private:
  struct Row {
    int64_t request = 0, input_tokens = 0, device_hit_tokens = 0, host_hit_tokens = 0,
            computed_tokens = 0, cached = 0, evicted_pages = 0, load_back_pages = 0,
            write_back_pages = 0, backup_pages = 0, prefix_runs = 0, replica = 0,
            waited_for_pages = 0;  // serving mode: its admission waited for pages in flight
    double arrival_s = 0, service_s = 0, queue_s = 0, ttft_s = 0;
    // The predicted parts of its time (docs/serving.md#the-ttft-breakdown): its own compute, and
    // gather, load-back stalls and backups beyond the forward pass, each priced alone; in serving
    // mode also the passes' fixed cost and its batch mates' share of the passes it ran in.
    double compute_s = 0, gather_s = 0, load_back_stall_s = 0, backup_exposed_s = 0,
           pass_base_s = 0, batch_mates_s = 0, hit_saved_s = 0;
    std::string gather_method, backup_schedule;
  };
  Row FromPlan(const RequestPlan& p) const;
  void Add(const RequestPlan& p, const RequestCost* cost);  // sequential mode, in order
  void AddAt(size_t index, const RequestPlan& p);           // serving mode, at admission
  void Served(const ServingResult& res);                    // serving mode, at the end

  int64_t page_tokens_;
  bool serving_;
  bool timed_ = false;  // service, queue and TTFT columns present
  std::vector<Row> rows_;
};

}  // namespace kvlanes
