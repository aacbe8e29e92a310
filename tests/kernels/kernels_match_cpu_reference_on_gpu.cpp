// Every kernel of kernels/ against its CPU reference, byte for byte: fresh seeded random inputs,
// destinations poisoned with random bytes before the run (the CPU reference starts from the same
// poison), and the whole destination compared, so unwritten and wrongly written bytes both show.
// Exits 77 ("no CUDA device: skipped") where no CUDA device is present; ctest reports it skipped.
#define DOCTEST_CONFIG_IMPLEMENT
#include <cuda_runtime_api.h>
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "kernels/bench/scatter_variants.h"
#include "kernels/bench/scatter_variants_cuda.h"
#include "kernels/materialize.h"
#include "kernels/materialize_cuda.h"
#include "kernels/partial_merge.h"
#include "kernels/partial_merge_cuda.h"
#include "kernels/tier_copy.h"
#include "kernels/tier_copy_cuda.h"
#include "tests/approx.h"

namespace k = kvlanes::kernels;
using Bytes = std::vector<uint8_t>;

namespace {

uint64_t g_seed_counter = 0;

// A fresh generator per scenario; the seed is printed with any failure.
std::mt19937_64 FreshRng(uint64_t* seed) {
  *seed = 0x6b766c616e6573ull + 7919 * ++g_seed_counter;
  return std::mt19937_64(*seed);
}

void RequireCuda(cudaError_t e, const char* what) {
  INFO(what);
  REQUIRE_MESSAGE(e == cudaSuccess, cudaGetErrorName(e), ": ", cudaGetErrorString(e));
}

void RandomBytes(Bytes* b, std::mt19937_64& rng) {
  size_t i = 0;
  for (; i + 8 <= b->size(); i += 8) {
    const uint64_t v = rng();
    std::memcpy(b->data() + i, &v, 8);
  }
  for (; i < b->size(); ++i) (*b)[i] = static_cast<uint8_t>(rng());
}

// A host buffer and its device (or mapped pinned) twin, both starting `offset` bytes into their
// allocations so that unaligned bases can be tested.
class Mirror {
 public:
  Mirror(int64_t bytes, std::mt19937_64& rng, bool pinned_host = false, int64_t offset = 0)
      : host_(static_cast<size_t>(bytes)), offset_(offset), pinned_(pinned_host) {
    RandomBytes(&host_, rng);
    const size_t alloc = static_cast<size_t>(bytes + offset + 16);
    if (pinned_) {
      RequireCuda(cudaHostAlloc(&raw_, alloc, cudaHostAllocMapped), "cudaHostAlloc");
    } else {
      RequireCuda(cudaMalloc(&raw_, alloc), "cudaMalloc");
    }
    Upload();
  }
  ~Mirror() {
    if (pinned_) {
      cudaFreeHost(raw_);
    } else {
      cudaFree(raw_);
    }
  }
  Mirror(const Mirror&) = delete;
  Mirror& operator=(const Mirror&) = delete;

  void* host() { return host_.empty() ? nullptr : host_.data(); }
  void* dev() { return static_cast<char*>(raw_) + offset_; }
  void* side(bool gpu) { return gpu ? dev() : host(); }
  const Bytes& host_bytes() const { return host_; }

  void Upload() {
    RequireCuda(cudaMemcpy(dev(), host_.data(), host_.size(), cudaMemcpyDefault), "upload");
  }
  Bytes Download() const {
    Bytes out(host_.size());
    RequireCuda(
        cudaMemcpy(out.data(), static_cast<char*>(raw_) + offset_, out.size(), cudaMemcpyDefault),
        "download");
    return out;
  }

 private:
  Bytes host_;
  int64_t offset_;
  bool pinned_;
  void* raw_ = nullptr;
};

// An int32 index array on the host and on the device.
class Index {
 public:
  explicit Index(std::vector<int32_t> v, std::mt19937_64& rng) : v_(std::move(v)) {
    Bytes raw(v_.size() * sizeof(int32_t));
    std::memcpy(raw.data(), v_.data(), raw.size());
    mirror_ = std::make_unique<Mirror>(static_cast<int64_t>(raw.size()), rng);
    RequireCuda(cudaMemcpy(mirror_->dev(), v_.data(), raw.size(), cudaMemcpyHostToDevice),
                "index upload");
  }
  const int32_t* side(bool gpu) const {
    return gpu ? static_cast<const int32_t*>(mirror_->dev()) : v_.data();
  }
  const std::vector<int32_t>& values() const { return v_; }

 private:
  std::vector<int32_t> v_;
  std::unique_ptr<Mirror> mirror_;
};

// Byte-for-byte comparison of a whole destination.
void CheckSame(const Bytes& gpu, const Bytes& cpu, const std::string& what) {
  REQUIRE(gpu.size() == cpu.size());
  int64_t first = -1;
  int64_t count = 0;
  for (size_t i = 0; i < gpu.size(); ++i) {
    if (gpu[i] != cpu[i]) {
      if (first < 0) first = static_cast<int64_t>(i);
      ++count;
    }
  }
  INFO(what);
  CHECK_MESSAGE(count == 0, count, " of ", gpu.size(), " bytes differ, first at byte ", first);
}

void Sync(const char* what) {
  RequireCuda(cudaGetLastError(), what);
  RequireCuda(cudaDeviceSynchronize(), what);
}

std::vector<int32_t> RandomSlots(int64_t n, int64_t range, std::mt19937_64& rng) {
  std::vector<int32_t> v(static_cast<size_t>(n));
  for (auto& x : v) x = static_cast<int32_t>(rng() % static_cast<uint64_t>(range));
  return v;
}

std::vector<int32_t> DistinctSlots(int64_t n, int64_t range, std::mt19937_64& rng) {
  std::vector<int32_t> v(static_cast<size_t>(range));
  std::iota(v.begin(), v.end(), 0);
  std::shuffle(v.begin(), v.end(), rng);
  v.resize(static_cast<size_t>(n));
  return v;
}

// Element-size sets tried together as the pools of one launch: the two real pools, each alone,
// and byte counts that force narrow vectors.
const std::vector<std::vector<int64_t>> kElemSets = {{656, 132}, {656}, {132}, {7}, {33, 1}};
const std::vector<int64_t> kPageTokens = {16, 64, 256};
constexpr int64_t kLayers = 3;

std::vector<int64_t> PageTokensFor(const std::vector<int64_t>& elems) {
  // Tiny odd elements also run with odd page sizes.
  if (elems.front() < 100) return {1, 3, 16};
  return kPageTokens;
}

struct PoolSet {
  std::vector<std::unique_ptr<Mirror>> mem;
  std::vector<k::PoolGeometry> geo;
  std::vector<k::PoolRef> refs(bool gpu) {
    std::vector<k::PoolRef> r;
    for (size_t i = 0; i < mem.size(); ++i) r.push_back({.data = mem[i]->side(gpu), .geo = geo[i]});
    return r;
  }
};

PoolSet MakePools(const std::vector<int64_t>& elems, int64_t page_tokens, int64_t slots,
                  std::mt19937_64& rng, int64_t offset = 0) {
  PoolSet p;
  for (int64_t e : elems) {
    p.geo.push_back(
        {.num_layers = kLayers, .num_slots = slots, .page_tokens = page_tokens, .elem_bytes = e});
    p.mem.push_back(std::make_unique<Mirror>(p.geo.back().total_bytes(), rng, false, offset));
  }
  return p;
}

struct DenseSet {
  std::vector<std::unique_ptr<Mirror>> mem;
  std::vector<int64_t> elems;
  int64_t page_tokens = 0;
  int64_t pages = 0;
  std::vector<k::DenseRef> refs(bool gpu) {
    std::vector<k::DenseRef> r;
    for (size_t i = 0; i < mem.size(); ++i) {
      r.push_back({.data = mem[i]->side(gpu),
                   .page_tokens = page_tokens,
                   .elem_bytes = elems[i],
                   .num_pages = pages});
    }
    return r;
  }
  void Compare(const std::string& what) {
    for (size_t i = 0; i < mem.size(); ++i) {
      CheckSame(mem[i]->Download(), mem[i]->host_bytes(), what + " pool " + std::to_string(i));
    }
  }
};

// Dense buffers start as random poison (identical on host and device).
DenseSet MakeDense(const std::vector<int64_t>& elems, int64_t page_tokens, int64_t pages,
                   int64_t layers, std::mt19937_64& rng, int64_t offset = 0) {
  DenseSet d;
  d.elems = elems;
  d.page_tokens = page_tokens;
  d.pages = pages;
  for (int64_t e : elems) {
    d.mem.push_back(std::make_unique<Mirror>(layers * pages * page_tokens * e, rng, false, offset));
  }
  return d;
}

std::string Describe(const std::vector<int64_t>& elems, int64_t page_tokens, int64_t pages,
                     uint64_t seed) {
  std::string s = "elem_bytes {";
  for (int64_t e : elems) s += std::to_string(e) + " ";
  return s + "} page_tokens " + std::to_string(page_tokens) + " pages " + std::to_string(pages) +
         " seed " + std::to_string(seed);
}

// The launch shapes every case of the shared copy kernel (pack, unpack, zigzag_reorder,
// peer_gather) runs with: the default, the warp kernel alone, bulk copies at the default bulk
// shape (where the device and the arguments allow; the warp kernel for the unaligned cases), and
// bulk copies through one CTA whose ring of stages wraps many times, with pieces cut down to 48
// and to 16 bytes.
std::vector<std::pair<std::string, k::LaunchTuning>> DeviceCopyTunings() {
  k::LaunchTuning warps = k::kDeviceCopyTuning;
  warps.bulk.enabled = false;
  k::LaunchTuning bulk = k::kDeviceCopyTuning;
  bulk.bulk.enabled = true;
  k::LaunchTuning ring = k::kDeviceCopyTuning;
  ring.max_ctas = 1;
  ring.bulk = {.enabled = true, .piece_bytes = 48, .stages = 3, .ctas_per_sm = 1};
  k::LaunchTuning tiny = k::kDeviceCopyTuning;
  tiny.max_ctas = 3;
  tiny.bulk = {.enabled = true, .piece_bytes = 16, .stages = 2, .ctas_per_sm = 1};
  return {{"default", k::kDeviceCopyTuning},
          {"warps", warps},
          {"bulk", bulk},
          {"bulk one CTA", ring},
          {"bulk 16 B", tiny}};
}

}  // namespace

// On sm_90 or newer bulk copies must really be available, so that the bulk shapes above run them
// (this build targets sm_90 unless CMAKE_CUDA_ARCHITECTURES says otherwise); below, the reason
// is shown.
TEST_CASE("bulk copies are available where the device is sm_90 or newer") {
  int device = 0, major = 0;
  RequireCuda(cudaGetDevice(&device), "cudaGetDevice");
  RequireCuda(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device),
              "cudaDeviceGetAttribute");
  const std::string why = k::BulkCopiesUnavailable();
  if (major < 9) {
    MESSAGE("bulk copies not tested (the warp kernel runs every case): ", why);
    REQUIRE_FALSE(why.empty());
    return;
  }
  INFO(why);
  REQUIRE(why.empty());
}

TEST_CASE("pack equals the CPU reference for every page size, element size, layer range and list") {
  for (const auto& [shape, tuning] : DeviceCopyTunings()) {
    for (const auto& elems : kElemSets) {
      for (int64_t pt : PageTokensFor(elems)) {
        for (int64_t pages : {0, 1, 37}) {
          for (k::LayerRange layers : {k::LayerRange{0, kLayers}, k::LayerRange{1, 2}}) {
            for (int64_t offset : {0, 4, 1}) {
              uint64_t seed = 0;
              std::mt19937_64 rng = FreshRng(&seed);
              const std::string what = "pack (" + shape + ") " + Describe(elems, pt, pages, seed) +
                                       " layers " + std::to_string(layers.begin) + ".." +
                                       std::to_string(layers.end) + " offset " +
                                       std::to_string(offset);
              const int64_t slots = 41;
              PoolSet pools = MakePools(elems, pt, slots, rng, offset);
              Index slot_list(RandomSlots(pages, slots, rng), rng);  // repeats allowed
              const std::vector<k::PoolRef> host_refs = pools.refs(false);
              const int64_t record = k::PackedRecordBytes(host_refs, layers);
              // One spare record beyond the list: it must stay poisoned.
              Mirror send((pages + 1) * record, rng, false, offset);
              const std::vector<k::PoolRef> dev_refs = pools.refs(true);
              RequireCuda(k::PackPages({.pools = dev_refs,
                                        .layers = layers,
                                        .slots = slot_list.side(true),
                                        .num_pages = pages,
                                        .send = send.dev()},
                                       nullptr, tuning),
                          "PackPages");
              Sync("PackPages");
              k::PackPagesCpu({.pools = host_refs,
                               .layers = layers,
                               .slots = slot_list.side(false),
                               .num_pages = pages,
                               .send = send.host()});
              CheckSame(send.Download(), send.host_bytes(), what);
            }
          }
        }
      }
    }
  }
}

TEST_CASE("unpack equals the CPU reference for unbalanced padded shards with missing pages") {
  for (const auto& [shape, tuning] : DeviceCopyTunings()) {
    for (const auto& elems : kElemSets) {
      for (int64_t pt : PageTokensFor(elems)) {
        for (int64_t ranks : {1, 3, 8}) {
          for (int64_t pages : {0, 1, 37}) {
            uint64_t seed = 0;
            std::mt19937_64 rng = FreshRng(&seed);
            const std::string what = "unpack (" + shape + ") " + Describe(elems, pt, pages, seed) +
                                     " ranks " + std::to_string(ranks);
            // Rank 0 holds about 70% of the pages; about 10% of the pages are held by nobody.
            std::vector<std::vector<int64_t>> shards(static_cast<size_t>(ranks));
            for (int64_t p = 0; p < pages; ++p) {
              const uint64_t roll = rng() % 100;
              if (roll < 10) continue;
              shards[roll < 80 ? 0 : rng() % ranks].push_back(p);
            }
            int64_t shard_pages = 0;
            for (auto& s : shards) {
              std::shuffle(s.begin(), s.end(), rng);
              shard_pages = std::max<int64_t>(shard_pages, s.size());
            }
            shard_pages += static_cast<int64_t>(rng() % 3);  // extra padding
            const int64_t layers = 1 + static_cast<int64_t>(rng() % kLayers);
            Index index(k::BuildUnpackIndex(shards, shard_pages, pages), rng);
            DenseSet dense = MakeDense(elems, pt, pages, layers, rng);
            const std::vector<k::DenseRef> host_dense = dense.refs(false);
            const int64_t records = ranks * shard_pages;
            Mirror recv(records * k::PackedRecordBytes(host_dense, layers), rng);  // padding random
            const std::vector<k::DenseRef> dev_dense = dense.refs(true);
            RequireCuda(k::UnpackPages({.dense = dev_dense,
                                        .num_layers = layers,
                                        .recv = recv.dev(),
                                        .num_records = records,
                                        .recv_index = index.side(true),
                                        .num_dense_pages = pages},
                                       nullptr, tuning),
                        "UnpackPages");
            Sync("UnpackPages");
            k::UnpackPagesCpu({.dense = host_dense,
                               .num_layers = layers,
                               .recv = recv.host(),
                               .num_records = records,
                               .recv_index = index.side(false),
                               .num_dense_pages = pages});
            dense.Compare(what);
          }
        }
      }
    }
  }
}

TEST_CASE("zigzag_reorder equals the CPU reference and the explicit-index unpack") {
  const std::vector<std::pair<int64_t, int64_t>> runs = {{0, 1},  {1, 1},   {1, 2},  {3, 2},
                                                         {7, 2},  {10, 2},  {16, 8}, {17, 8},
                                                         {31, 8}, {100, 3}, {45, 16}};
  for (const auto& [shape, tuning] : DeviceCopyTunings()) {
    for (const auto& elems : kElemSets) {
      for (int64_t pt : PageTokensFor(elems)) {
        for (const auto& [n, ranks] : runs) {
          uint64_t seed = 0;
          std::mt19937_64 rng = FreshRng(&seed);
          const std::string what = "zigzag (" + shape + ") " + Describe(elems, pt, n, seed) +
                                   " ranks " + std::to_string(ranks);
          const k::ZigzagRun run{.num_pages = n, .num_ranks = ranks};
          const int64_t shard_pages = run.MaxShardPages() + static_cast<int64_t>(rng() % 2);
          const int64_t first = static_cast<int64_t>(rng() % 3);
          const int64_t layers = 2;
          DenseSet dense = MakeDense(elems, pt, first + n + 1, layers, rng);
          const std::vector<k::DenseRef> host_dense = dense.refs(false);
          const int64_t records = ranks * shard_pages;
          Mirror recv(records * k::PackedRecordBytes(host_dense, layers), rng);
          const std::vector<k::DenseRef> dev_dense = dense.refs(true);
          // The explicit-index unpack, on the CPU, from the same poisoned start.
          std::vector<Bytes> by_index;
          for (auto& m : dense.mem) by_index.push_back(m->host_bytes());
          RequireCuda(k::ZigzagReorder({.dense = dev_dense,
                                        .num_layers = layers,
                                        .recv = recv.dev(),
                                        .run = run,
                                        .shard_pages = shard_pages,
                                        .dense_first_page = first},
                                       nullptr, tuning),
                      "ZigzagReorder");
          Sync("ZigzagReorder");
          k::ZigzagReorderCpu({.dense = host_dense,
                               .num_layers = layers,
                               .recv = recv.host(),
                               .run = run,
                               .shard_pages = shard_pages,
                               .dense_first_page = first});
          dense.Compare(what);

          std::vector<std::vector<int64_t>> shards;
          for (int64_t r = 0; r < ranks; ++r) {
            shards.push_back(k::ZigzagShardLogicalPages(run, r));
            for (int64_t& p : shards.back()) p += first;
          }
          const std::vector<int32_t> index =
              k::BuildUnpackIndex(shards, shard_pages, first + n + 1);
          std::vector<k::DenseRef> index_dense = host_dense;
          for (size_t i = 0; i < index_dense.size(); ++i) index_dense[i].data = by_index[i].data();
          k::UnpackPagesCpu({.dense = index_dense,
                             .num_layers = layers,
                             .recv = recv.host(),
                             .num_records = records,
                             .recv_index = index.data(),
                             .num_dense_pages = first + n + 1});
          for (size_t i = 0; i < by_index.size(); ++i) {
            CheckSame(by_index[i], dense.mem[i]->host_bytes(), what + " (index vs formula)");
          }
        }
      }
    }
  }
}

// How a scatter_dense case is launched: the product's kernels::ScatterDense, or one of the
// benchmark's variants (kernels/bench/scatter_variants_cuda.h) at its default launch shape.
struct ScatterLaunch {
  bool product = true;
  k::ScatterVariant variant = k::ScatterVariant::kFused;   // when !product
  k::PiecesZeroPass zero_pass = k::PiecesZeroPass::kAuto;  // kPieces only
  bool with_list = false;  // pass the owned-page list (owned_pages/owned_slots)
  bool bulk = false;       // !product: the variant's default tuning with bulk copies on

  std::string Name() const {
    std::string n = product ? "product" : std::string(k::kScatterVariantNames.Name(variant));
    if (!product && variant == k::ScatterVariant::kPieces) {
      n += " zero_pass " + std::to_string(static_cast<int>(zero_pass));
    }
    return n + (with_list ? " with list" : " without list") + (bulk ? " bulk" : "");
  }
  cudaError_t Run(const k::ScatterDenseArgs& a, const k::LaunchTuning* tuning) const {
    if (product) return tuning ? k::ScatterDense(a, nullptr, *tuning) : k::ScatterDense(a, nullptr);
    k::LaunchTuning t = tuning ? *tuning : k::DefaultScatterTuning(variant);
    if (bulk) t.bulk.enabled = true;
    return k::ScatterDenseVariant(a, variant, nullptr, t, zero_pass);
  }
};

// `launches` with both ZeroFill modes and owned shares of none, some and all pages. Two shapes of
// the call: all layers into dense buffers with spare pages (one row per layer in the
// output-centric kernels), and a layer subset into buffers of exactly num_dense_pages pages
// (their layers follow each other: one merged row).
void CheckScatterOwnedShares(const std::vector<ScatterLaunch>& launches) {
  struct Shape {
    k::LayerRange layers;
    int64_t spare_pages;
  };
  const Shape shapes[] = {{{0, kLayers}, 2}, {{1, kLayers}, 0}};
  for (const auto& elems : kElemSets) {
    for (int64_t pt : PageTokensFor(elems)) {
      for (int owned_percent : {0, 40, 100}) {
        for (int64_t pages : {0, 1, 29}) {
          for (const Shape& shape : shapes) {
            for (const ScatterLaunch& launch : launches) {
              for (k::ZeroFill zero_fill : {k::ZeroFill::kWrite, k::ZeroFill::kNone}) {
                uint64_t seed = 0;
                std::mt19937_64 rng = FreshRng(&seed);
                const std::string what =
                    "scatter_dense " + Describe(elems, pt, pages, seed) + " owned% " +
                    std::to_string(owned_percent) + " zero_fill " +
                    std::to_string(static_cast<int>(zero_fill)) + " launch " + launch.Name() +
                    " layers " + std::to_string(shape.layers.begin) + ".." +
                    std::to_string(shape.layers.end) + " spare pages " +
                    std::to_string(shape.spare_pages);
                const int64_t slots = 33;
                PoolSet pools = MakePools(elems, pt, slots, rng);
                const std::vector<int32_t> picks = DistinctSlots(pages, slots, rng);
                std::vector<int32_t> owner(static_cast<size_t>(pages), -1);
                for (int64_t p = 0; p < pages; ++p) {
                  if (static_cast<int>(rng() % 100) < owned_percent) owner[p] = picks[p];
                }
                Index owner_index(owner, rng);
                std::vector<int32_t> owned_pages, owned_slots;
                k::ListOwnedPages(owner, &owned_pages, &owned_slots);
                Index owned_page_index(owned_pages, rng), owned_slot_index(owned_slots, rng);
                const k::LayerRange layers = shape.layers;
                DenseSet dense =
                    MakeDense(elems, pt, pages + shape.spare_pages, layers.size(), rng);
                const std::vector<k::PoolRef> dev_pools = pools.refs(true);
                const std::vector<k::DenseRef> dev_dense = dense.refs(true);
                const bool with_list = launch.with_list;
                RequireCuda(
                    launch.Run(
                        {.pools = dev_pools,
                         .layers = layers,
                         .owner_slot = owner_index.side(true),
                         .num_dense_pages = pages,
                         .dense = dev_dense,
                         .zero_fill = zero_fill,
                         .owned_pages = with_list ? owned_page_index.side(true) : nullptr,
                         .owned_slots = with_list ? owned_slot_index.side(true) : nullptr,
                         .num_owned = with_list ? static_cast<int64_t>(owned_pages.size()) : -1},
                        nullptr),
                    "ScatterDense");
                Sync("ScatterDense");
                const std::vector<k::PoolRef> host_pools = pools.refs(false);
                const std::vector<k::DenseRef> host_dense = dense.refs(false);
                k::ScatterDenseCpu({.pools = host_pools,
                                    .layers = layers,
                                    .owner_slot = owner_index.side(false),
                                    .num_dense_pages = pages,
                                    .dense = host_dense,
                                    .zero_fill = zero_fill});
                dense.Compare(what);
              }
            }
          }
        }
      }
    }
  }
}

// `launches` with small tiles (32 threads x unroll 4), so that tiles, warp spans and chunk
// boundaries fall at many different places, unaligned bases (narrower vectors) and a capped grid
// (each CTA loops over many tiles).
void CheckScatterSmallTiles(const std::vector<ScatterLaunch>& launches) {
  const k::LaunchTuning tunings[] = {
      {.threads_per_block = 32, .ctas_per_sm = 1, .unroll = 4, .max_ctas = 3},
      {.threads_per_block = 96, .ctas_per_sm = 2, .unroll = 8, .max_ctas = 0},
      k::kDeviceCopyTuning};
  for (const auto& elems : kElemSets) {
    for (int64_t pt : PageTokensFor(elems)) {
      for (int64_t offset : {0, 4, 1}) {
        for (const ScatterLaunch& launch : launches) {
          for (const k::LaunchTuning& tuning : tunings) {
            uint64_t seed = 0;
            std::mt19937_64 rng = FreshRng(&seed);
            const int64_t pages = 13;
            const std::string what = "scatter_dense " + Describe(elems, pt, pages, seed) +
                                     " offset " + std::to_string(offset) + " launch " +
                                     launch.Name() + " threads " +
                                     std::to_string(tuning.threads_per_block);
            const int64_t slots = 17;
            PoolSet pools = MakePools(elems, pt, slots, rng, offset);
            const std::vector<int32_t> picks = DistinctSlots(pages, slots, rng);
            std::vector<int32_t> owner(static_cast<size_t>(pages), -1);
            for (int64_t p = 0; p < pages; ++p) {
              if (rng() % 2) owner[p] = picks[p];
            }
            Index owner_index(owner, rng);
            const bool with_list = launch.with_list;
            std::vector<int32_t> owned_pages, owned_slots;
            k::ListOwnedPages(owner, &owned_pages, &owned_slots);
            Index owned_page_index(owned_pages, rng), owned_slot_index(owned_slots, rng);
            const k::LayerRange layers{0, kLayers};
            const int64_t spare = static_cast<int64_t>(rng() % 2);
            DenseSet dense = MakeDense(elems, pt, pages + spare, kLayers, rng, offset);
            const std::vector<k::PoolRef> dev_pools = pools.refs(true);
            const std::vector<k::DenseRef> dev_dense = dense.refs(true);
            RequireCuda(
                launch.Run({.pools = dev_pools,
                            .layers = layers,
                            .owner_slot = owner_index.side(true),
                            .num_dense_pages = pages,
                            .dense = dev_dense,
                            .owned_pages = with_list ? owned_page_index.side(true) : nullptr,
                            .owned_slots = with_list ? owned_slot_index.side(true) : nullptr,
                            .num_owned = with_list ? static_cast<int64_t>(owned_pages.size()) : -1},
                           &tuning),
                "ScatterDense");
            Sync("ScatterDense");
            const std::vector<k::PoolRef> host_pools = pools.refs(false);
            const std::vector<k::DenseRef> host_dense = dense.refs(false);
            k::ScatterDenseCpu({.pools = host_pools,
                                .layers = layers,
                                .owner_slot = owner_index.side(false),
                                .num_dense_pages = pages,
                                .dense = host_dense});
            dense.Compare(what);
          }
        }
      }
    }
  }
}

// The benchmark's variants, each as `bench kernels` runs it: kSplit with and without the owned-page
// list, kPieces with every way of writing the zeros.
std::vector<ScatterLaunch> BenchScatterLaunches(bool every_zero_pass) {
  using V = k::ScatterVariant;
  std::vector<ScatterLaunch> out;
  const auto passes = every_zero_pass
                          ? std::vector<k::PiecesZeroPass>{k::PiecesZeroPass::kAuto,
                                                           k::PiecesZeroPass::kSeparatePass,
                                                           k::PiecesZeroPass::kSamePass}
                          : std::vector<k::PiecesZeroPass>{};
  for (k::PiecesZeroPass zp : passes) {
    out.push_back({.product = false, .variant = V::kPieces, .zero_pass = zp});
    // The pieces by bulk copies: zeros stored from a stage of zeros (sm_90+, aligned cases).
    out.push_back({.product = false, .variant = V::kPieces, .zero_pass = zp, .bulk = true});
  }
  for (V v : {V::kTiles, V::kWarpSpans, V::kWarpSpansStreaming, V::kSplit}) {
    out.push_back({.product = false, .variant = v, .with_list = k::ScatterTakesOwnedList(v)});
  }
  if (every_zero_pass) {
    out.push_back({.product = false, .variant = V::kSplit, .with_list = false});
    out.push_back({.product = false, .variant = V::kSplit, .with_list = true, .bulk = true});
  }
  return out;
}

TEST_CASE("scatter_dense equals the CPU reference with none, some and all pages owned") {
  CheckScatterOwnedShares(
      {{.product = true, .with_list = false}, {.product = true, .with_list = true}});
}

TEST_CASE("scatter_dense equals the CPU reference with small tiles and unaligned bases") {
  CheckScatterSmallTiles(
      {{.product = true, .with_list = false}, {.product = true, .with_list = true}});
}

TEST_CASE(
    "the benchmark's scatter_dense variants equal the CPU reference with none, some and all pages "
    "owned") {
  CheckScatterOwnedShares(BenchScatterLaunches(/*every_zero_pass=*/true));
}

TEST_CASE(
    "the benchmark's scatter_dense variants equal the CPU reference with small tiles and unaligned "
    "bases") {
  CheckScatterSmallTiles(BenchScatterLaunches(/*every_zero_pass=*/false));
}

TEST_CASE("peer_gather equals the CPU reference reading from up to sixteen pools") {
  for (const auto& [shape, tuning] : DeviceCopyTunings()) {
    for (const auto& elems : kElemSets) {
      for (int64_t pt : PageTokensFor(elems)) {
        for (int64_t ranks : {1, 5, 16}) {
          for (int64_t pages : {0, 1, 23}) {
            uint64_t seed = 0;
            std::mt19937_64 rng = FreshRng(&seed);
            const std::string what = "peer_gather (" + shape + ") " +
                                     Describe(elems, pt, pages, seed) + " ranks " +
                                     std::to_string(ranks);
            const int64_t slots = 9;
            std::vector<PoolSet> per_rank;
            for (int64_t r = 0; r < ranks; ++r)
              per_rank.push_back(MakePools(elems, pt, slots, rng));
            auto peers = [&](bool gpu) {
              std::vector<k::PoolRef> out(elems.size() * ranks);
              for (int64_t r = 0; r < ranks; ++r) {
                const std::vector<k::PoolRef> refs = per_rank[r].refs(gpu);
                for (size_t kind = 0; kind < elems.size(); ++kind)
                  out[kind * ranks + r] = refs[kind];
              }
              return out;
            };
            Index src_rank(RandomSlots(pages, ranks, rng), rng);
            Index src_slot(RandomSlots(pages, slots, rng), rng);
            const k::LayerRange layers{1, kLayers};
            DenseSet dense = MakeDense(elems, pt, pages, layers.size(), rng);
            const std::vector<k::PoolRef> dev_peers = peers(true);
            const std::vector<k::DenseRef> dev_dense = dense.refs(true);
            RequireCuda(k::PeerGather({.peer_pools = dev_peers,
                                       .num_ranks = ranks,
                                       .layers = layers,
                                       .src_rank = src_rank.side(true),
                                       .src_slot = src_slot.side(true),
                                       .num_dense_pages = pages,
                                       .dense = dev_dense},
                                      nullptr, tuning),
                        "PeerGather");
            Sync("PeerGather");
            const std::vector<k::PoolRef> host_peers = peers(false);
            const std::vector<k::DenseRef> host_dense = dense.refs(false);
            k::PeerGatherCpu({.peer_pools = host_peers,
                              .num_ranks = ranks,
                              .layers = layers,
                              .src_rank = src_rank.side(false),
                              .src_slot = src_slot.side(false),
                              .num_dense_pages = pages,
                              .dense = host_dense});
            dense.Compare(what);
          }
        }
      }
    }
  }
}

TEST_CASE("tier copies equal the CPU reference in every layout, direction and strategy") {
  const std::vector<std::pair<int64_t, int64_t>> shapes = {
      {656, 16}, {656, 64}, {656, 256}, {132, 16}, {132, 64}, {132, 256}, {7, 3}, {1, 1}};
  enum class Strategy { kKernel, kMemcpy2D, kMemcpy1D, kBatch };
  // cudaMemcpyBatchAsync refuses the legacy default stream: the batch strategy uses its own.
  cudaStream_t batch_stream = nullptr;
  RequireCuda(cudaStreamCreateWithFlags(&batch_stream, cudaStreamNonBlocking), "cudaStreamCreate");
  for (const auto& [elem, pt] : shapes) {
    for (k::HostLayout layout :
         {k::HostLayout::kLayerFirst, k::HostLayout::kPageFirst, k::HostLayout::kPageFirstDirect}) {
      for (k::TierDirection dir :
           {k::TierDirection::kDeviceToHost, k::TierDirection::kHostToDevice}) {
        for (int list = 0; list < 4; ++list) {  // empty, one page, scattered, runs
          for (Strategy strategy :
               {Strategy::kKernel, Strategy::kMemcpy2D, Strategy::kMemcpy1D, Strategy::kBatch}) {
            uint64_t seed = 0;
            std::mt19937_64 rng = FreshRng(&seed);
            const int64_t dev_slots = 12;
            const int64_t host_slots = 20;
            const int64_t pages = list == 0 ? 0 : list == 1 ? 1 : 9;
            std::vector<int32_t> d = DistinctSlots(pages, dev_slots, rng);
            std::vector<int32_t> h = DistinctSlots(pages, host_slots, rng);
            if (list == 3) {  // runs of 4, 3 and 2 adjacent pages on both sides
              d = {2, 3, 4, 5, 9, 10, 11, 0, 1};
              h = {7, 8, 9, 10, 0, 1, 2, 18, 19};
            }
            const k::LayerRange layers =
                list == 2 ? k::LayerRange{1, 2} : k::LayerRange{0, kLayers};
            const std::string what = std::string("tier ") + std::string(k::HostLayoutName(layout)) +
                                     " " + std::string(k::TierDirectionName(dir)) + " strategy " +
                                     std::to_string(static_cast<int>(strategy)) + " " +
                                     Describe({elem}, pt, pages, seed) + " list " +
                                     std::to_string(list);
            const k::PoolGeometry g{.num_layers = kLayers,
                                    .num_slots = dev_slots,
                                    .page_tokens = pt,
                                    .elem_bytes = elem};
            Mirror dev(g.total_bytes(), rng);
            Mirror host(k::HostPoolBytes(g, host_slots), rng, /*pinned_host=*/true);
            Index dev_index(d, rng), host_index(h, rng);
            auto args = [&](bool gpu, k::TierPoolPair* pair) {
              *pair = {.device = {.data = dev.side(gpu), .geo = g},
                       .host = {.data = host.side(gpu), .num_slots = host_slots, .layout = layout}};
              return k::TierCopyArgs{.pools = {pair, 1},
                                     .layers = layers,
                                     .device_slots = nullptr,
                                     .host_slots = nullptr,
                                     .num_pages = pages,
                                     .direction = dir};
            };
            k::TierPoolPair gpu_pair, cpu_pair;
            k::TierCopyArgs gpu_args = args(true, &gpu_pair);
            if (strategy == Strategy::kKernel) {
              gpu_args.device_slots = dev_index.side(true);
              gpu_args.host_slots = host_index.side(true);
              RequireCuda(k::TierCopyKernel(gpu_args, nullptr), "TierCopyKernel");
            } else if (strategy == Strategy::kBatch) {
              gpu_args.device_slots = d.data();  // planned on the host, like the memcpy strategy
              gpu_args.host_slots = h.data();
              RequireCuda(k::TierCopyBatch(gpu_args, batch_stream), "TierCopyBatch");
              RequireCuda(cudaStreamSynchronize(batch_stream), "cudaStreamSynchronize (batch)");
            } else {
              gpu_args.device_slots = d.data();  // the memcpy strategy plans on the host
              gpu_args.host_slots = h.data();
              RequireCuda(k::TierCopyMemcpy(gpu_args, nullptr,
                                            strategy == Strategy::kMemcpy2D ? k::MemcpyShape::k2D
                                                                            : k::MemcpyShape::k1D),
                          "TierCopyMemcpy");
            }
            Sync("tier copy");
            k::TierCopyArgs cpu_args = args(false, &cpu_pair);
            cpu_args.device_slots = d.data();
            cpu_args.host_slots = h.data();
            k::TierCopyCpu(cpu_args);
            CheckSame(dev.Download(), dev.host_bytes(), what + " (device pool)");
            CheckSame(host.Download(), host.host_bytes(), what + " (host pool)");
          }
        }
      }
    }
  }
  cudaStreamDestroy(batch_stream);
}

TEST_CASE("every launch shape gives the same bytes as the CPU reference") {
  const std::vector<k::LaunchTuning> tunings = {
      {.threads_per_block = 128,
       .piece_bytes = 2048,
       .ctas_per_sm = 1,
       .unroll = 8,
       .layer_major = true},
      {.threads_per_block = 512, .piece_bytes = 131072, .ctas_per_sm = 8, .unroll = 4},
      {.threads_per_block = 256,
       .piece_bytes = 100,
       .ctas_per_sm = 2,
       .unroll = 8,
       .layer_major = true},
      {.threads_per_block = 32, .piece_bytes = 1, .ctas_per_sm = 1, .unroll = 4}};
  for (const k::LaunchTuning& t : tunings) {
    for (const auto& elems : std::vector<std::vector<int64_t>>{{656, 132}, {7}}) {
      uint64_t seed = 0;
      std::mt19937_64 rng = FreshRng(&seed);
      const int64_t pt = elems.front() == 7 ? 3 : 64;
      const std::string what =
          Describe(elems, pt, 19, seed) + " threads " + std::to_string(t.threads_per_block) +
          " piece " + std::to_string(t.piece_bytes) + " unroll " + std::to_string(t.unroll);
      // pack
      PoolSet pools = MakePools(elems, pt, 23, rng);
      Index slots(RandomSlots(19, 23, rng), rng);
      const std::vector<k::PoolRef> host_refs = pools.refs(false);
      const std::vector<k::PoolRef> dev_refs = pools.refs(true);
      const k::LayerRange layers{0, kLayers};
      Mirror send(19 * k::PackedRecordBytes(host_refs, layers), rng);
      RequireCuda(k::PackPages({.pools = dev_refs,
                                .layers = layers,
                                .slots = slots.side(true),
                                .num_pages = 19,
                                .send = send.dev()},
                               nullptr, t),
                  "PackPages");
      Sync("PackPages");
      k::PackPagesCpu({.pools = host_refs,
                       .layers = layers,
                       .slots = slots.side(false),
                       .num_pages = 19,
                       .send = send.host()});
      CheckSame(send.Download(), send.host_bytes(), "pack " + what);
      // tier kernel, both directions, a contiguous-chunk layout and the row-mode layout
      for (k::HostLayout layout : {k::HostLayout::kLayerFirst, k::HostLayout::kPageFirst}) {
        for (k::TierDirection dir :
             {k::TierDirection::kDeviceToHost, k::TierDirection::kHostToDevice}) {
          const k::PoolGeometry g{.num_layers = kLayers,
                                  .num_slots = 10,
                                  .page_tokens = pt,
                                  .elem_bytes = elems.front()};
          Mirror dev(g.total_bytes(), rng);
          Mirror host(k::HostPoolBytes(g, 12), rng, /*pinned_host=*/true);
          const std::vector<int32_t> d = DistinctSlots(7, 10, rng), h = DistinctSlots(7, 12, rng);
          Index di(d, rng), hi(h, rng);
          const k::TierPoolPair gpu_pair{
              .device = {.data = dev.dev(), .geo = g},
              .host = {.data = host.dev(), .num_slots = 12, .layout = layout}};
          const k::TierPoolPair cpu_pair{
              .device = {.data = dev.host(), .geo = g},
              .host = {.data = host.host(), .num_slots = 12, .layout = layout}};
          RequireCuda(k::TierCopyKernel({.pools = {&gpu_pair, 1},
                                         .layers = {0, kLayers},
                                         .device_slots = di.side(true),
                                         .host_slots = hi.side(true),
                                         .num_pages = 7,
                                         .direction = dir},
                                        nullptr, t),
                      "TierCopyKernel");
          Sync("TierCopyKernel");
          k::TierCopyCpu({.pools = {&cpu_pair, 1},
                          .layers = {0, kLayers},
                          .device_slots = d.data(),
                          .host_slots = h.data(),
                          .num_pages = 7,
                          .direction = dir});
          const std::string tw = "tier " + std::string(k::HostLayoutName(layout)) + " " +
                                 std::string(k::TierDirectionName(dir)) + " " + what;
          CheckSame(dev.Download(), dev.host_bytes(), tw + " (device pool)");
          CheckSame(host.Download(), host.host_bytes(), tw + " (host pool)");
        }
      }
    }
  }
}

TEST_CASE("launchers refuse inconsistent arguments and launch nothing for empty work") {
  uint64_t seed = 0;
  std::mt19937_64 rng = FreshRng(&seed);
  PoolSet pools = MakePools({656}, 16, 4, rng);
  const std::vector<k::PoolRef> refs = pools.refs(true);
  Index slots(std::vector<int32_t>{0, 1}, rng);
  Mirror send(2 * kLayers * 16 * 656, rng);
  CHECK(k::PackPages({.pools = refs,
                      .layers = {0, kLayers + 1},
                      .slots = slots.side(true),
                      .num_pages = 2,
                      .send = send.dev()},
                     nullptr) == cudaErrorInvalidValue);
  CHECK(k::PackPages({.pools = refs,
                      .layers = {0, kLayers},
                      .slots = slots.side(true),
                      .num_pages = 2,
                      .send = nullptr},
                     nullptr) == cudaErrorInvalidValue);
  const Bytes before = send.Download();
  CHECK(k::PackPages({.pools = refs,
                      .layers = {1, 1},
                      .slots = slots.side(true),
                      .num_pages = 2,
                      .send = send.dev()},
                     nullptr) == cudaSuccess);
  Sync("empty pack");
  CHECK(send.Download() == before);
}

TEST_CASE("the partial_merge kernel equals the CPU log-sum-exp merge") {
  uint64_t seed = 0;
  std::mt19937_64 rng = FreshRng(&seed);
  CAPTURE(seed);
  std::normal_distribution<float> nd(0.0f, 3.0f);
  for (int ranks : {1, 2, 4, 8}) {
    const int64_t rows = 37, dv = 24;
    std::vector<k::PartialOutput> parts(static_cast<size_t>(ranks));
    std::vector<float> flat_out, flat_lse;
    for (int r = 0; r < ranks; ++r) {
      k::PartialOutput& p = parts[static_cast<size_t>(r)];
      p.out.resize(static_cast<size_t>(rows * dv));
      p.lse.resize(static_cast<size_t>(rows));
      for (float& x : p.out) x = nd(rng);
      for (int64_t i = 0; i < rows; ++i)  // some rows unseen by some ranks, row 0 by every rank
        p.lse[static_cast<size_t>(i)] = (i == 0 || rng() % 5 == 0) ? -INFINITY : nd(rng);
      flat_out.insert(flat_out.end(), p.out.begin(), p.out.end());
      flat_lse.insert(flat_lse.end(), p.lse.begin(), p.lse.end());
    }
    const k::PartialOutput want = k::MergePartials(parts, rows, dv);
    float *d_out = nullptr, *d_lse = nullptr, *d_m = nullptr, *d_ml = nullptr;
    RequireCuda(cudaMalloc(reinterpret_cast<void**>(&d_out), flat_out.size() * sizeof(float)),
                "cudaMalloc");
    RequireCuda(cudaMalloc(reinterpret_cast<void**>(&d_lse), flat_lse.size() * sizeof(float)),
                "cudaMalloc");
    RequireCuda(cudaMalloc(reinterpret_cast<void**>(&d_m), want.out.size() * sizeof(float)),
                "cudaMalloc");
    RequireCuda(cudaMalloc(reinterpret_cast<void**>(&d_ml), want.lse.size() * sizeof(float)),
                "cudaMalloc");
    RequireCuda(
        cudaMemcpy(d_out, flat_out.data(), flat_out.size() * sizeof(float), cudaMemcpyHostToDevice),
        "upload");
    RequireCuda(
        cudaMemcpy(d_lse, flat_lse.data(), flat_lse.size() * sizeof(float), cudaMemcpyHostToDevice),
        "upload");
    RequireCuda(k::MergePartialsKernel(d_out, d_lse, ranks, rows, dv, d_m, d_ml, nullptr),
                "MergePartialsKernel");
    std::vector<float> got(want.out.size()), got_lse(want.lse.size());
    RequireCuda(cudaMemcpy(got.data(), d_m, got.size() * sizeof(float), cudaMemcpyDeviceToHost),
                "download");
    RequireCuda(
        cudaMemcpy(got_lse.data(), d_ml, got_lse.size() * sizeof(float), cudaMemcpyDeviceToHost),
        "download");
    for (float* d : {d_out, d_lse, d_m, d_ml}) cudaFree(d);
    for (size_t e = 0; e < got.size(); ++e)
      REQUIRE(got[e] == kvlanes::test::RelApprox(want.out[e]).epsilon(1e-6));
    for (size_t i = 0; i < got_lse.size(); ++i) {
      if (std::isinf(want.lse[i])) {
        REQUIRE(std::isinf(got_lse[i]));
      } else {
        REQUIRE(got_lse[i] == kvlanes::test::RelApprox(want.lse[i]).epsilon(1e-6));
      }
    }
  }
}

int main(int argc, char** argv) {
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess || count == 0) {
    std::printf("no CUDA device: skipped\n");
    return 77;
  }
  doctest::Context context(argc, argv);
  return context.run();
}
