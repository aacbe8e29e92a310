// Host layouts, the tier copy CPU reference, run coalescing and the memcpy plans, on cases worked
// out by hand; then every plan executed on the CPU against the reference on random pages.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <random>
#include <vector>

#include "kernels/tier_copy.h"

namespace k = kvlanes::kernels;
using Bytes = std::vector<uint8_t>;

namespace {

// Device pool: 2 layers, 2 slots, 2 tokens of 1 byte; byte i holds i:
// layer 0 = [slot0: 0 1][slot1: 2 3], layer 1 = [slot0: 4 5][slot1: 6 7].
const k::PoolGeometry kSmall{.num_layers = 2, .num_slots = 2, .page_tokens = 2, .elem_bytes = 1};

Bytes IotaBytes(int64_t n) {
  Bytes b(static_cast<size_t>(n));
  std::iota(b.begin(), b.end(), 0);
  return b;
}

}  // namespace

TEST_CASE("host layouts place a token-layer element where their names say") {
  const k::PoolGeometry g{.num_layers = 3, .num_slots = 5, .page_tokens = 4, .elem_bytes = 10};
  // slot 2, layer 1, token 3 of a 7-slot host pool:
  CHECK(k::HostElementOffset(k::HostLayout::kLayerFirst, g, 7, 2, 1, 3) ==
        ((1 * 7 + 2) * 4 + 3) * 10);
  CHECK(k::HostElementOffset(k::HostLayout::kPageFirst, g, 7, 2, 1, 3) ==
        ((2 * 4 + 3) * 3 + 1) * 10);
  CHECK(k::HostElementOffset(k::HostLayout::kPageFirstDirect, g, 7, 2, 1, 3) ==
        ((2 * 3 + 1) * 4 + 3) * 10);
  for (k::HostLayout layout :
       {k::HostLayout::kLayerFirst, k::HostLayout::kPageFirst, k::HostLayout::kPageFirstDirect}) {
    const k::HostStrides s = k::HostLayoutStrides(layout, g, 7);
    CHECK(2 * s.page + 1 * s.layer + 3 * s.token == k::HostElementOffset(layout, g, 7, 2, 1, 3));
    CHECK(k::ParseHostLayout(k::HostLayoutName(layout)) == layout);
  }
  CHECK_FALSE(k::ParseHostLayout("page_major").has_value());
  CHECK(k::HostLayoutNames() == "layer_first, page_first, page_first_direct");
}

TEST_CASE("a device-to-host copy of two swapped pages lands in each host layout") {
  const std::vector<int32_t> dev_slots = {1, 0}, host_slots = {0, 1};
  const std::vector<std::pair<k::HostLayout, Bytes>> expected = {
      {k::HostLayout::kLayerFirst, {2, 3, 0, 1, 6, 7, 4, 5}},
      {k::HostLayout::kPageFirst, {2, 6, 3, 7, 0, 4, 1, 5}},
      {k::HostLayout::kPageFirstDirect, {2, 3, 6, 7, 0, 1, 4, 5}},
  };
  for (const auto& entry : expected) {
    // Not a structured binding: clang 14 cannot capture one in CAPTURE's lambda.
    const k::HostLayout layout = entry.first;
    const Bytes& host_expected = entry.second;
    CAPTURE(k::HostLayoutName(layout));
    Bytes dev = IotaBytes(8);
    Bytes host(8, 0xEE);
    const k::TierPoolPair pair{.device = {.data = dev.data(), .geo = kSmall},
                               .host = {.data = host.data(), .num_slots = 2, .layout = layout}};
    k::TierCopyArgs args{.pools = {&pair, 1},
                         .layers = {0, 2},
                         .device_slots = dev_slots.data(),
                         .host_slots = host_slots.data(),
                         .num_pages = 2,
                         .direction = k::TierDirection::kDeviceToHost};
    k::TierCopyCpu(args);
    CHECK(host == host_expected);
    // And back: restoring into a cleared device pool gives the original bytes.
    Bytes cleared(8, 0xEE);
    const k::TierPoolPair back{.device = {.data = cleared.data(), .geo = kSmall},
                               .host = {.data = host.data(), .num_slots = 2, .layout = layout}};
    args.pools = {&back, 1};
    args.direction = k::TierDirection::kHostToDevice;
    k::TierCopyCpu(args);
    CHECK(cleared == IotaBytes(8));
  }
}

TEST_CASE("a tier copy of one layer leaves the other layer untouched") {
  Bytes dev = IotaBytes(8);
  Bytes host(8, 0xEE);
  const std::vector<int32_t> dev_slots = {1}, host_slots = {0};
  const k::TierPoolPair pair{
      .device = {.data = dev.data(), .geo = kSmall},
      .host = {.data = host.data(), .num_slots = 2, .layout = k::HostLayout::kPageFirst}};
  k::TierCopyCpu({.pools = {&pair, 1},
                  .layers = {1, 2},
                  .device_slots = dev_slots.data(),
                  .host_slots = host_slots.data(),
                  .num_pages = 1,
                  .direction = k::TierDirection::kDeviceToHost});
  CHECK(host == Bytes{0xEE, 6, 0xEE, 7, 0xEE, 0xEE, 0xEE, 0xEE});
}

TEST_CASE("adjacent pages coalesce into runs only when both slot lists continue") {
  const std::vector<int32_t> dev = {3, 4, 5, 9, 1, 2, 7};
  const std::vector<int32_t> host = {10, 11, 12, 13, 0, 1, 5};
  const std::vector<k::PageRun> runs = k::CoalescePageRuns(dev.data(), host.data(), 7);
  CHECK(runs == std::vector<k::PageRun>{{3, 10, 3}, {9, 13, 1}, {1, 0, 2}, {7, 5, 1}});
  CHECK(k::CoalescePageRuns(nullptr, nullptr, 0).empty());
}

TEST_CASE("memcpy plans use the fewest strided copies each layout allows") {
  // 2 layers, 4 slots, 2 tokens of 1 byte (chunk 2 B) on both sides; runs (1,0,3) and (0,3,1).
  const k::PoolGeometry g{.num_layers = 2, .num_slots = 4, .page_tokens = 2, .elem_bytes = 1};
  Bytes dev(16), host(16);
  const std::vector<int32_t> dev_slots = {1, 2, 3, 0}, host_slots = {0, 1, 2, 3};
  auto plan = [&](k::HostLayout layout, k::MemcpyShape shape) {
    const k::TierPoolPair pair{.device = {.data = dev.data(), .geo = g},
                               .host = {.data = host.data(), .num_slots = 4, .layout = layout}};
    return k::PlanTierMemcpys({.pools = {&pair, 1},
                               .layers = {0, 2},
                               .device_slots = dev_slots.data(),
                               .host_slots = host_slots.data(),
                               .num_pages = 4,
                               .direction = k::TierDirection::kDeviceToHost},
                              shape);
  };
  using C = k::Copy2D;
  // Fields: pool, to_host, device_offset, host_offset, device_pitch, host_pitch, width, height.
  CHECK(plan(k::HostLayout::kLayerFirst, k::MemcpyShape::k2D) ==
        std::vector<C>{{0, true, 2, 0, 8, 8, 6, 2}, {0, true, 0, 6, 8, 8, 2, 2}});
  CHECK(plan(k::HostLayout::kLayerFirst, k::MemcpyShape::k1D) ==
        std::vector<C>{{0, true, 2, 0, 6, 6, 6, 1},
                       {0, true, 10, 8, 6, 6, 6, 1},
                       {0, true, 0, 6, 2, 2, 2, 1},
                       {0, true, 8, 14, 2, 2, 2, 1}});
  CHECK(plan(k::HostLayout::kPageFirst, k::MemcpyShape::k2D) ==
        std::vector<C>{{0, true, 2, 0, 1, 2, 1, 6},
                       {0, true, 10, 1, 1, 2, 1, 6},
                       {0, true, 0, 12, 1, 2, 1, 2},
                       {0, true, 8, 13, 1, 2, 1, 2}});
  // page_first_direct: the 3-page run goes per layer (2 copies < 3), the 1-page run per page.
  CHECK(plan(k::HostLayout::kPageFirstDirect, k::MemcpyShape::k2D) ==
        std::vector<C>{{0, true, 2, 0, 2, 4, 2, 3},
                       {0, true, 10, 2, 2, 4, 2, 3},
                       {0, true, 0, 12, 8, 2, 2, 2}});
}

TEST_CASE("every memcpy plan executed on the CPU equals the reference on random pages") {
  std::mt19937_64 rng(20261129);
  for (int trial = 0; trial < 40; ++trial) {
    const k::PoolGeometry g{.num_layers = 1 + static_cast<int64_t>(rng() % 4),
                            .num_slots = 6 + static_cast<int64_t>(rng() % 10),
                            .page_tokens = 1 + static_cast<int64_t>(rng() % 5),
                            .elem_bytes = 1 + static_cast<int64_t>(rng() % 9)};
    const int64_t host_slots = 6 + static_cast<int64_t>(rng() % 10);
    const int64_t pages = static_cast<int64_t>(rng() % 6);
    // Distinct destinations: a prefix of shuffled slots, with a sorted stretch to make runs.
    std::vector<int32_t> d(g.num_slots), h(host_slots);
    std::iota(d.begin(), d.end(), 0);
    std::iota(h.begin(), h.end(), 0);
    std::shuffle(d.begin(), d.end(), rng);
    std::shuffle(h.begin(), h.end(), rng);
    if (trial % 2 == 0) {
      std::iota(d.begin(), d.begin() + pages, 1);
      std::iota(h.begin(), h.begin() + pages, 0);
    }
    const int64_t lb = static_cast<int64_t>(rng() % g.num_layers);
    const k::LayerRange layers{lb, lb + 1 + static_cast<int64_t>(rng() % (g.num_layers - lb))};
    for (k::HostLayout layout :
         {k::HostLayout::kLayerFirst, k::HostLayout::kPageFirst, k::HostLayout::kPageFirstDirect}) {
      for (k::TierDirection dir :
           {k::TierDirection::kDeviceToHost, k::TierDirection::kHostToDevice}) {
        for (k::MemcpyShape shape : {k::MemcpyShape::k2D, k::MemcpyShape::k1D}) {
          CAPTURE(trial);
          CAPTURE(k::HostLayoutName(layout));
          Bytes dev_a(static_cast<size_t>(g.total_bytes())),
              host_a(static_cast<size_t>(k::HostPoolBytes(g, host_slots)));
          for (auto& b : dev_a) b = static_cast<uint8_t>(rng());
          for (auto& b : host_a) b = static_cast<uint8_t>(rng());
          Bytes dev_b = dev_a, host_b = host_a;
          const k::TierPoolPair pa{
              .device = {.data = dev_a.data(), .geo = g},
              .host = {.data = host_a.data(), .num_slots = host_slots, .layout = layout}};
          const k::TierPoolPair pb{
              .device = {.data = dev_b.data(), .geo = g},
              .host = {.data = host_b.data(), .num_slots = host_slots, .layout = layout}};
          k::TierCopyArgs a{.pools = {&pa, 1},
                            .layers = layers,
                            .device_slots = d.data(),
                            .host_slots = h.data(),
                            .num_pages = pages,
                            .direction = dir};
          k::TierCopyArgs b = a;
          b.pools = {&pb, 1};
          k::TierCopyCpu(a);
          k::RunTierMemcpyPlanCpu(b, k::PlanTierMemcpys(b, shape));
          CHECK(dev_a == dev_b);
          CHECK(host_a == host_b);
        }
      }
    }
  }
}
