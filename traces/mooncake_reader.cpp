// Mooncake JSONL: one request a line, an id for every block including the partial last one. The
// hot path of trace loading: each line is scanned once (json_scan.h), hash_ids read on the fly.
#include <utility>

#include "traces/format_readers.h"
#include "traces/huge_pages.h"
#include "traces/record_fields.h"

namespace kvlanes::reader {

namespace {
constexpr int64_t kMooncakeBlockTokens = 512;
enum : size_t { kTimestamp, kInputLength, kOutputLength, kHashIds };
}  // namespace

void ReadMooncake(const std::string& path, const std::string& data, const TraceOptions& opt,
                  FileTrace* out) {
  const int64_t block = opt.block_tokens > 0 ? opt.block_tokens : kMooncakeBlockTokens;
  out->block_tokens = block;
  OrderCheck order(opt.allow_unsorted, "timestamp", "ms", kNsPerMs);
  RecordScanner scan({RecordField("timestamp"), RecordField("input_length"),
                      RecordField("output_length"), RecordField("hash_ids", /*list=*/true)});
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
    // Checked in this order whatever the key order of the line, so a line with several faults
    // always reports the same one.
    r.arrival_ns = MsTimestampField(value(kTimestamp), "timestamp", w);
    r.input_tokens = PositiveIntField(value(kInputLength), "input_length", w);
    r.output_tokens = NonNegativeIntField(value(kOutputLength), "output_length", w);
    const size_t first = scan.field(kHashIds).sink_first;
    const size_t ids = HashIdsField(scan.field(kHashIds), w);
    r.line = line;
    // Mooncake gives an id to every block, the partial last one included.
    const int64_t expected = CeilDiv(r.input_tokens, block);
    if (static_cast<int64_t>(ids) != expected) {
      Fail(w, "hash_ids",
           "has " + std::to_string(ids) + " ids, expected ceil(input_length " +
               std::to_string(r.input_tokens) + " / block " + std::to_string(block) +
               ") = " + std::to_string(expected));
    }
    order.Next(r.arrival_ns, w);
    out->AddRequest(std::move(r), first);
  });
}

}  // namespace kvlanes::reader
