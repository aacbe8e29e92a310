// Alibaba Qwen-Bailian usage traces (alibaba-edu/qwen-bailian-usagetraces-anon): Mooncake-like
// JSONL with 16-token blocks, timestamps in seconds and the chat structure (chat_id,
// parent_chat_id, turn, type). The layout and what is and is not confirmed about it:
// traces/README.md, "bailian".
#include <utility>

#include "base/huge_pages.h"
#include "traces/format_readers.h"
#include "traces/record_fields.h"

namespace kvlanes::reader {

namespace {
constexpr int64_t kBailianBlockTokens = 16;
enum : size_t {
  kChatId,
  kParentChatId,
  kTimestamp,
  kInputLength,
  kOutputLength,
  kType,
  kTurn,
  kHashIds
};
}  // namespace

void ReadBailian(const std::string& path, const std::string& data, const TraceOptions& opt,
                 FileTrace* out) {
  const int64_t block = opt.block_tokens > 0 ? opt.block_tokens : kBailianBlockTokens;
  out->block_tokens = block;
  OrderCheck order(opt.allow_unsorted, "timestamp", "s", 1'000'000'000);
  RecordScanner scan({RecordField("chat_id"), RecordField("parent_chat_id"),
                      RecordField("timestamp"), RecordField("input_length"),
                      RecordField("output_length"), RecordField("type"), RecordField("turn"),
                      RecordField("hash_ids", /*list=*/true)});
  scan.field(kHashIds).sink = &out->ids;  // every record's ids into one array
  // Room for more ids than a file with ", " between them can hold (each takes 3 bytes or more), so
  // the array is not copied as it grows; pages of it that are never written take no memory.
  out->ids.reserve(data.size() / 3 + 1);
  AdviseHugePages(out->ids.data(), out->ids.capacity() * sizeof(uint64_t));
  const auto value = [&](size_t i) {
    const RecordField& f = scan.field(i);
    return f.present ? &f.value : nullptr;
  };
  ForEachLine(path, data, opt.max_line_bytes, [&](const char* b, const char* e, int64_t line) {
    const Where w{path, line};
    scan.Scan(b, e, w);
    Request r;
    // A fixed order of checks, whatever the key order of the line.
    const int64_t chat = NonNegativeIntField(value(kChatId), "chat_id", w);
    const int64_t parent = IntField(value(kParentChatId), "parent_chat_id", w);
    if (parent < -1) {
      Fail(w, "parent_chat_id",
           "must be -1 (a root request) or a chat id >= 0, got " + std::to_string(parent));
    }
    if (parent == chat) {
      Fail(w, "parent_chat_id",
           "equals the record's own chat_id " + std::to_string(chat) +
               "; a request cannot be its own parent");
    }
    NonNegativeIntField(value(kTurn), "turn", w);
    if (const RawValue* t = value(kType); t != nullptr && t->kind != JsonKind::kString) {
      Fail(w, "type", "must be a string (text, search, image, file, ...), got " + Describe(*t));
    }
    r.arrival_ns = SecondsTimestampField(value(kTimestamp), "timestamp", w);
    r.input_tokens = PositiveIntField(value(kInputLength), "input_length", w);
    r.output_tokens = NonNegativeIntField(value(kOutputLength), "output_length", w);
    const size_t first = scan.field(kHashIds).sink_first;
    const size_t ids = HashIdsField(scan.field(kHashIds), w);
    r.line = line;
    // One id per block; whether the published files always give the partial last block an id is
    // not stated upstream, so both counts are accepted (traces/README.md).
    const int64_t ceil_n = CeilDiv(r.input_tokens, block);
    const int64_t floor_n = r.input_tokens / block;
    const int64_t n = static_cast<int64_t>(ids);
    if (n != ceil_n && n != floor_n) {
      std::string expected = "ceil(input_length " + std::to_string(r.input_tokens) + " / block " +
                             std::to_string(block) + ") = " + std::to_string(ceil_n);
      if (floor_n != ceil_n) expected += " (or " + std::to_string(floor_n) + " full blocks)";
      Fail(w, "hash_ids",
           "has " + std::to_string(n) + " ids, expected " + expected +
               "; a Mooncake trace with 512-token blocks that carries chat ids needs --format "
               "mooncake");
    }
    order.Next(r.arrival_ns, w);
    out->AddRequest(std::move(r), first);
  });
}

}  // namespace kvlanes::reader
