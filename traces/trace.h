// A request trace in memory, independent of its file format. Readers (trace_reader.h) produce it;
// the replay engine consumes it. Prefix identity is carried by block ids: two requests share their
// first k blocks exactly when their first k block ids are equal (chained prefix hashes).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "io/name_table.h"

namespace kvlanes {

enum class TraceFormat { kMooncake, kKvTester, kTokens, kBailian, kCsv, kLcs, kOracleGeneral };

// The names `--format`, `trace.format` and reports use.
inline constexpr NameTable<TraceFormat, 7> kTraceFormatNames{
    {{{TraceFormat::kMooncake, "mooncake"},
      {TraceFormat::kKvTester, "kvtester"},
      {TraceFormat::kTokens, "tokens"},
      {TraceFormat::kBailian, "bailian"},
      {TraceFormat::kCsv, "csv"},
      {TraceFormat::kLcs, "lcs"},
      {TraceFormat::kOracleGeneral, "oracle_general"}}},
    "trace format"};

// A request's block ids: a read-only run of a store that many requests share (the readers put every
// request of a file into one array, so loading a trace takes no allocation per request). A copy
// shares the store, which lives as long as any request that points into it. Built from a vector
// (or by push_back), it holds a store of its own: requests written by hand, in tests.
class BlockIds {
 public:
  using Store = std::vector<uint64_t>;

  BlockIds() = default;
  BlockIds(std::vector<uint64_t> ids)  // NOLINT(google-explicit-constructor): r.block_ids = v
      : store_(std::make_shared<Store>(std::move(ids))),
        data_(store_->data()),
        size_(store_->size()) {}
  BlockIds(std::initializer_list<uint64_t> ids) : BlockIds(std::vector<uint64_t>(ids)) {}
  // Entries [first, first + n) of `store`. REQUIRES: first + n <= store->size(); the store is not
  // resized while any BlockIds points into it.
  BlockIds(std::shared_ptr<Store> store, size_t first, size_t n)
      : store_(std::move(store)), data_(store_->data() + first), size_(n) {}

  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  const uint64_t* data() const { return data_; }
  const uint64_t* begin() const { return data_; }
  const uint64_t* end() const { return data_ + size_; }
  const uint64_t& operator[](size_t i) const { return data_[i]; }

  // Appends in place when this is the whole of a store that nothing else shares, else copies its
  // ids into a store of its own first.
  void push_back(uint64_t id) {
    if (!store_ || store_.use_count() != 1 || data_ != store_->data() || size_ != store_->size())
      store_ = std::make_shared<Store>(begin(), end());
    store_->push_back(id);
    data_ = store_->data();
    size_ = store_->size();
  }

  friend bool operator==(const BlockIds& a, const BlockIds& b) {
    return a.size_ == b.size_ && std::equal(a.begin(), a.end(), b.begin());
  }
  friend bool operator==(const BlockIds& a, const std::vector<uint64_t>& b) {
    return a.size_ == b.size() && std::equal(a.begin(), a.end(), b.begin());
  }

 private:
  std::shared_ptr<Store> store_;
  const uint64_t* data_ = nullptr;
  size_t size_ = 0;
};

struct Request {
  int64_t arrival_ns = 0;     // since the trace's time origin; non-decreasing in a Trace
  int64_t input_tokens = 0;   // > 0
  int64_t output_tokens = 0;  // >= 0
  // One id per block of Trace::block_tokens tokens, namespaced per source file so that two files
  // never share a prefix. May cover only the full blocks (kv-cache-tester) or also the partial
  // last block (Mooncake); pages past the last id have no key and are never cached.
  BlockIds block_ids;
  uint32_t source = 0;  // index into Trace::sources
  int64_t line = 0;     // 1-based line of the record in its source file (for messages)
};

struct Trace {
  TraceFormat format = TraceFormat::kMooncake;
  int64_t block_tokens = 0;          // tokens per block id
  std::vector<std::string> sources;  // file paths in load order
  std::vector<Request> requests;     // replay order: by arrival, ties by (source, line)
};

// Most pages one block id may cover (block_tokens / page_tokens): a page's index in its block
// is 32 bits (PageKey::sub), and ids x pages-per-block products stay far from 64 bits.
inline constexpr int64_t kMaxBlockPages = int64_t{1} << 31;

// A page is identified by the block it lies in and its index inside that block.
struct PageKey {
  uint64_t block = 0;
  uint32_t sub = 0;
  friend bool operator==(const PageKey&, const PageKey&) = default;
};

struct PageKeyHash {
  size_t operator()(const PageKey& k) const {
    uint64_t x = k.block * 0x9E3779B97F4A7C15ull ^ (uint64_t{k.sub} + 0x632BE59BD9B9E5ull);
    x ^= x >> 31;
    x *= 0xBF58476D1CE4E5B9ull;
    x ^= x >> 29;
    return static_cast<size_t>(x);
  }
};

// Number of full pages among the first `tokens` tokens of `r` that have a key.
// REQUIRES: block_tokens % page_tokens == 0.
inline int64_t KeyedPages(const Request& r, int64_t tokens, int64_t page_tokens,
                          int64_t block_tokens) {
  const int64_t full = tokens / page_tokens;
  const int64_t keyed = static_cast<int64_t>(r.block_ids.size()) * (block_tokens / page_tokens);
  return full < keyed ? full : keyed;
}

// Key of page `i` of request `r`. REQUIRES: i < KeyedPages(r, r.input_tokens, ...).
inline PageKey PageKeyAt(const Request& r, int64_t i, int64_t pages_per_block) {
  return PageKey{r.block_ids[static_cast<size_t>(i / pages_per_block)],
                 static_cast<uint32_t>(i % pages_per_block)};
}

}  // namespace kvlanes
