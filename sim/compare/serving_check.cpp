#include "sim/compare/serving_check.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <limits>
#include <map>
#include <numeric>
#include <utility>

#include "base/percentile.h"
#include "io/input_error.h"
#include "sim/engine/scheduler.h"

namespace kvlanes {

namespace {

double ServingApe(double predicted, double measured) {
  return measured > 0 ? std::fabs(predicted - measured) / measured : 0.0;
}

// The schedule of fixed passes: a pass starts at the later of the previous one's end and the
// arrival of the last request it admits, and takes pass_s(k, gap) seconds, gap the idle time
// before it (infinite for the first); a request's queue ends with the start of its first pass,
// its first token with the end of the pass of its last chunk. Each pass's seconds go to `taken`.
void FixedPassSchedule(const std::vector<RequestPlan>& requests,
                       const std::vector<PlanPass>& passes, double rate_scale,
                       const std::function<double(size_t, double)>& pass_s,
                       std::vector<double>& taken, std::vector<double>& queue,
                       std::vector<double>& ttft) {
  std::map<int64_t, size_t> at;
  std::vector<int64_t> ns;
  for (size_t i = 0; i < requests.size(); ++i) {
    at[requests[i].request] = i;
    ns.push_back(ServedArrivalNs(requests[i].arrival_ns, rate_scale));
  }
  const int64_t origin = ns.empty() ? 0 : *std::min_element(ns.begin(), ns.end());
  const auto arrival = [&](size_t i) { return static_cast<double>(ns[i] - origin) * 1e-9; };
  queue.assign(requests.size(), -1);
  ttft.assign(requests.size(), -1);
  double end = 0;
  taken.clear();
  for (size_t k = 0; k < passes.size(); ++k) {
    double start = end;
    for (const PlanPassChunk& c : passes[k].chunks)
      if (const size_t i = at.at(c.request); queue[i] < 0) start = std::max(start, arrival(i));
    taken.push_back(pass_s(k, k == 0 ? std::numeric_limits<double>::infinity() : start - end));
    end = start + taken.back();
    for (const PlanPassChunk& c : passes[k].chunks) {
      const size_t i = at.at(c.request);
      if (queue[i] < 0) queue[i] = start - arrival(i);
      ttft[i] = end - arrival(i);  // the last pass that holds a chunk of it sets it last
    }
  }
}

// The quartiles of measured / predicted per pass and the passes of the largest APE.
void SummarizePasses(const ServingSchedule& s, const std::vector<double>& ape, ServingCheck& c) {
  std::vector<double> ratio;
  for (const auto& p : c.pass_points) ratio.push_back(p[0] > 0 ? p[1] / p[0] : 0);
  const double q[3] = {0.25, 0.5, 0.75};
  for (int k = 0; k < 3; ++k) c.pass_ratio[k] = Percentile(ratio, q[k]);
  if (s.back_to_back.size() == ratio.size()) {
    std::vector<double> part[2];
    for (size_t k = 0; k < ratio.size(); ++k) part[s.back_to_back[k] ? 1 : 0].push_back(ratio[k]);
    for (int b = 0; b < 2; ++b)
      c.pass_ratio_by_gap[b] = {part[b].size(), part[b].empty() ? 0 : Percentile(part[b], 0.5)};
  }
  std::vector<size_t> order(ape.size());
  std::iota(order.begin(), order.end(), size_t{0});
  // Largest APE first; ties by pass index, so the list is the same on every run.
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return ape[a] > ape[b]; });
  order.resize(std::min(order.size(), ServingCheck::kWorstPasses));
  for (const size_t k : order) {
    ServingCheck::Pass w;
    w.index = k;
    if (k < s.pass_tokens.size()) w.tokens = s.pass_tokens[k];
    if (k < s.pass_chunks.size()) w.chunks = s.pass_chunks[k];
    w.predicted_s = c.pass_points[k][0];
    w.measured_s = c.pass_points[k][1];
    c.worst_passes.push_back(w);
  }
}

}  // namespace

ServingSchedule PredictServing(const CostModel& model, const std::vector<RequestPlan>& requests,
                               const std::vector<PlanPass>& passes, double rate_scale) {
  const CostModelForward cost(model);
  std::map<int64_t, const RequestPlan*> by_number;
  for (const RequestPlan& r : requests) by_number[r.request] = &r;
  ServingSchedule s;
  std::map<int64_t, bool> started;
  // Per pass its seconds after an idle gap and back to back (its compute at the sustained clock),
  // each summed in the order of ServingReplay::StartPass.
  std::vector<double> fresh, back_to_back;
  for (const PlanPass& p : passes) {
    std::vector<int64_t> tokens;
    std::vector<PricedChunk> chunks;
    for (const PlanPassChunk& c : p.chunks) {
      tokens.push_back(c.tokens);
      chunks.push_back({c.tokens, c.context, cost.ChunkS(c.tokens, c.context)});
    }
    s.pass_tokens.push_back(std::accumulate(tokens.begin(), tokens.end(), int64_t{0}));
    s.pass_chunks.push_back(static_cast<int64_t>(p.chunks.size()));
    const double ratio = cost.SustainedRatio(chunks);
    std::vector<double> extra;  // per chunk: its request's extra when the pass starts it
    for (const PlanPassChunk& c : p.chunks) {
      extra.push_back(started[c.request] ? 0
                                         : cost.RequestExtraS(*by_number.at(c.request)).total_s);
      started[c.request] = true;
    }
    for (int sustained = 0; sustained < 2; ++sustained) {
      const double f = sustained ? ratio : 1.0;
      double t = f * cost.PassBaseS();
      t += f * cost.PassBatchS(tokens);
      for (size_t i = 0; i < p.chunks.size(); ++i) {
        t += f * chunks[i].chunk_s;
        if (extra[i] > 0) t += extra[i];
      }
      (sustained ? back_to_back : fresh).push_back(t);
    }
  }
  // Which passes run back to back: by the profile's gap, its default where it has no ratios.
  const double gap_s =
      cost.SustainedGapS() >= 0 ? cost.SustainedGapS() : HardwareProfile::kDefaultSustainedGapS;
  const auto pass_s = [&](size_t k, double gap) {
    s.back_to_back.push_back(gap < gap_s);
    return gap < gap_s ? back_to_back[k] : fresh[k];
  };
  FixedPassSchedule(requests, passes, rate_scale, pass_s, s.pass_s, s.queue_s, s.ttft_s);
  return s;
}

ServingCheck CheckServing(const ServingSchedule& s, const std::vector<RequestPlan>& requests,
                          const Measured& meas) {
  ServingCheck c;
  std::vector<double> pass_ape;
  for (size_t k = 0; k < s.pass_s.size(); ++k) {
    const auto m = meas.pass_s.find(static_cast<int64_t>(k));
    if (m == meas.pass_s.end())
      throw InputError(meas.file, 0, "serving.passes",
                       "pass " + std::to_string(k) + " of the plan was not measured");
    pass_ape.push_back(ServingApe(s.pass_s[k], m->second));
    c.pass_points.push_back({s.pass_s[k], m->second});
    c.predicted_pass_s += s.pass_s[k];
    c.measured_pass_s += m->second;
  }
  std::vector<double> ttft_ape, pred, got, queue_pred, queue_got;
  for (size_t i = 0; i < requests.size(); ++i) {
    const auto m = meas.first_token.find(requests[i].request);
    if (m == meas.first_token.end())
      throw InputError(meas.file, 0, "serving.requests",
                       "request " + std::to_string(requests[i].request) +
                           " has no time to first "
                           "token");
    ttft_ape.push_back(ServingApe(s.ttft_s[i], m->second[1]));
    pred.push_back(s.ttft_s[i]);
    got.push_back(m->second[1]);
    queue_pred.push_back(s.queue_s[i]);
    queue_got.push_back(m->second[0]);
    c.ttft_points.push_back({s.ttft_s[i], m->second[1]});
  }
  c.passes = pass_ape.size();
  c.requests = ttft_ape.size();
  if (!pass_ape.empty()) {
    c.pass_error = SummarizeErrors(pass_ape);
    SummarizePasses(s, pass_ape, c);
  }
  if (!ttft_ape.empty()) {
    c.ttft_error = SummarizeErrors(ttft_ape);
    const double q[3] = {0.5, 0.9, 0.99};
    for (int k = 0; k < 3; ++k) {
      c.ttft_pred[k] = Percentile(pred, q[k]);
      c.ttft_meas[k] = Percentile(got, q[k]);
    }
    for (size_t i = 0; i < queue_pred.size(); ++i) {
      c.queue_pred += queue_pred[i] / static_cast<double>(queue_pred.size());
      c.queue_meas += queue_got[i] / static_cast<double>(queue_got.size());
    }
  }
  return c;
}

void KeepServingComparable(const ServingCheck& c, Predictions& pred, Measured& meas) {
  std::erase_if(pred.ops, [](const OpPrediction& o) { return o.kind == "compute"; });
  std::erase_if(meas.ops, [](const MeasuredOp& o) { return o.kind == "compute"; });
  pred.requests.clear();
  meas.request_s.clear();
  pred.total_s = c.predicted_pass_s;
  meas.total_s = c.measured_pass_s;
}

void AddServingVerdict(const ServingCheck& c, const CheckOptions& opt, CheckReport& r) {
  const auto pct = [](double x) {
    char b[32];
    std::snprintf(b, sizeof b, "%.2f%%", 100 * x);
    return std::string(b);
  };
  const auto over = [&](const std::string& what, double got, double limit) {
    if (got > limit) r.reasons.push_back(what + " " + pct(got) + " > " + pct(limit));
  };
  over("serving pass median APE", c.pass_error.median, opt.max_median);
  over("serving pass p95 APE", c.pass_error.p95, opt.max_p95);
  const char* names[3] = {"p50", "p90", "p99"};
  for (int k = 0; k < 3; ++k)
    over(std::string("serving TTFT ") + names[k] + " error",
         ServingApe(c.ttft_pred[k], c.ttft_meas[k]), opt.max_total);
  over("serving queue mean error", ServingApe(c.queue_pred, c.queue_meas), opt.max_p95);
  r.pass = r.reasons.empty();
}

nlohmann::ordered_json ServingCheckToJson(const ServingCheck& c) {
  const auto stats = [](const ErrorStats& e) {
    return nlohmann::ordered_json{
        {"count", e.count}, {"median_ape", e.median}, {"p95_ape", e.p95}, {"max_ape", e.max}};
  };
  nlohmann::ordered_json j;
  j["passes"] = stats(c.pass_error);
  j["passes"]["predicted_s"] = c.predicted_pass_s;
  j["passes"]["measured_s"] = c.measured_pass_s;
  j["ttft"] = stats(c.ttft_error);
  const char* names[3] = {"p50", "p90", "p99"};
  for (int k = 0; k < 3; ++k)
    j["ttft"][names[k]] = {{"predicted_s", c.ttft_pred[k]},
                           {"measured_s", c.ttft_meas[k]},
                           {"error", ServingApe(c.ttft_pred[k], c.ttft_meas[k])}};
  j["queue_mean"] = {{"predicted_s", c.queue_pred},
                     {"measured_s", c.queue_meas},
                     {"error", ServingApe(c.queue_pred, c.queue_meas)}};
  nlohmann::ordered_json pts = nlohmann::ordered_json::array();
  for (const auto& p : c.ttft_points) pts.push_back({p[0], p[1]});
  j["ttft_points"] = std::move(pts);
  nlohmann::ordered_json passes = nlohmann::ordered_json::array();
  for (const auto& p : c.pass_points) passes.push_back({p[0], p[1]});
  j["pass_points"] = std::move(passes);
  j["pass_ratio"] = {{"q1", c.pass_ratio[0]}, {"median", c.pass_ratio[1]}, {"q3", c.pass_ratio[2]}};
  const char* parts[2] = {"after_gap", "back_to_back"};
  for (int b = 0; b < 2; ++b)
    j["pass_ratio"][parts[b]] = {{"passes", c.pass_ratio_by_gap[b].count},
                                 {"median", c.pass_ratio_by_gap[b].median}};
  nlohmann::ordered_json worst = nlohmann::ordered_json::array();
  for (const ServingCheck::Pass& w : c.worst_passes)
    worst.push_back({{"pass", w.index},
                     {"tokens", w.tokens},
                     {"chunks", w.chunks},
                     {"predicted_s", w.predicted_s},
                     {"measured_s", w.measured_s},
                     {"ape", ServingApe(w.predicted_s, w.measured_s)}});
  j["worst_passes"] = std::move(worst);
  return j;
}

std::string FormatServingCheck(const ServingCheck& c) {
  char buf[512];
  std::string out = "serving passes (one replica's schedule, passes as serving mode formed them)\n";
  std::snprintf(buf, sizeof buf,
                "  %zu passes: predicted %.6g s, measured %.6g s; pass APE median %.2f%%, p95 "
                "%.2f%%, max %.2f%%\n",
                c.passes, c.predicted_pass_s, c.measured_pass_s, 100 * c.pass_error.median,
                100 * c.pass_error.p95, 100 * c.pass_error.max);
  out += buf;
  if (c.passes > 0) {
    std::snprintf(buf, sizeof buf,
                  "  measured / predicted per pass: q1 %.3f, median %.3f, q3 %.3f\n",
                  c.pass_ratio[0], c.pass_ratio[1], c.pass_ratio[2]);
    out += buf;
    const ServingCheck::RatioPart& a = c.pass_ratio_by_gap[0];
    const ServingCheck::RatioPart& b = c.pass_ratio_by_gap[1];
    if (a.count + b.count > 0) {
      std::snprintf(buf, sizeof buf,
                    "    median after an idle gap %.3f (%zu passes), back to back %.3f (%zu)\n",
                    a.median, a.count, b.median, b.count);
      out += buf;
    }
  }
  if (!c.worst_passes.empty()) out += "  the passes furthest off:\n";
  for (const ServingCheck::Pass& w : c.worst_passes) {
    std::snprintf(buf, sizeof buf,
                  "    pass %zu (%lld tokens in %lld chunk%s): predicted %.4f s, measured %.4f s, "
                  "APE %.2f%%\n",
                  w.index, static_cast<long long>(w.tokens), static_cast<long long>(w.chunks),
                  w.chunks == 1 ? "" : "s", w.predicted_s, w.measured_s,
                  100 * ServingApe(w.predicted_s, w.measured_s));
    out += buf;
  }
  const char* names[3] = {"p50", "p90", "p99"};
  for (int k = 0; k < 3; ++k) {
    std::snprintf(buf, sizeof buf, "  TTFT %s predicted %.4f s, measured %.4f s, error %.2f%%\n",
                  names[k], c.ttft_pred[k], c.ttft_meas[k],
                  100 * ServingApe(c.ttft_pred[k], c.ttft_meas[k]));
    out += buf;
  }
  std::snprintf(buf, sizeof buf,
                "  queue mean predicted %.4f s, measured %.4f s, error %.2f%%; per-request TTFT "
                "APE median %.2f%%, p95 %.2f%% (%zu requests)\n",
                c.queue_pred, c.queue_meas, 100 * ServingApe(c.queue_pred, c.queue_meas),
                100 * c.ttft_error.median, 100 * c.ttft_error.p95, c.requests);
  out += buf;
  return out;
}

}  // namespace kvlanes
