// The per-request table of a replay (`kvlanes replay --requests-csv`, the Python module's
// `requests` columns): one row per request, in trace order, from its plan and, with a hardware
// profile, its predicted cost. Column meanings: docs/replay.md "Per-request table".
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sim/config.h"
#include "sim/predict/cost_model.h"
#include "sim/predict/plan.h"

namespace kvlanes {

class RequestTable {
 public:
  RequestTable(const ReplayConfig& cfg, bool predicted);

  // Appends the row of one replayed request; `cost` is null without a profile.
  void Add(const RequestPlan& p, const RequestCost* cost);

  size_t rows() const { return request_.size(); }
  bool predicted() const { return predicted_; }
  // Column names in output order (the predicted ones only with a profile).
  std::vector<std::string> Columns() const;
  // Integer and text columns by name; the timing columns are doubles (IsReal).
  bool IsReal(const std::string& column) const;
  bool IsText(const std::string& column) const;
  const std::vector<int64_t>& Integers(const std::string& column) const;
  const std::vector<double>& Reals(const std::string& column) const;
  const std::vector<std::string>& Texts(const std::string& column) const;

  // One header line, then one line per request; reals with 9 significant digits.
  std::string ToCsv() const;

 private:
  int64_t page_tokens_;
  bool predicted_;
  std::vector<int64_t> request_, input_tokens_, device_hit_tokens_, host_hit_tokens_,
      computed_tokens_, cached_, evicted_pages_, load_back_pages_, write_back_pages_, backup_pages_,
      prefix_runs_;
  std::vector<double> arrival_s_, service_s_, queue_s_, ttft_s_;
  std::vector<std::string> gather_method_, backup_schedule_;
};

}  // namespace kvlanes
