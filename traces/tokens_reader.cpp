// Tokens JSONL (hand-made tests): one request a line with its token ids; block ids are interned
// from the token content, so they are exact.
#include <limits>
#include <string>
#include <unordered_map>
#include <utility>

#include "traces/format_readers.h"
#include "traces/record_fields.h"

namespace kvlanes::reader {

namespace {

enum : size_t { kTimestamp, kTokens, kOutputLength };

// The `tokens` field: a non-empty array of token ids in [0, 2^63).
std::vector<int64_t> TokenIds(const RecordField& f, const Where& w) {
  const RawValue& v = Field(f.present ? &f.value : nullptr, "tokens", w);
  if (v.kind != JsonKind::kArray) {
    Fail(w, "tokens", "must be an array of token ids, got " + Describe(v));
  }
  if (f.list.empty()) Fail(w, "tokens", "must be non-empty (input length 0)");
  std::vector<int64_t> ids(f.list.size());
  const uint64_t max = static_cast<uint64_t>(std::numeric_limits<int64_t>::max());
  for (size_t i = 0; i < f.list.size(); ++i) {
    if (static_cast<int64_t>(i) == f.bad_index || f.list[i] > max) {
      const std::string got = static_cast<int64_t>(i) == f.bad_index
                                  ? Describe(f.bad)
                                  : "the integer " + std::to_string(f.list[i]);
      Fail(w, "tokens",
           "element " + std::to_string(i) + " must be a non-negative integer below 2^63, got " +
               got);
    }
    ids[i] = static_cast<int64_t>(f.list[i]);
  }
  return ids;
}

// Interning table: (previous block's id, this block's tokens) -> sequential id from 0. Chaining on
// the previous id makes equal ids mean equal prefixes, like Mooncake's chained hashes, but exact.
class BlockInterner {
 public:
  explicit BlockInterner(int64_t block) : block_(block) {}

  // Ids of the full blocks of `tokens`; the partial last block gets none.
  std::vector<uint64_t> Ids(const std::vector<int64_t>& tokens, const Where& w) {
    std::vector<uint64_t> out;
    uint64_t parent = kNoParent;
    const int64_t full_blocks = static_cast<int64_t>(tokens.size()) / block_;
    for (int64_t k = 0; k < full_blocks; ++k) {
      key_.assign(reinterpret_cast<const char*>(&parent), sizeof parent);
      key_.append(reinterpret_cast<const char*>(tokens.data() + k * block_),
                  static_cast<size_t>(block_) * sizeof(int64_t));
      const auto [it, fresh] = ids_.emplace(key_, ids_.size());
      if (it->second >= kIdLimit) Fail(w, "tokens", "more than 2^40 distinct blocks in one file");
      parent = it->second;
      out.push_back(parent);
    }
    return out;
  }

 private:
  static constexpr uint64_t kNoParent = ~uint64_t{0};
  int64_t block_;
  std::unordered_map<std::string, uint64_t> ids_;
  std::string key_;  // reused buffer
};

}  // namespace

void ReadTokens(const std::string& path, const std::string& data, const TraceOptions& opt,
                FileTrace* out) {
  const int64_t block = opt.block_tokens > 0 ? opt.block_tokens : opt.page_tokens;
  out->block_tokens = block;
  OrderCheck order(opt.allow_unsorted, "timestamp", "ms", kNsPerMs);
  BlockInterner interner(block);
  RecordScanner scan({RecordField("timestamp"), RecordField("tokens", /*list=*/true),
                      RecordField("output_length")});
  const auto value = [&](size_t i) {
    const RecordField& f = scan.field(i);
    return f.present ? &f.value : nullptr;
  };
  ForEachLine(path, data, opt.max_line_bytes, [&](const char* b, const char* e, int64_t line) {
    const Where w{path, line};
    scan.Scan(b, e, w);
    Request r;
    r.arrival_ns = MsTimestampField(value(kTimestamp), "timestamp", w);
    const std::vector<int64_t> tokens = TokenIds(scan.field(kTokens), w);
    r.input_tokens = static_cast<int64_t>(tokens.size());
    r.output_tokens = NonNegativeIntField(value(kOutputLength), "output_length", w);
    r.line = line;
    r.block_ids = interner.Ids(tokens, w);
    order.Next(r.arrival_ns, w);
    out->requests.push_back(std::move(r));
  });
}

}  // namespace kvlanes::reader
