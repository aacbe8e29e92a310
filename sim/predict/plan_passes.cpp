#include "sim/predict/plan_passes.h"

#include <algorithm>
#include <map>
#include <set>
#include <utility>

#include "io/input_error.h"
#include "sim/predict/plan.h"

namespace kvlanes {

namespace {

// Bounds of a pass line's numbers: a pass's time within ~292 years of ns, its chunks within
// the tokens a plan's request may hold (the request line's own bound).
constexpr int64_t kMaxPassNs = int64_t{1} << 62;
constexpr int64_t kMaxPassTokens = int64_t{1} << 40;
constexpr double kMaxPassLayerSpinSeconds = 3600;

struct PassField {
  const std::string& file;
  int64_t line;
  [[noreturn]] void Fail(const std::string& field, const std::string& msg) const {
    throw InputError(file, line, field, msg);
  }
  int64_t IntIn(const nlohmann::json& j, const char* key, int64_t lo, int64_t hi) const {
    if (!j.contains(key)) Fail(std::string("pass.") + key, "missing");
    const auto& v = j.at(key);
    if (!v.is_number_integer() || (v.is_number_unsigned() && v.get<uint64_t>() > INT64_MAX))
      Fail(std::string("pass.") + key, "expected an integer, got " + v.dump());
    const int64_t x = v.get<int64_t>();
    if (x < lo || x > hi)
      Fail(std::string("pass.") + key,
           std::to_string(x) + " outside " + std::to_string(lo) + ".." + std::to_string(hi));
    return x;
  }
};

}  // namespace

double PassLayerS(const std::vector<PlanPassChunk>& chunks, double layer_base_s) {
  double s = layer_base_s;
  for (const PlanPassChunk& c : chunks) s += c.layer_spin_s - layer_base_s;
  return std::max(s, layer_base_s);
}

void AppendPassLine(const PlanPass& p, std::string& out) {
  nlohmann::ordered_json chunks = nlohmann::ordered_json::array();
  for (const PlanPassChunk& c : p.chunks)
    chunks.push_back({c.request, c.tokens, c.context, c.layer_spin_s});
  nlohmann::ordered_json j;
  j["pass"] = {{"replica", p.replica},           {"index", p.index},
               {"start_ns", p.start_ns},         {"predicted_ns", p.predicted_ns},
               {"layer_spin_s", p.layer_spin_s}, {"chunks", std::move(chunks)}};
  out += j.dump();
  out.push_back('\n');
}

bool IsPassLine(const nlohmann::json& j) { return j.is_object() && j.contains("pass"); }

PlanPass PassFromJson(const nlohmann::json& line, const std::string& file, int64_t n) {
  const PassField f{file, n};
  const nlohmann::json& j = line.at("pass");
  if (!j.is_object()) f.Fail("pass", "expected an object");
  if (line.size() != 1) f.Fail("pass", "a pass line holds the key \"pass\" alone");
  PlanPass p;
  p.replica = f.IntIn(j, "replica", 0, INT32_MAX);
  p.index = f.IntIn(j, "index", 0, kMaxPassNs);
  p.start_ns = f.IntIn(j, "start_ns", 0, kMaxPassNs);
  p.predicted_ns = f.IntIn(j, "predicted_ns", 1, kMaxPassNs);
  if (!j.contains("layer_spin_s") || !j["layer_spin_s"].is_number() ||
      !(j["layer_spin_s"].get<double>() >= 0) ||
      !(j["layer_spin_s"].get<double>() <= kMaxPassLayerSpinSeconds))
    f.Fail("pass.layer_spin_s",
           "expected seconds in 0..3600, got " +
               (j.contains("layer_spin_s") ? j["layer_spin_s"].dump() : std::string("nothing")));
  p.layer_spin_s = j["layer_spin_s"].get<double>();
  if (!j.contains("chunks") || !j["chunks"].is_array() || j["chunks"].empty())
    f.Fail("pass.chunks", "expected a non-empty list of [request, tokens, context, layer_spin_s]");
  for (const auto& c : j["chunks"]) {
    if (!c.is_array() || c.size() != 4)
      f.Fail("pass.chunks",
             "expected [request, tokens, context, layer_spin_s] lists, got " + c.dump());
    for (size_t k = 0; k < 3; ++k)
      if (!c[k].is_number_unsigned() ||
          c[k].get<uint64_t>() > static_cast<uint64_t>(kMaxPassTokens))
        f.Fail("pass.chunks", "expected integers in 0..2^40 before the spin, got " + c.dump());
    if (!c[3].is_number() || !(c[3].get<double>() >= 0) ||
        !(c[3].get<double>() <= kMaxPassLayerSpinSeconds))
      f.Fail("pass.chunks", "expected a chunk's layer_spin_s in 0..3600 s, got " + c.dump());
    p.chunks.push_back(PlanPassChunk{c[0].get<int64_t>(), c[1].get<int64_t>(), c[2].get<int64_t>(),
                                     c[3].get<double>()});
  }
  return p;
}

void KeepPassesOf(std::vector<PlanPass>& passes, const std::vector<RequestPlan>& requests,
                  double layer_base_s) {
  std::set<int64_t> kept;
  for (const RequestPlan& r : requests) kept.insert(r.request);
  std::vector<PlanPass> out;
  for (PlanPass& p : passes) {
    const size_t before = p.chunks.size();
    std::erase_if(p.chunks, [&](const PlanPassChunk& c) { return !kept.count(c.request); });
    if (p.chunks.empty()) continue;
    p.index = static_cast<int64_t>(out.size());
    // A pass that keeps every chunk keeps its spin (with what a profile's batched-pass GEMMs add
    // beyond PassLayerS); a pass that lost some is summed again without that term.
    if (p.chunks.size() != before) p.layer_spin_s = PassLayerS(p.chunks, layer_base_s);
    out.push_back(std::move(p));
  }
  passes = std::move(out);
}

void CheckPlanPasses(const std::vector<RequestPlan>& requests, const std::vector<PlanPass>& passes,
                     const std::vector<int64_t>& lines, double rate_scale,
                     const std::string& file) {
  if (passes.empty()) return;
  std::map<std::pair<int64_t, int64_t>, const RequestPlan*> by_id;
  for (const RequestPlan& r : requests) by_id[{r.replica, r.request}] = &r;
  struct Seen {
    int64_t next_context = 0, tokens = 0;
  };
  std::map<std::pair<int64_t, int64_t>, Seen> seen;  // (replica, request): its chunks so far
  std::map<int64_t, const PlanPass*> last;           // replica: its latest pass
  for (size_t k = 0; k < passes.size(); ++k) {
    const PlanPass& p = passes[k];
    const PassField f{file, lines[k]};
    const PlanPass* prev = last[p.replica];
    const int64_t want = prev ? prev->index + 1 : 0;
    if (p.index != want)
      f.Fail("pass.index", "pass " + std::to_string(p.index) + " of replica " +
                               std::to_string(p.replica) + ", expected " + std::to_string(want));
    if (prev && p.start_ns < prev->start_ns + prev->predicted_ns)
      f.Fail("pass.start_ns", "starts at " + std::to_string(p.start_ns) +
                                  " ns, before the replica's previous pass ends (" +
                                  std::to_string(prev->start_ns + prev->predicted_ns) + " ns)");
    last[p.replica] = &p;
    for (const PlanPassChunk& c : p.chunks) {
      const auto it = by_id.find({p.replica, c.request});
      if (it == by_id.end())
        f.Fail("pass.chunks", "request " + std::to_string(c.request) + " of replica " +
                                  std::to_string(p.replica) + " has no request line");
      const RequestPlan& r = *it->second;
      auto [s, first] = seen.try_emplace({p.replica, c.request}, Seen{c.context, 0});
      const int64_t arrival = ServedArrivalNs(r.arrival_ns, rate_scale);
      if (first && p.start_ns < arrival)
        f.Fail("pass.start_ns", "pass " + std::to_string(p.index) + " starts at " +
                                    std::to_string(p.start_ns) + " ns, before its request " +
                                    std::to_string(c.request) + " arrives (" +
                                    std::to_string(arrival) + " ns)");
      if (c.context != s->second.next_context)
        f.Fail("pass.chunks", "request " + std::to_string(c.request) + "'s chunk has context " +
                                  std::to_string(c.context) + ", its earlier chunks end at " +
                                  std::to_string(s->second.next_context));
      s->second.next_context = c.context + c.tokens;
      s->second.tokens += c.tokens;
      if (s->second.tokens > r.computed_tokens)
        f.Fail("pass.chunks", "request " + std::to_string(c.request) + "'s chunks add up to " +
                                  std::to_string(s->second.tokens) + " tokens, beyond its " +
                                  std::to_string(r.computed_tokens) + " computed tokens");
    }
  }
  for (const RequestPlan& r : requests) {
    const auto s = seen.find({r.replica, r.request});
    const int64_t got = s == seen.end() ? -1 : s->second.tokens;
    if (got != r.computed_tokens)
      throw InputError(
          file, lines.back(), "pass.chunks",
          "request " + std::to_string(r.request) +
              (r.replica >= 0 ? " of replica " + std::to_string(r.replica) : "") +
              (got < 0 ? " is in no pass"
                       : "'s chunks add up to " + std::to_string(got) + " tokens, not its " +
                             std::to_string(r.computed_tokens) + " computed tokens"));
  }
}

}  // namespace kvlanes
