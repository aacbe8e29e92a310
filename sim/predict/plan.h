// The plan: what one replayed request does, as an ordered list of operations with stable ids,
// holding everything the executor needs to repeat the decisions (slots, owners, logical
// positions) without re-running any policy. The cost model predicts it; the executor measures
// it; `kvlanes check` joins the two on op ids. File format (versioned JSON Lines): docs/plan.md.
// A plan file is a header line, one line per request and a trailer line with the counts, so a
// reader can tell a whole plan from one cut short; the header stores the hardware profile the
// plan was priced with, so a plan is read the same from any directory.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <iosfwd>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "sim/cache/policy.h"
#include "sim/config.h"
#include "sim/predict/plan_header.h"
#include "sim/predict/plan_passes.h"
#include "sim/predict/writer_thread.h"

namespace kvlanes {

// The most tuples the run lists of one request line expand to, all ops together (2^24: more than
// a version-2 line of kMaxPlanLineBytes could list), so a run count cannot make the reader
// allocate without bound.
inline constexpr int64_t kMaxPlanLinePages = int64_t{1} << 24;

// Pages copied between the tiers of one lane: {device slot, host slot} per page, in order.
struct LaneCopy {
  uint16_t lane = 0;
  std::vector<std::array<uint32_t, 2>> pages;
  friend bool operator==(const LaneCopy&, const LaneCopy&) = default;
};

// Slots freed by one eviction step (a whole plan of victims on one tier).
struct SlotFree {
  Tier tier = Tier::kDevice;
  std::vector<std::array<uint32_t, 2>> slots;  // {lane, slot}
  friend bool operator==(const SlotFree&, const SlotFree&) = default;
};

struct PrefixPage {
  uint16_t owner = 0;
  uint32_t device_slot = 0;
  friend bool operator==(const PrefixPage&, const PrefixPage&) = default;
};

// A computed page that stays in the cache: where the executor writes its KV. The extent and the
// logical position identify the page's content (the executor's data pattern derives from them).
struct NewPage {
  int64_t pos = 0;
  uint16_t owner = 0;
  uint32_t device_slot = 0;
  uint32_t extent = 0;
  friend bool operator==(const NewPage&, const NewPage&) = default;
};

struct RequestPlan {
  int64_t request = 0;
  // Serving mode: the replica (CP group) that served it; -1 (not written) in sequential mode.
  // The request number then counts within the replica (op ids and extents use it), and
  // trace_request is the request's index in the trace (its line among the trace's requests).
  int64_t replica = -1;
  int64_t trace_request = -1;
  int64_t arrival_ns = 0;
  int64_t input_tokens = 0;
  int64_t device_hit_pages = 0;
  int64_t host_match_pages = 0;
  int64_t loaded_pages = 0;
  int64_t prefix_pages = 0;     // pages materialized for attention (device hit + loaded)
  int64_t computed_tokens = 0;  // input_tokens - prefix_pages * page_tokens
  bool cached = true;           // false: new pages not cached (uncached request)
  // cache.cp_hit_agreement min, for a request whose host match the group agreed on by the
  // minimum all-reduce: each rank's reported hit (host pages it vouches for, rank order) and the
  // hit the simulator took (their minimum). Empty / -1 when no agreement ran.
  std::vector<int64_t> hit_reports;
  int64_t agreed_hit_pages = -1;

  std::vector<SlotFree> evictions;   // in order
  std::vector<LaneCopy> write_back;  // device -> host at device eviction (write_back policy)
  std::vector<LaneCopy> load_back;   // host -> device, per lane
  std::vector<NewPage> new_pages;    // computed pages inserted into the cache (logical order)
  // Gather (materialization) of the prefix [0, prefix_pages) on every rank.
  GatherMethod gather_method = GatherMethod::kPacked;
  bool proven_zigzag = false;
  std::vector<PrefixRun> runs;       // extent runs in logical order
  std::vector<Extent> run_extents;   // descriptor of each run's extent (same order as runs)
  std::vector<PrefixPage> prefix;    // per logical page: owner and device slot
  std::vector<int64_t> shard_pages;  // prefix pages owned per rank
  BackupSchedule backup_schedule = BackupSchedule::kPerLayer;
  std::vector<LaneCopy> backup;  // device -> host of newly backed-up pages, per lane
  // Seconds the synthetic forward pass spins per layer (version 4 `layer_spin_s`): the profile's
  // compute time of this request's layer, priced when the plan is written (PlanWriter) or, for
  // an older plan, by the command that runs it (PricePlanSpin, plan_pricing.h). -1: not priced.
  // Priced data, not a decision: operator== leaves it out.
  double layer_spin_s = -1;

  friend bool operator==(const RequestPlan& a, const RequestPlan& b);
};

// The profile a plan is written with, read once per run (ReadProfileFile, hardware_profile.h);
// nullptr: none (the synthetic forward pass then spins the documented default terms).
struct ProfileFile;
class SpinPricer;
// Header line: format version, the facts the executor sizes its pools from, the effective config,
// `forward_spin` (the terms each request's layer_spin_s is priced with) and, with `profile`, that
// profile's path, name, hash and YAML text.
nlohmann::ordered_json PlanHeaderJson(const ReplayConfig& cfg, const ProfileFile* profile);
// The same header parsed (ParsePlanHeader), for a plan built in memory rather than read.
PlanHeader PlanHeaderOf(const ReplayConfig& cfg, const ProfileFile* profile);
// One request as one JSON object of format kPlanVersion (ops with ids
// "<request>/<kind>[/l<lane>][/<pool>]", page lists as runs).
nlohmann::ordered_json PlanToJson(const RequestPlan& p, const ReplayConfig& cfg);
// Appends PlanToJson(p, cfg).dump() and "\n" to `out`, byte for byte, without building the JSON
// object; returns the number of ops in the line.
size_t AppendPlanLine(const RequestPlan& p, const ReplayConfig& cfg, std::string& out);
// Last line: {"kvlanes_plan_end": {"requests": R, "ops": O}}, with "passes": P after them when
// the plan holds serving mode's pass lines.
nlohmann::ordered_json PlanTrailer(int64_t requests, int64_t ops, int64_t passes = 0);
// Inverse of PlanToJson: a request line of plan format `version` (kOldestPlanVersion..
// kPlanVersion; version 2 lists pages one tuple each). Throws InputError(file, line, field) on
// malformed input, a malformed run included (count below 1, a tuple beyond its field's range, the
// line's runs beyond kMaxPlanLinePages, a gather's runs not adding up to prefix_pages).
// With `header`, a copy op's pool must be one of the header's pools and its layout the header's
// host_layout.
RequestPlan PlanFromJson(const nlohmann::json& j, const std::string& file, int64_t line,
                         int version = kPlanVersion, const PlanHeader* header = nullptr);

// How a PlanWriter runs. In the background (the default) a second thread formats and writes the
// lines: Add() hands the request's plan over through a bounded queue of `queue_plans` plans (it
// waits while the queue is full), so the replay's thread only records. The file is the same
// bytes either way, in request order.
struct PlanWriterOptions {
  bool background = true;
  // Plans the queue holds (>= 2). Its memory: that many plans, each as large as the largest
  // request it has carried (the lists keep their capacity for reuse), plus the line buffer.
  size_t queue_plans = 16;
  // The longest Add() or Finish() waits for the writer thread to make room or end; past it they
  // throw InputError naming `name` (an output that takes no bytes, e.g. a stalled disk or pipe).
  std::chrono::milliseconds wait_limit{std::chrono::minutes(5)};
  // The output's name in errors (the plan file's path).
  std::string name = "plan";
};

// Writes a plan stream to `out` through a bounded buffer: the header at construction, one line
// per Add(), the trailer at Finish(). Nothing but the buffer (about 1 MiB) and, in the
// background, the queue's plans is held. A failed write (the stream's state after a buffer is
// written) or an exception of the writer thread is thrown to the caller of the next Add() or of
// Finish(), as InputError(options.name, 0, "", "write failed (disk full?)") for a write.
class PlanWriter {
 public:
  // `profile` (may be null: the default terms) prices each request's layer_spin_s.
  PlanWriter(std::ostream& out, const ReplayConfig& cfg, const ProfileFile* profile,
             PlanWriterOptions opts = {});
  // Without Finish() (an error elsewhere), stops the writer thread and drops the plans not yet
  // written; the stream then holds no trailer, so no reader takes it for a whole plan.
  ~PlanWriter();
  PlanWriter(const PlanWriter&) = delete;
  PlanWriter& operator=(const PlanWriter&) = delete;
  // Copies `p` into the queue (or formats it, in the foreground).
  void Add(const RequestPlan& p);
  // Takes `p`'s contents; `p` is left holding a recycled plan's lists (contents unspecified,
  // capacity kept) for the engine to reset (ReplayEngine::Process resets it before recording).
  void Add(RequestPlan&& p);
  // Serving mode: records one forward pass (its layer_spin_s priced here). The passes are held
  // (about 40 bytes a pass and 24 a chunk) and written after the last request line, before the
  // trailer. REQUIRES: called on the thread that calls Add(), before Finish().
  void AddPass(PlanPass p);
  // REQUIRES: called once, after the last Add(). Writes the pass lines and the trailer, flushes
  // and, in the background, waits for the writer thread to end.
  void Finish();

 private:
  void Format(RequestPlan& p);
  void Drain();
  void WriteTrailer();
  std::ostream& out_;
  const ReplayConfig& cfg_;
  PlanWriterOptions opts_;
  std::string buf_;
  int64_t requests_ = 0, ops_ = 0;
  std::unique_ptr<SpinPricer> spin_;
  std::vector<PlanPass> passes_;
  std::vector<RequestPlan> slots_;  // the queue's plans (writer_thread.h), in the background
  std::unique_ptr<WriterThread> thread_;
};

struct PlanFile {
  PlanHeader header;
  std::vector<RequestPlan> requests;
  std::vector<PlanPass> passes;  // serving mode's passes (version 5), in the order they started
};
// Reads a whole plan file (version kOldestPlanVersion..kPlanVersion), checking the version, the
// header (ValidatePlanHeader) and that the trailer's counts match what was read (a plan without
// its trailer was cut short); a plan with no request lines is refused. Throws InputError naming
// the file and line.
PlanFile ReadPlanFile(const std::string& path);

}  // namespace kvlanes
