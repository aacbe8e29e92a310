#include "sim/compare/check_stats.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <set>
#include <sstream>
#include <unordered_map>

#include "base/percentile.h"
#include "io/input_error.h"
#include "io/input_file.h"
#include "io/json_location.h"

namespace kvlanes {

namespace {

// Bounds on measured times, so that every sum and ratio check forms stays finite: one op (a copy,
// a gather, a forward step) at most an hour; a request or a whole run at most 1e7 s (115 days).
constexpr double kMaxMeasuredOpSeconds = 3600;
constexpr double kMaxMeasuredRunSeconds = 1e7;

// The context keys `kvlanes check` reads (the plan's config hash, the GPU, the forward pass), each
// of its type where present: a forward pass that was not a string aborted check with an uncaught
// type error, and a config_hash that was not a string skipped the same-plan check silently.
void CheckMeasuredContext(const JsonCursor& ctx) {
  ctx.ExpectObject();
  for (const char* key : {"config_hash", "gpu"})
    if (ctx.Has(key)) ctx.Key(key).Str();
  if (!ctx.Has("compute_model")) return;
  const JsonCursor cm = ctx.Key("compute_model");
  cm.ExpectObject();
  if (!cm.Has("forward")) return;
  const std::string f = cm.Key("forward").Str();
  if (f != "model" && f != "synthetic")
    cm.Key("forward").Fail("expected model or synthetic (the executor's forward pass), got '" +
                           JsonSafeText(f) + "'");
}

// The `serving` block of a serving plan's run (exec_run.cpp, MeasuredServing).
void ReadServingBlock(const JsonCursor& s, Measured& m) {
  s.ExpectObject();
  const JsonCursor passes = s.Key("passes");
  passes.ExpectArray();
  for (size_t i = 0; i < passes.Size(); ++i) {
    const JsonCursor p = passes.Index(i);
    p.ExpectObject();
    m.pass_s[p.Key("pass").IntAtLeast(0)] = p.Key("seconds").Seconds(kMaxMeasuredRunSeconds, true);
  }
  const JsonCursor reqs = s.Key("requests");
  reqs.ExpectArray();
  for (size_t i = 0; i < reqs.Size(); ++i) {
    const JsonCursor r = reqs.Index(i);
    r.ExpectObject();
    m.first_token[r.Key("request").IntAtLeast(0)] = {
        r.Key("queue_s").Seconds(kMaxMeasuredRunSeconds, true),
        r.Key("ttft_s").Seconds(kMaxMeasuredRunSeconds, true)};
  }
}

}  // namespace

Measured ParseMeasured(const std::string& text, const std::string& file) {
  const JsonInput in(file, text);
  const JsonCursor root = JsonCursor::Root(in);
  root.ExpectObject();  // other top-level keys (verified_bytes, plan, ...) are the executor's own
  Measured m;
  m.file = file;
  if (root.Has("context")) CheckMeasuredContext(root.Key("context"));
  if (root.Has("context")) m.context = root.Key("context").value();
  const JsonCursor ops = root.Key("ops");
  ops.ExpectArray();
  if (ops.Size() == 0) ops.Fail("holds no ops (nothing was measured)");
  std::unordered_map<std::string, size_t> index;
  std::set<std::pair<std::string, int64_t>> id_rank;
  for (size_t i = 0; i < ops.Size(); ++i) {
    const JsonCursor o = ops.Index(i);
    o.ExpectObject();
    const std::string id = o.Key("id").Str();
    const std::string kind = o.Key("kind").Str();
    const int64_t rank = o.Key("rank").IntAtLeast(0);
    // An evict op may take no measurable time; so may a merged prefix's gather op, whose merge
    // the executor times inside the request's compute op.
    const double s =
        o.Key("seconds").Seconds(kMaxMeasuredOpSeconds, kind != "evict" && kind != "gather");
    // A serving run's pass, time to first token and later-chunk records: the `serving` block's.
    if (kind == "pass" || kind == "ttft" || kind == "chunk") continue;
    if (!id_rank.emplace(id, rank).second)
      o.Key("rank").Fail("op '" + id + "' measured twice on rank " + std::to_string(rank));
    auto [it, fresh] = index.emplace(id, m.ops.size());
    if (fresh) {
      m.ops.push_back({id, kind, s, 1, JsonLineOf(text, o.path())});
      continue;
    }
    MeasuredOp& op = m.ops[it->second];
    if (op.kind != kind)
      o.Key("kind").Fail("op '" + id + "' is '" + op.kind + "' on another rank (line " +
                         std::to_string(op.line) + ")");
    op.seconds = std::max(op.seconds, s);
    ++op.ranks;
  }
  if (root.Has("requests")) {
    const JsonCursor reqs = root.Key("requests");
    reqs.ExpectArray();
    for (size_t i = 0; i < reqs.Size(); ++i) {
      const JsonCursor r = reqs.Index(i);
      r.ExpectObject();
      const int64_t req = r.Key("request").IntAtLeast(0);
      const double s = r.Key("seconds").Seconds(kMaxMeasuredRunSeconds, true);
      if (r.Has("rank")) r.Key("rank").IntAtLeast(0);
      auto [it, fresh] = m.request_s.emplace(req, s);
      if (!fresh) it->second = std::max(it->second, s);
    }
  }
  if (root.Has("serving")) ReadServingBlock(root.Key("serving"), m);
  if (root.Has("total_s")) m.total_s = root.Key("total_s").Seconds(kMaxMeasuredRunSeconds, true);
  if (root.Has("requests_executed"))
    m.requests_executed = root.Key("requests_executed").IntAtLeast(0);
  return m;
}

size_t KeepExecutedRequests(Predictions& pred, const Measured& meas) {
  if (!meas.requests_executed ||
      *meas.requests_executed >= static_cast<int64_t>(pred.requests.size()))
    return 0;
  const auto n = static_cast<size_t>(*meas.requests_executed);
  std::set<std::string> kept;  // "R/" prefixes of the executed requests
  pred.total_s = 0;
  for (size_t i = 0; i < n; ++i) {
    kept.insert(std::to_string(pred.requests[i].request) + "/");
    pred.total_s += pred.requests[i].service_s;
  }
  const size_t dropped = pred.requests.size() - n;
  pred.requests.resize(n);
  std::erase_if(pred.ops, [&](const OpPrediction& o) {
    return !kept.count(o.id.substr(0, o.id.find('/') + 1));
  });
  return dropped;
}

Measured ReadMeasured(const std::string& path) {
  return ParseMeasured(ReadInputFile(path, "measured file"), path);
}

ErrorStats SummarizeErrors(const std::vector<double>& ape) {
  ErrorStats s;
  s.count = ape.size();
  s.median = Percentile(ape, 0.50);
  s.p95 = Percentile(ape, 0.95);
  s.max = *std::max_element(ape.begin(), ape.end());
  return s;
}

namespace {

double Ape(double predicted, double measured) { return std::fabs(predicted - measured) / measured; }

std::string CheckPct(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%.2f%%", 100 * v);
  return b;
}

KindRow Row(const std::string& kind, const std::vector<const JoinedOp*>& ops,
            const CheckOptions& opt) {
  KindRow r;
  r.kind = kind;
  std::vector<double> ape;
  for (const JoinedOp* o : ops) {
    ape.push_back(o->ape);
    r.predicted_s += o->predicted_s;
    r.measured_s += o->measured_s;
  }
  r.stats = SummarizeErrors(ape);
  r.pass = r.stats.median <= opt.max_median && r.stats.p95 <= opt.max_p95;
  return r;
}

// The spread of ops priced alike (AlikeSpread), when there are any.
std::optional<AlikeSpread> Alike(const std::vector<const JoinedOp*>& ops) {
  std::map<double, std::vector<double>> by_price;  // predicted seconds -> measured seconds
  for (const JoinedOp* o : ops) by_price[o->predicted_s].push_back(o->measured_s);
  AlikeSpread a;
  std::vector<double> off;
  for (const auto& [price, measured] : by_price) {
    if (measured.size() < 2) continue;
    ++a.groups;
    const double median = Percentile(measured, 0.50);
    if (median <= 0) continue;
    for (const double m : measured) off.push_back(std::fabs(m / median - 1));
  }
  if (off.empty()) return std::nullopt;
  a.stats = SummarizeErrors(off);
  return a;
}

void Note(MissingIds& m, const std::string& id, size_t examples) {
  ++m.count;
  if (m.examples.size() < examples) m.examples.push_back(id);
}

// Pairs every predicted op with its measured one, in predicted order; notes ids on one side only.
// Measured evict ops are not modelled (no cost term) and are counted apart.
void JoinOps(const Predictions& pred, const Measured& meas, const CheckOptions& opt,
             CheckReport& r) {
  std::unordered_map<std::string, const MeasuredOp*> by_id;
  for (const MeasuredOp& m : meas.ops) by_id.emplace(m.id, &m);
  std::set<std::string> predicted_ids;
  for (const OpPrediction& p : pred.ops) {
    predicted_ids.insert(p.id);
    const auto it = by_id.find(p.id);
    if (it == by_id.end()) {
      Note(r.predicted_only, p.id, opt.examples);
      continue;
    }
    const MeasuredOp& m = *it->second;
    if (m.kind != p.kind)
      throw InputError(meas.file, m.line, "kind",
                       "op '" + m.id + "' is '" + m.kind + "' here but '" + p.kind +
                           "' in the predictions: are both from the same plan?");
    if (m.kind == "gather" && m.seconds == 0) {
      ++r.untimed;
      r.untimed_predicted_s += p.seconds;
      continue;
    }
    r.joined.push_back({p.id, p.kind, p.seconds, m.seconds, Ape(p.seconds, m.seconds)});
  }
  for (const MeasuredOp& m : meas.ops) {
    if (predicted_ids.count(m.id)) continue;
    if (m.kind == "evict") {
      ++r.not_modelled;
      r.not_modelled_s += m.seconds;
    } else {
      Note(r.measured_only, m.id, opt.examples);
    }
  }
}

// Whole requests: service time, predicted vs measured, appended after the ops as "R/request".
// Predicted requests count as missing only when the measured file gives any request at all.
void JoinRequests(const Predictions& pred, const Measured& meas, const CheckOptions& opt,
                  CheckReport& r) {
  std::set<int64_t> predicted_requests;
  for (const RequestPrediction& p : pred.requests) {
    predicted_requests.insert(p.request);
    const std::string id = std::to_string(p.request) + "/request";
    const auto it = meas.request_s.find(p.request);
    if (it == meas.request_s.end()) {
      if (!meas.request_s.empty()) Note(r.predicted_only, id, opt.examples);
      continue;
    }
    r.joined.push_back({id, "request", p.service_s, it->second, Ape(p.service_s, it->second)});
  }
  for (const auto& [req, s] : meas.request_s)
    if (!predicted_requests.count(req))
      Note(r.measured_only, std::to_string(req) + "/request", opt.examples);
}

// One row per op kind (by name) over the first `op_pairs` joined entries, and one for the
// requests after them when there are any.
void SummarizeRows(size_t op_pairs, const CheckOptions& opt, CheckReport& r) {
  std::map<std::string, std::vector<const JoinedOp*>> groups;
  for (size_t i = 0; i < op_pairs; ++i) groups[r.joined[i].kind].push_back(&r.joined[i]);
  for (const auto& [kind, ops] : groups) {
    r.kinds.push_back(Row(kind, ops, opt));
    r.kinds.back().alike = Alike(ops);
  }
  if (r.joined.size() > op_pairs) {
    std::vector<const JoinedOp*> reqs;
    for (size_t i = op_pairs; i < r.joined.size(); ++i) reqs.push_back(&r.joined[i]);
    r.requests = Row("request", reqs, opt);
  }
}

// Whole replay: the sum of predicted service times against the measured total, or else the sum
// of measured request seconds when every predicted request has one.
void CompareTotals(const Predictions& pred, const Measured& meas, CheckReport& r) {
  r.total_predicted_s = pred.total_s;
  if (meas.total_s) {
    r.total_available = true;
    r.total_measured_s = *meas.total_s;
  } else if (meas.request_s.empty()) {
    r.total_unavailable = "the measured file has neither total_s nor per-request seconds";
  } else {
    size_t missing = 0;
    for (const RequestPrediction& p : pred.requests) {
      const auto it = meas.request_s.find(p.request);
      if (it == meas.request_s.end())
        ++missing;
      else
        r.total_measured_s += it->second;
    }
    r.total_available = missing == 0;
    if (missing)
      r.total_unavailable =
          std::to_string(missing) + " predicted requests have no measured seconds";
  }
  if (r.total_available) r.total_error = Ape(r.total_predicted_s, r.total_measured_s);
}

// The `opt.worst` joined entries of largest APE; ties keep their joined order.
void PickWorst(const CheckOptions& opt, CheckReport& r) {
  r.worst = r.joined;
  std::stable_sort(r.worst.begin(), r.worst.end(),
                   [](const JoinedOp& a, const JoinedOp& b) { return a.ape > b.ape; });
  if (r.worst.size() > opt.worst) r.worst.resize(opt.worst);
}

void RowReasons(const KindRow& k, const CheckOptions& opt, std::vector<std::string>& reasons) {
  if (k.stats.median > opt.max_median)
    reasons.push_back(k.kind + " median APE " + CheckPct(k.stats.median) + " > " +
                      CheckPct(opt.max_median));
  if (k.stats.p95 > opt.max_p95)
    reasons.push_back(k.kind + " p95 APE " + CheckPct(k.stats.p95) + " > " + CheckPct(opt.max_p95));
}

// The verdict: pass when no row, the total or (unless allowed) a missing id gives a reason.
void Verdict(const CheckOptions& opt, CheckReport& r) {
  if (r.joined.empty()) r.reasons.push_back("no operation is on both sides: nothing to compare");
  for (const KindRow& k : r.kinds) RowReasons(k, opt, r.reasons);
  if (r.requests) RowReasons(*r.requests, opt, r.reasons);
  if (!r.total_available)
    r.reasons.push_back("whole-replay total not measured: " + r.total_unavailable);
  else if (r.total_error > opt.max_total)
    r.reasons.push_back("whole-replay total error " + CheckPct(r.total_error) + " > " +
                        CheckPct(opt.max_total));
  if (!opt.allow_missing && (r.predicted_only.count || r.measured_only.count))
    r.reasons.push_back(std::to_string(r.predicted_only.count) + " predicted ids not measured, " +
                        std::to_string(r.measured_only.count) + " measured ids not predicted");
  r.pass = r.reasons.empty();
}

}  // namespace

CheckReport RunCheck(const Predictions& pred, const Measured& meas, const CheckOptions& opt) {
  CheckReport r;
  r.options = opt;
  r.profile = pred.profile;
  r.profile_measured = pred.profile_measured;
  JoinOps(pred, meas, opt, r);
  const size_t op_pairs = r.joined.size();
  JoinRequests(pred, meas, opt, r);
  SummarizeRows(op_pairs, opt, r);
  CompareTotals(pred, meas, r);
  PickWorst(opt, r);
  Verdict(opt, r);
  return r;
}

namespace {

nlohmann::ordered_json RowJson(const KindRow& k) {
  nlohmann::ordered_json j = {{"kind", k.kind},
                              {"count", k.stats.count},
                              {"median_ape", k.stats.median},
                              {"p95_ape", k.stats.p95},
                              {"max_ape", k.stats.max},
                              {"predicted_s", k.predicted_s},
                              {"measured_s", k.measured_s},
                              {"pass", k.pass}};
  if (k.alike)
    j["alike"] = {{"groups", k.alike->groups},
                  {"count", k.alike->stats.count},
                  {"median_off", k.alike->stats.median},
                  {"p95_off", k.alike->stats.p95},
                  {"max_off", k.alike->stats.max}};
  return j;
}

nlohmann::ordered_json OpJson(const JoinedOp& o) {
  return {{"id", o.id},
          {"kind", o.kind},
          {"predicted_s", o.predicted_s},
          {"measured_s", o.measured_s},
          {"ape", o.ape}};
}

}  // namespace

nlohmann::ordered_json CheckReportToJson(const CheckReport& r) {
  nlohmann::ordered_json j;
  j["verdict"] = r.pass ? "pass" : "fail";
  j["reasons"] = r.reasons;
  j["thresholds"] = {{"max_median_ape", r.options.max_median},
                     {"max_p95_ape", r.options.max_p95},
                     {"max_total_error", r.options.max_total},
                     {"allow_missing", r.options.allow_missing}};
  j["profile"] = JsonSafeText(r.profile);
  j["profile_measured"] = r.profile_measured;
  nlohmann::ordered_json kinds = nlohmann::ordered_json::array();
  for (const KindRow& k : r.kinds) kinds.push_back(RowJson(k));
  j["kinds"] = kinds;
  j["requests"] = r.requests ? RowJson(*r.requests) : nlohmann::ordered_json(nullptr);
  j["total"] = {
      {"available", r.total_available},
      {"predicted_s", r.total_predicted_s},
      {"measured_s", r.total_available ? nlohmann::ordered_json(r.total_measured_s) : nullptr},
      {"error", r.total_available ? nlohmann::ordered_json(r.total_error) : nullptr},
      {"why_unavailable", r.total_unavailable}};
  j["missing"] = {{"predicted_only",
                   {{"count", r.predicted_only.count}, {"examples", r.predicted_only.examples}}},
                  {"measured_only",
                   {{"count", r.measured_only.count}, {"examples", r.measured_only.examples}}}};
  j["not_modelled"] = {
      {"kind", "evict"}, {"count", r.not_modelled}, {"measured_s", r.not_modelled_s}};
  j["untimed"] = {{"kind", "gather"}, {"count", r.untimed}, {"predicted_s", r.untimed_predicted_s}};
  nlohmann::ordered_json worst = nlohmann::ordered_json::array();
  for (const JoinedOp& o : r.worst) worst.push_back(OpJson(o));
  j["worst"] = worst;
  nlohmann::ordered_json points = nlohmann::ordered_json::array();
  for (const JoinedOp& o : r.joined) points.push_back(OpJson(o));
  j["points"] = points;
  return j;
}

std::string FormatCheckReport(const CheckReport& r) {
  std::ostringstream o;
  char line[512];
  o << "predicted by profile '" << r.profile << "'" << (r.profile_measured ? "" : " (not measured)")
    << "\n";
  std::snprintf(line, sizeof line, "%-12s %7s %10s %10s %10s %13s %13s  %s\n", "kind", "count",
                "median", "p95", "max", "predicted_s", "measured_s", "verdict");
  o << line;
  auto row = [&](const KindRow& k) {
    std::snprintf(line, sizeof line, "%-12s %7zu %10s %10s %10s %13.6g %13.6g  %s\n",
                  k.kind.c_str(), k.stats.count, CheckPct(k.stats.median).c_str(),
                  CheckPct(k.stats.p95).c_str(), CheckPct(k.stats.max).c_str(), k.predicted_s,
                  k.measured_s, k.pass ? "pass" : "FAIL");
    o << line;
  };
  for (const KindRow& k : r.kinds) row(k);
  if (r.requests)
    row(*r.requests);
  else
    o << "request      (no per-request measured seconds)\n";
  for (const KindRow& k : r.kinds) {
    if (!k.alike) continue;
    std::snprintf(line, sizeof line,
                  "%s: %zu ops in %zu groups priced alike were measured a median %s (p95 %s) off "
                  "their group's median: no one price per group does better on them\n",
                  k.kind.c_str(), k.alike->stats.count, k.alike->groups,
                  CheckPct(k.alike->stats.median).c_str(), CheckPct(k.alike->stats.p95).c_str());
    o << line;
  }
  if (r.total_available) {
    std::snprintf(line, sizeof line,
                  "whole replay: predicted %.6g s, measured %.6g s, error %s (max %s): %s\n",
                  r.total_predicted_s, r.total_measured_s, CheckPct(r.total_error).c_str(),
                  CheckPct(r.options.max_total).c_str(),
                  r.total_error <= r.options.max_total ? "pass" : "FAIL");
    o << line;
  } else {
    o << "whole replay: predicted " << r.total_predicted_s << " s, not measured ("
      << r.total_unavailable << ")\n";
  }
  auto missing = [&](const char* what, const MissingIds& m) {
    o << what << ": " << m.count;
    if (m.count) {
      o << " (e.g.";
      for (const auto& id : m.examples) o << " " << id;
      o << (m.count > m.examples.size() ? " ...)" : ")");
    }
    o << "\n";
  };
  missing("predicted ids not measured", r.predicted_only);
  missing("measured ids not predicted", r.measured_only);
  if (r.not_modelled)
    o << "not modelled: " << r.not_modelled << " evict ops (" << r.not_modelled_s
      << " s measured in total), no cost term, left out\n";
  if (r.untimed)
    o << "untimed: " << r.untimed << " gather ops measured 0 s (" << r.untimed_predicted_s
      << " s predicted in total; a merged prefix's merge is timed in its compute op), left out\n";
  if (!r.worst.empty()) {
    o << "worst operations:\n";
    for (const JoinedOp& w : r.worst) {
      std::snprintf(line, sizeof line,
                    "  %-28s %-11s predicted %11.4g s  measured %11.4g s  APE %s\n", w.id.c_str(),
                    w.kind.c_str(), w.predicted_s, w.measured_s, CheckPct(w.ape).c_str());
      o << line;
    }
  }
  o << "verdict: " << (r.pass ? "PASS" : "FAIL");
  for (size_t i = 0; i < r.reasons.size(); ++i) o << (i ? "; " : " (") << r.reasons[i];
  o << (r.reasons.empty() ? "" : ")") << "\n";
  return o.str();
}

}  // namespace kvlanes
