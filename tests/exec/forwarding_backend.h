// A backend that hands every call to another one: tests derive from it and override the calls
// they watch or change (a stand-in for the proxy, a coarser clock), so each such test backend
// states only what it does differently.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "exec/backend.h"

namespace kvlanes::exec::testing {

class ForwardingBackend : public RankBackend {
 public:
  explicit ForwardingBackend(std::unique_ptr<RankBackend> b) : b_(std::move(b)) {}

  std::string_view Name() const override { return b_->Name(); }
  int rank() const override { return b_->rank(); }
  int ranks() const override { return b_->ranks(); }
  const ExecGeometry& geometry() const override { return b_->geometry(); }
  nlohmann::ordered_json Context() const override { return b_->Context(); }
  int Mark(Stream s) override { return b_->Mark(s); }
  void Wait(Stream w, int m) override { b_->Wait(w, m); }
  void Sync() override { b_->Sync(); }
  void StartEpoch() override { b_->StartEpoch(); }
  double MarkSeconds(int m) const override { return b_->MarkSeconds(m); }
  double MarkInterval(int a, int e) const override { return b_->MarkInterval(a, e); }
  void ReleaseMarks() override { b_->ReleaseMarks(); }
  int HoldStreams(double t) override { return b_->HoldStreams(t); }
  void OpenGate() override { b_->OpenGate(); }
  int64_t GatesExpired() override { return b_->GatesExpired(); }
  int64_t GatesOpenedEarly() override { return b_->GatesOpenedEarly(); }
  void ForwardLayer(Stream s, int64_t l, std::span<const PageWrite> p, double busy) override {
    b_->ForwardLayer(s, l, p, busy);
  }
  void StageForwardWrites(Stream s, std::span<const PageWrite> p) override {
    b_->StageForwardWrites(s, p);
  }
  ModelForward* model_forward() override { return b_->model_forward(); }
  void EvictCaches(Stream s) override { b_->EvictCaches(s); }
  void TierCopy(Stream s, int pool, kernels::TierDirection d, std::span<const int32_t> dev,
                std::span<const int32_t> host, kernels::LayerRange l) override {
    b_->TierCopy(s, pool, d, dev, host, l);
  }
  void PrepareGather(const GatherIndex& g) override { b_->PrepareGather(g); }
  void ScatterDense(Stream s, int64_t l) override { b_->ScatterDense(s, l); }
  void PackShard(Stream s, int64_t l) override { b_->PackShard(s, l); }
  void Unpack(Stream s, int64_t l, RecordBuffer f) override { b_->Unpack(s, l, f); }
  void ZigzagReorder(Stream s, int64_t l, RecordBuffer f) override { b_->ZigzagReorder(s, l, f); }
  void PeerGather(Stream s, int64_t l) override { b_->PeerGather(s, l); }
  void AllGather(Stream s, int64_t b) override { b_->AllGather(s, b); }
  void AllReduce(Stream s, int64_t o, int64_t b) override { b_->AllReduce(s, o, b); }
  void Broadcast(Stream s, int root, int64_t b) override { b_->Broadcast(s, root, b); }
  int AllReduceMin(Stream s, int64_t mine) override { return b_->AllReduceMin(s, mine); }
  int64_t AllReduceMinResult(int h) const override { return b_->AllReduceMinResult(h); }
  int VerifyDense(Stream s, int64_t l) override { return b_->VerifyDense(s, l); }
  int VerifyRecords(Stream s, int64_t l, RecordBuffer f) override {
    return b_->VerifyRecords(s, l, f);
  }
  int VerifyPages(Stream s, int pool, std::span<const int32_t> slots,
                  std::span<const PageTag> tags) override {
    return b_->VerifyPages(s, pool, slots, tags);
  }
  VerifyResult VerifyResultOf(int h) const override { return b_->VerifyResultOf(h); }
  void Barrier() override { b_->Barrier(); }
  std::vector<std::string> AllGatherBytes(const std::string& m) override {
    return b_->AllGatherBytes(m);
  }
  void Abort(const std::string& r) noexcept override { b_->Abort(r); }
  void CorruptDevicePage(int pool, int32_t slot, int64_t l) override {
    b_->CorruptDevicePage(pool, slot, l);
  }
  void CorruptHostPage(int pool, int32_t slot, int64_t l) override {
    b_->CorruptHostPage(pool, slot, l);
  }

 protected:
  std::unique_ptr<RankBackend> b_;
};

}  // namespace kvlanes::exec::testing
