// `kvlanes check`: joins predicted and measured seconds on plan op ids and summarizes absolute
// percentage errors per op kind, per request and for the whole replay, with a verdict against
// thresholds. Formulas and the measured file's contract: docs/calibration.md.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "sim/compare/op_predictions.h"

namespace kvlanes {

// One op id as measured: the max over ranks of its seconds (the slowest rank finishes it).
struct MeasuredOp {
  std::string id, kind;
  double seconds = 0;
  int64_t ranks = 0;  // how many rank entries were aggregated
  int64_t line = 0;   // first entry's line in the file
};

// The executor's measured file (docs/calibration.md, "Measured file").
struct Measured {
  std::string file;
  nlohmann::json context;
  std::vector<MeasuredOp> ops;          // in order of first appearance
  std::map<int64_t, double> request_s;  // per request: max over ranks of its seconds
  std::optional<double> total_s;        // whole replay, when the file gives it
  // How many of the plan's first requests ran (`kvlanes exec --max-requests`), when given.
  std::optional<int64_t> requests_executed;
  // A serving plan's run (its `serving` block): each pass's seconds by index, each request's
  // queue and time to first token by number.
  std::map<int64_t, double> pass_s;
  std::map<int64_t, std::array<double, 2>> first_token;  // request: queue_s, ttft_s
};
// A run of a plan's first N requests (Measured::requests_executed): the predictions of the
// others left out, so per-op and whole-replay figures compare the same requests. Returns how
// many predicted requests were left out.
size_t KeepExecutedRequests(Predictions& pred, const Measured& meas);
// Throws InputError naming file, line and field.
Measured ParseMeasured(const std::string& text, const std::string& file);
Measured ReadMeasured(const std::string& path);

struct CheckOptions {
  double max_median = 0.05;    // per kind and for requests: median APE at most this
  double max_p95 = 0.15;       // per kind and for requests: p95 APE at most this
  double max_total = 0.05;     // whole replay: |predicted - measured| / measured at most this
  bool allow_missing = false;  // ids on one side only do not fail the verdict
  size_t worst = 10;           // how many worst operations to list
  size_t examples = 5;         // example ids listed per missing side
};

struct ErrorStats {
  size_t count = 0;
  double median = 0, p95 = 0, max = 0;  // of APE = |predicted - measured| / measured
};
// Percentiles by linear interpolation between closest ranks (base/percentile.h). REQUIRES
// non-empty.
ErrorStats SummarizeErrors(const std::vector<double>& ape);

struct JoinedOp {
  std::string id, kind;
  double predicted_s = 0, measured_s = 0, ape = 0;
};

// Ops of one kind that the model prices alike (equal predicted seconds: the same shape, as the
// model sees it) but that were measured apart: each op of such a group of two or more against its
// group's median measured seconds. No price that gives a group one value does better than this
// on those ops: it is the run's own spread, not the model's error (docs/calibration.md).
struct AlikeSpread {
  size_t groups = 0;  // groups of two or more ops
  ErrorStats stats;   // |measured / group median - 1| over their ops
};

struct KindRow {
  std::string kind;  // an op kind, or "request" (service time)
  ErrorStats stats;
  double predicted_s = 0, measured_s = 0;  // sums
  bool pass = false;
  std::optional<AlikeSpread> alike;  // ops only, where some are priced alike
};

struct MissingIds {
  size_t count = 0;
  std::vector<std::string> examples;
};

struct CheckReport {
  CheckOptions options;
  std::string profile;
  bool profile_measured = false;
  std::vector<KindRow> kinds;       // op kinds, by name
  std::optional<KindRow> requests;  // request service times, when both sides have them
  bool total_available = false;
  std::string total_unavailable;  // why not, when not available
  double total_predicted_s = 0, total_measured_s = 0, total_error = 0;
  MissingIds predicted_only, measured_only;  // op ids (and "R/request") on one side only
  size_t not_modelled = 0;                   // measured evict ops (no cost term)
  double not_modelled_s = 0;
  // Gather ops measured at 0 s: a merged prefix (partial_merge) whose merge runs inside its
  // compute op (one rank: nothing moves). Left out of the comparison; their predicted seconds.
  size_t untimed = 0;
  double untimed_predicted_s = 0;
  std::vector<JoinedOp> joined;  // every pair: ops in predicted order, then requests
  std::vector<JoinedOp> worst;
  bool pass = false;
  std::vector<std::string> reasons;  // why it failed
};

// Throws InputError (at the measured file) when an id's kind differs between the two sides.
CheckReport RunCheck(const Predictions& predicted, const Measured& measured,
                     const CheckOptions& opt);

nlohmann::ordered_json CheckReportToJson(const CheckReport& r);
std::string FormatCheckReport(const CheckReport& r);

}  // namespace kvlanes
