// The CPU reference of every materialization copy on cases small enough to work out by hand.
// Pool bytes hold their own offset (plus a pool tag), so an expected buffer reads as addresses.
#include <doctest/doctest.h>

#include <cstdint>
#include <numeric>
#include <vector>

#include "kernels/materialize.h"

namespace k = kvlanes::kernels;
using Bytes = std::vector<uint8_t>;

namespace {

constexpr uint8_t kPoison = 0xEE;

// A pool whose byte at offset i is tag + i.
Bytes Iota(int64_t n, uint8_t tag) {
  Bytes b(static_cast<size_t>(n));
  std::iota(b.begin(), b.end(), tag);
  return b;
}

// Pool A: 2 layers, 3 slots, 1 token of 2 bytes: layer 0 = [0 1|2 3|4 5], layer 1 = [6 7|8 9|10
// 11]. Pool B: 2 layers, 3 slots, 1 token of 1 byte: layer 0 = [100|101|102], layer 1 =
// [103|104|105].
struct TwoPools {
  Bytes a = Iota(12, 0);
  Bytes b = Iota(6, 100);
  std::vector<k::PoolRef> refs() {
    return {{.data = a.data(),
             .geo = {.num_layers = 2, .num_slots = 3, .page_tokens = 1, .elem_bytes = 2}},
            {.data = b.data(),
             .geo = {.num_layers = 2, .num_slots = 3, .page_tokens = 1, .elem_bytes = 1}}};
  }
};

}  // namespace

TEST_CASE("pack writes one record per listed slot, pool by pool, layer by layer") {
  TwoPools pools;
  const std::vector<k::PoolRef> refs = pools.refs();
  CHECK(k::PackedRecordBytes(refs, {0, 2}) == 6);
  CHECK(k::PackedRecordPoolOffset(refs, {0, 2}, 1) == 4);
  const std::vector<int32_t> slots = {2, 0, 2};
  Bytes send(3 * 6, kPoison);
  k::PackPagesCpu({.pools = refs,
                   .layers = {0, 2},
                   .slots = slots.data(),
                   .num_pages = 3,
                   .send = send.data()});
  CHECK(send == Bytes{4, 5, 10, 11, 102, 105,  //
                      0, 1, 6, 7, 100, 103,    //
                      4, 5, 10, 11, 102, 105});
}

TEST_CASE("pack of one layer packs only that layer's chunks") {
  TwoPools pools;
  const std::vector<k::PoolRef> refs = pools.refs();
  const std::vector<int32_t> slots = {1};
  Bytes send(3 + 1, kPoison);  // one record of 3 bytes and one guard byte
  k::PackPagesCpu({.pools = refs,
                   .layers = {1, 2},
                   .slots = slots.data(),
                   .num_pages = 1,
                   .send = send.data()});
  CHECK(send == Bytes{8, 9, 104, kPoison});
}

TEST_CASE("pack of an empty slot list writes nothing") {
  TwoPools pools;
  const std::vector<k::PoolRef> refs = pools.refs();
  Bytes send(4, kPoison);
  k::PackPagesCpu(
      {.pools = refs, .layers = {0, 2}, .slots = nullptr, .num_pages = 0, .send = send.data()});
  CHECK(send == Bytes(4, kPoison));
}

TEST_CASE("unpack places each indexed record at its dense page and leaves -1 pages alone") {
  // Records of one pool, 2 layers of one 2-byte chunk: record r = [r0 r1 | r2 r3].
  const Bytes recv = {10, 11, 12, 13, 20, 21, 22, 23, 30, 31, 32, 33, 40, 41, 42, 43};
  Bytes dense(2 * 3 * 2, kPoison);  // [layer][3 pages][2 bytes]
  const std::vector<k::DenseRef> d = {
      {.data = dense.data(), .page_tokens = 1, .elem_bytes = 2, .num_pages = 3}};
  const std::vector<int32_t> index = {2, -1, 0};
  k::UnpackPagesCpu({.dense = d,
                     .num_layers = 2,
                     .recv = recv.data(),
                     .num_records = 4,
                     .recv_index = index.data(),
                     .num_dense_pages = 3});
  CHECK(dense == Bytes{30, 31, kPoison, kPoison, 10, 11,    // layer 0
                       32, 33, kPoison, kPoison, 12, 13});  // layer 1
}

TEST_CASE("unpack splits a two-pool record back into both dense buffers") {
  // Record = pool A [layer0: 2 B][layer1: 2 B] then pool B [layer0: 1 B][layer1: 1 B].
  const Bytes recv = {1, 2, 3, 4, 5, 6, 11, 12, 13, 14, 15, 16};
  Bytes a(2 * 2 * 2, kPoison), b(2 * 2, kPoison);
  const std::vector<k::DenseRef> d = {
      {.data = a.data(), .page_tokens = 1, .elem_bytes = 2, .num_pages = 2},
      {.data = b.data(), .page_tokens = 1, .elem_bytes = 1, .num_pages = 2}};
  const std::vector<int32_t> index = {1, 0};
  k::UnpackPagesCpu({.dense = d,
                     .num_layers = 2,
                     .recv = recv.data(),
                     .num_records = 2,
                     .recv_index = index.data(),
                     .num_dense_pages = 2});
  CHECK(a == Bytes{11, 12, 1, 2, 13, 14, 3, 4});
  CHECK(b == Bytes{15, 5, 16, 6});
}

TEST_CASE("zigzag reorder of seven pages over two ranks skips the padding record") {
  // One-byte records; all-gather output [0 1 6 pad | 2 3 4 5] holds values 100..107.
  const Bytes recv = {100, 101, 102, 103, 104, 105, 106, 107};
  Bytes dense(9, kPoison);
  const std::vector<k::DenseRef> d = {
      {.data = dense.data(), .page_tokens = 1, .elem_bytes = 1, .num_pages = 9}};
  k::ZigzagReorderCpu({.dense = d,
                       .num_layers = 1,
                       .recv = recv.data(),
                       .run = {.num_pages = 7, .num_ranks = 2},
                       .shard_pages = 4,
                       .dense_first_page = 1});
  CHECK(dense == Bytes{kPoison, 100, 101, 104, 105, 106, 107, 102, kPoison});
}

TEST_CASE("scatter_dense copies owned pages and zeroes every other page") {
  TwoPools pools;
  const std::vector<k::PoolRef> refs = pools.refs();
  Bytes a(2 * 3 * 2, kPoison), b(2 * 3, kPoison);
  const std::vector<k::DenseRef> d = {
      {.data = a.data(), .page_tokens = 1, .elem_bytes = 2, .num_pages = 3},
      {.data = b.data(), .page_tokens = 1, .elem_bytes = 1, .num_pages = 3}};
  const std::vector<int32_t> owner = {1, -1, 2};
  k::ScatterDenseCpu({.pools = refs,
                      .layers = {0, 2},
                      .owner_slot = owner.data(),
                      .num_dense_pages = 3,
                      .dense = d});
  CHECK(a == Bytes{2, 3, 0, 0, 4, 5, 8, 9, 0, 0, 10, 11});
  CHECK(b == Bytes{101, 0, 102, 104, 0, 105});
}

TEST_CASE("scatter_dense with ZeroFill::kNone leaves unowned pages as they were") {
  TwoPools pools;
  const std::vector<k::PoolRef> refs = pools.refs();
  Bytes a(2 * 2 * 2, kPoison), b(2 * 2, kPoison);
  const std::vector<k::DenseRef> d = {
      {.data = a.data(), .page_tokens = 1, .elem_bytes = 2, .num_pages = 2},
      {.data = b.data(), .page_tokens = 1, .elem_bytes = 1, .num_pages = 2}};
  const std::vector<int32_t> owner = {-1, 0};
  k::ScatterDenseCpu({.pools = refs,
                      .layers = {0, 2},
                      .owner_slot = owner.data(),
                      .num_dense_pages = 2,
                      .dense = d,
                      .zero_fill = k::ZeroFill::kNone});
  CHECK(a == Bytes{kPoison, kPoison, 0, 1, kPoison, kPoison, 6, 7});
  CHECK(b == Bytes{kPoison, 100, kPoison, 103});
}

TEST_CASE("the owned-page list holds the pages with a slot, in order, and their slots") {
  std::vector<int32_t> pages = {99}, slots = {99};  // replaced, not appended to
  const std::vector<int32_t> owner = {-1, 7, -1, -1, 0, 3};
  k::ListOwnedPages(owner, &pages, &slots);
  CHECK(pages == std::vector<int32_t>{1, 4, 5});
  CHECK(slots == std::vector<int32_t>{7, 0, 3});
  k::ListOwnedPages(std::vector<int32_t>{-1, -1}, &pages, &slots);
  CHECK(pages.empty());
  CHECK(slots.empty());
}

TEST_CASE("peer_gather reads each dense page from the named rank's pool") {
  Bytes rank0 = {1, 2}, rank1 = {11, 12};  // 1 layer, 2 slots, 1-byte chunks
  const k::PoolGeometry g{.num_layers = 1, .num_slots = 2, .page_tokens = 1, .elem_bytes = 1};
  const std::vector<k::PoolRef> peers = {{.data = rank0.data(), .geo = g},
                                         {.data = rank1.data(), .geo = g}};
  Bytes dense(3, kPoison);
  const std::vector<k::DenseRef> d = {
      {.data = dense.data(), .page_tokens = 1, .elem_bytes = 1, .num_pages = 3}};
  const std::vector<int32_t> rank = {1, 0, 1}, slot = {0, 1, 1};
  k::PeerGatherCpu({.peer_pools = peers,
                    .num_ranks = 2,
                    .layers = {0, 1},
                    .src_rank = rank.data(),
                    .src_slot = slot.data(),
                    .num_dense_pages = 3,
                    .dense = d});
  CHECK(dense == Bytes{11, 2, 12});
}

TEST_CASE("argument validation names what is wrong") {
  TwoPools pools;
  const std::vector<k::PoolRef> refs = pools.refs();
  const std::vector<int32_t> slots = {0};
  Bytes send(6);
  k::PackArgs ok{
      .pools = refs, .layers = {0, 2}, .slots = slots.data(), .num_pages = 1, .send = send.data()};
  CHECK(k::ValidateArgs(ok).empty());
  k::PackArgs bad_layers = ok;
  bad_layers.layers = {0, 3};
  CHECK(k::ValidateArgs(bad_layers) == "pools[0]: layers end 3 > num_layers 2");
  k::PackArgs no_send = ok;
  no_send.send = nullptr;
  CHECK(k::ValidateArgs(no_send) == "send is null");
  k::ZigzagArgs zz{.dense = {},
                   .num_layers = 1,
                   .recv = send.data(),
                   .run = {.num_pages = 7, .num_ranks = 2},
                   .shard_pages = 3};
  CHECK(k::ValidateArgs(zz) == "shard_pages 3 < largest zigzag shard 4");
}

TEST_CASE("the unpack index maps shard positions to records and marks missing pages") {
  const std::vector<std::vector<int64_t>> shards = {{4, 0}, {}, {2}};
  CHECK(k::BuildUnpackIndex(shards, 2, 6) == std::vector<int32_t>{1, -1, 4, -1, 0, -1});
}
