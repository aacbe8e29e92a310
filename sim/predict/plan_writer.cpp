// PlanWriter (plan.h): the plan stream's lines formatted and written in request order, on a
// second thread by default (writer_thread.h). The queue's slots are RequestPlan objects that are
// swapped in and out, never freed, so that after the first requests no plan list is allocated on
// either side.
#include <ostream>
#include <utility>

#include "io/input_error.h"
#include "kernels/page_layout.h"
#include "sim/predict/cost_model.h"
#include "sim/predict/plan.h"
#include "sim/predict/plan_pricing.h"

namespace kvlanes {

namespace {
constexpr size_t kPlanBufferBytes = size_t{1} << 20;

// The spin's pricer: the profile's compute terms fitted to the replay's model as the cost model
// fits them (FitComputeToModel: a profile with per-kind terms composed for this depth), so each
// spin is the compute the replay predicts.
std::unique_ptr<SpinPricer> FittedSpinPricer(const ReplayConfig& cfg, const ProfileFile* profile) {
  if (!profile)
    return std::make_unique<SpinPricer>(nullptr, "", cfg.cache.cp_size, cfg.cache.page_tokens);
  HardwareProfile hw = profile->profile;
  FitComputeToModel(hw, cfg.model, profile->path);
  return std::make_unique<SpinPricer>(&hw, profile->path, cfg.cache.cp_size, cfg.cache.page_tokens);
}
}  // namespace

PlanWriter::PlanWriter(std::ostream& out, const ReplayConfig& cfg, const ProfileFile* profile,
                       PlanWriterOptions opts)
    : out_(out), cfg_(cfg), opts_(std::move(opts)), spin_(FittedSpinPricer(cfg, profile)) {
  // Refused before the replay starts: the executor and the reader hold at most kMaxPools pools.
  if (cfg.model.pools.size() > static_cast<size_t>(kernels::kMaxPools))
    throw InputError("", 0, "model.pools",
                     std::to_string(cfg.model.pools.size()) + " pools, a plan holds at most " +
                         std::to_string(kernels::kMaxPools) + " (the executor's pools; write " +
                         opts_.name + " from a replay with fewer)");
  buf_.reserve(kPlanBufferBytes + (kPlanBufferBytes >> 2));
  buf_ = PlanHeaderJson(cfg, profile).dump();
  buf_.push_back('\n');
  if (!opts_.background) return;
  slots_.resize(opts_.queue_plans);
  thread_ = std::make_unique<WriterThread>(
      WriterThreadOptions{opts_.queue_plans, opts_.wait_limit, opts_.name, "plan writer",
                          "request"},
      [this](size_t slot) { Format(slots_[slot]); }, [this] { WriteTrailer(); });
}

// The thread (its destructor) ends before the slots and the buffer it uses are destroyed.
PlanWriter::~PlanWriter() { thread_.reset(); }

void PlanWriter::Format(RequestPlan& p) {
  p.layer_spin_s = spin_->LayerS(p);
  ops_ += static_cast<int64_t>(AppendPlanLine(p, cfg_, buf_));
  ++requests_;
  if (buf_.size() >= kPlanBufferBytes) Drain();
}

void PlanWriter::Drain() {
  out_.write(buf_.data(), static_cast<std::streamsize>(buf_.size()));
  buf_.clear();
  if (!out_) throw InputError(opts_.name, 0, "", "write failed (disk full?)");
}

void PlanWriter::AddPass(PlanPass p) {
  spin_->PricePass(p);
  passes_.push_back(std::move(p));
}

void PlanWriter::WriteTrailer() {
  for (const PlanPass& p : passes_) {
    AppendPassLine(p, buf_);
    if (buf_.size() >= kPlanBufferBytes) Drain();
  }
  buf_ += PlanTrailer(requests_, ops_, static_cast<int64_t>(passes_.size())).dump();
  buf_.push_back('\n');
  Drain();
  out_.flush();
  if (!out_) throw InputError(opts_.name, 0, "", "write failed (disk full?)");
}

void PlanWriter::Add(const RequestPlan& p) {
  if (!thread_) {
    RequestPlan copy = p;
    return Format(copy);
  }
  const size_t slot = thread_->Acquire();
  slots_[slot] = p;  // copy-assigned: the slot's lists are reused
  thread_->Publish();
}

void PlanWriter::Add(RequestPlan&& p) {
  if (!thread_) return Format(p);
  const size_t slot = thread_->Acquire();
  std::swap(slots_[slot], p);
  thread_->Publish();
}

void PlanWriter::Finish() {
  if (!thread_) return WriteTrailer();
  thread_->Finish();
}

}  // namespace kvlanes
