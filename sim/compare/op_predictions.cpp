#include "sim/compare/op_predictions.h"

#include <fstream>
#include <map>
#include <sstream>

#include "io/input_error.h"
#include "io/input_file.h"
#include "io/json_location.h"
#include "methods/gather_method.h"
#include "sim/predict/predictor.h"

namespace kvlanes {
namespace {

// One op per lane and pool, ids as in sim/predict/plan.cpp. `per_copy` gives the seconds of one
// lane's copies in one pool from that lane's bytes in the pool and its page count.
template <typename Fn>
void CopyOps(std::vector<OpPrediction>& out, const std::vector<LaneCopy>& copies,
             const ReplayConfig& cfg, const std::string& pre, const char* kind, Fn per_copy) {
  for (const LaneCopy& c : copies)
    for (size_t k = 0; k < cfg.model.pools.size(); ++k) {
      // Bytes of this lane's pages in pool k, one layer.
      const double layer_bytes = static_cast<double>(cfg.model.pools[k].bytes_per_token_layer) *
                                 static_cast<double>(cfg.cache.page_tokens) *
                                 static_cast<double>(c.pages.size());
      out.push_back({pre + kind + "/l" + std::to_string(c.lane) + "/" + cfg.model.pools[k].name,
                     kind, per_copy(layer_bytes, static_cast<double>(c.pages.size()))});
    }
}

}  // namespace

std::vector<OpPrediction> PredictOps(const CostModel& m, const ReplayConfig& cfg,
                                     const RequestPlan& p, const RequestCost* scheduled) {
  const HardwareProfile& hw = m.hw();
  const double layers = static_cast<double>(m.layers());
  const std::string pre = std::to_string(p.request) + "/";
  std::vector<OpPrediction> out;
  // An op's seconds are its device time, as the executor measures them: the host's submission
  // (copy_submit_s) runs ahead of the device and is not part of them; the request schedule
  // (CostModel::Request) still charges it.
  const auto lat = [&](double pages, double nl) { return m.CopyLatencyS(pages, nl); };
  // Each kind's stretch from the request schedule: 1 (untouched) where nothing overlapped.
  const auto by = [&](double RequestCost::*stretch) {
    return [scheduled, stretch](double s) {
      return scheduled && scheduled->*stretch != 1 ? s * (scheduled->*stretch) : s;
    };
  };
  const auto load_x = by(&RequestCost::load_back_stretch);
  const auto gather_x = by(&RequestCost::gather_stretch);
  const auto compute_x = by(&RequestCost::compute_stretch);
  const auto backup_x = by(&RequestCost::backup_stretch);
  // Write-back at eviction: one copy of all layers per pool (latency + bytes / d2h).
  CopyOps(out, p.write_back, cfg, pre, "write_back", [&](double b, double pages) {
    return lat(pages, layers) + b * layers / (hw.d2h_gbps * 1e9);
  });
  // Load-back: one copy per layer per pool (CostModel::LoadBackCopyS); before a gather that
  // reads peers' pools (p2p), one copy of every layer per pool instead (the executor loads them
  // all first; the request schedule's load_all_first).
  const bool load_all_first = p.prefix_pages > 0 && GatherMethodOf(p.gather_method).ReadsPeers();
  for (const LaneCopy& c : p.load_back) {
    const double runs = static_cast<double>(SlotRuns(c));
    CopyOps(out, {c}, cfg, pre, "load_back", [&](double b, double pages) {
      if (load_all_first) return load_x(m.LoadBackCopyS(pages, layers, b * layers, runs));
      return load_x(layers * m.LoadBackCopyS(pages, 1, b, runs));
    });
  }
  out.push_back({pre + "compute", "compute",
                 compute_x(layers * m.ComputeLayerS(p.computed_tokens,
                                                    p.prefix_pages * cfg.cache.page_tokens))});
  if (p.prefix_pages > 0) {
    // The layers (the first and the ones after it); the index upload (once_s) is set-up.
    const GatherCost g = m.Gather(p.gather_method, p.shard_pages, p.prefix_pages);
    out.push_back({pre + "gather", "gather", gather_x(g.LayersS(m.layers()))});
  }
  // Backup: per-layer = one copy per layer per pool; tail = one copy of all layers per pool; each
  // pool's copy has as many entries per layer as the lane's slots have runs.
  for (const LaneCopy& c : p.backup) {
    const double runs = static_cast<double>(SlotRuns(c));
    CopyOps(out, {c}, cfg, pre, "backup", [&](double b, double pages) {
      if (p.backup_schedule == BackupSchedule::kPerLayer)
        return backup_x(layers * m.BackupCopyS(BackupSchedule::kPerLayer, pages, 1, b, runs));
      return backup_x(m.BackupCopyS(BackupSchedule::kTail, pages, layers, b * layers, runs));
    });
  }
  return out;
}

Predictions PredictPlan(const CostModel& m, const ReplayConfig& cfg,
                        const std::vector<RequestPlan>& requests) {
  Predictions out;
  out.profile = m.hw().name;
  out.profile_measured = m.hw().measured;
  Predictor pred(m, nullptr);
  double free_at = 0;
  for (const RequestPlan& p : requests) {
    const RequestCost& c = pred.Add(p);
    for (OpPrediction& op : PredictOps(m, cfg, p, &c)) out.ops.push_back(std::move(op));
    // The same schedule as the Predictor's: start = max(arrival, previous finish).
    const double arrival = static_cast<double>(p.arrival_ns) * 1e-9;
    free_at = std::max(arrival, free_at) + c.service_s;
    out.requests.push_back({p.request, p.arrival_ns, c.service_s, free_at - arrival});
    out.total_s += c.service_s;
  }
  return out;
}

nlohmann::ordered_json PredictionsToJson(const Predictions& p) {
  nlohmann::ordered_json j;
  j["kvlanes_predictions"] = kPredictionsVersion;
  j["profile"] = JsonSafeText(p.profile);
  j["profile_measured"] = p.profile_measured;
  j["total_s"] = p.total_s;
  nlohmann::ordered_json reqs = nlohmann::ordered_json::array();
  for (const RequestPrediction& r : p.requests)
    reqs.push_back({{"request", r.request},
                    {"arrival_ns", r.arrival_ns},
                    {"service_s", r.service_s},
                    {"ttft_s", r.ttft_s}});
  j["requests"] = reqs;
  nlohmann::ordered_json ops = nlohmann::ordered_json::array();
  for (const OpPrediction& o : p.ops)
    ops.push_back({{"id", o.id}, {"kind", o.kind}, {"seconds", o.seconds}});
  j["ops"] = ops;
  return j;
}

Predictions ParsePredictions(const std::string& text, const std::string& file) {
  const JsonInput in(file, text);
  const JsonCursor root = JsonCursor::Root(in);
  root.OnlyKeys(
      {"kvlanes_predictions", "profile", "profile_measured", "total_s", "requests", "ops"});
  const int64_t version = root.Key("kvlanes_predictions").Int();
  if (version != kPredictionsVersion)
    root.Key("kvlanes_predictions")
        .Fail("predictions format version " + std::to_string(version) +
              ", this build reads version " + std::to_string(kPredictionsVersion));
  Predictions p;
  p.profile = root.Key("profile").Str();
  p.profile_measured = root.Key("profile_measured").Bool();
  p.total_s = root.Key("total_s").NumAtLeast(0, false);
  const JsonCursor reqs = root.Key("requests");
  reqs.ExpectArray();
  for (size_t i = 0; i < reqs.Size(); ++i) {
    const JsonCursor r = reqs.Index(i);
    r.OnlyKeys({"request", "arrival_ns", "service_s", "ttft_s"});
    p.requests.push_back({r.Key("request").IntAtLeast(0), r.Key("arrival_ns").Int(),
                          r.Key("service_s").NumAtLeast(0, false),
                          r.Key("ttft_s").NumAtLeast(0, false)});
  }
  const JsonCursor ops = root.Key("ops");
  ops.ExpectArray();
  if (ops.Size() == 0) ops.Fail("holds no ops (nothing was predicted)");
  std::map<std::string, size_t> seen;
  for (size_t i = 0; i < ops.Size(); ++i) {
    const JsonCursor o = ops.Index(i);
    o.OnlyKeys({"id", "kind", "seconds"});
    OpPrediction op{o.Key("id").Str(), o.Key("kind").Str(), o.Key("seconds").NumAtLeast(0, false)};
    if (!seen.emplace(op.id, i).second)
      o.Key("id").Fail("duplicate op id '" + op.id + "' (first at ops[" +
                       std::to_string(seen[op.id]) + "])");
    p.ops.push_back(std::move(op));
  }
  return p;
}

Predictions ReadPredictions(const std::string& path) {
  return ParsePredictions(ReadInputFile(path, "predictions file"), path);
}

}  // namespace kvlanes
