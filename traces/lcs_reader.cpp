// libCacheSim's binary traces: `lcs` (an 8192-byte header, then fixed-size little-endian records
// of one of eight versions) and `oracle_general` (version 1's 24-byte record with no header).
// Each record is one request for one cached object; the reader makes it a request of one block
// (and one token to compute) whose id is the object id, interned per file (traces/README.md, "lcs"
// and "oracle_general", states the mapping and where the layouts come from). There are no lines:
// errors name the record's 1-based index and its byte offset.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>
#include <unordered_map>
#include <utility>

#include "traces/format_readers.h"
#include "traces/record_fields.h"

namespace kvlanes::reader {

namespace {

constexpr size_t kLcsHeaderBytes = 8192;
constexpr size_t kLcsVersionAt = 8;  // after start_magic
constexpr size_t kLcsNReqAt = 24;    // stat.n_req, after the stat's own version at 16
constexpr size_t kLcsNObjAt = 32;    // stat.n_obj
constexpr size_t kLcsEndMagicAt = kLcsHeaderBytes - 8;
// Bytes per record of lcs versions 1 to 8 (the index is the version): 1 clock_time u32, obj_id
// u64, obj_size u32, next_access_vtime i64; 2 adds op and tenant (u32); 3 widens obj_size to
// i64 and adds ttl (u32); 4 to 8 append 1, 2, 4, 8, 16 u32 features to version 3's record.
constexpr size_t kLcsRecordBytes[] = {0, 24, 28, 36, 40, 44, 52, 68, 100};
constexpr int64_t kLcsMaxVersion = 8;
constexpr size_t kOracleGeneralRecordBytes = 24;  // lcs version 1's record
constexpr int64_t kNsPerClockSecond = 1'000'000'000;
// A request is a block and one token (ObjectRequests::Add): the block must leave room for it.
constexpr int64_t kMaxBlockTokens = int64_t{1} << 62;

uint64_t LoadLe(const char* p, int bytes) {
  uint64_t v = 0;
  for (int i = bytes - 1; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(p[i]);
  return v;
}

std::string Hex(uint64_t v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "0x%016llx", static_cast<unsigned long long>(v));
  return buf;
}

// The records of one file, each made a request of one block (the mapping in traces/README.md).
class ObjectRequests {
 public:
  ObjectRequests(const std::string& path, const TraceOptions& opt, FileTrace* out)
      : path_(path), opt_(opt), out_(out) {
    out_->block_tokens = opt.block_tokens > 0 ? opt.block_tokens : opt.page_tokens;
    if (out_->block_tokens > kMaxBlockTokens) {
      throw InputError(path, 0, "block_tokens",
                       "block size " + std::to_string(out_->block_tokens) + " tokens is too large");
    }
  }

  [[noreturn]] void Fail(int64_t index, size_t offset, const char* field,
                         const std::string& message) const {
    throw InputError(path_, 0, field,
                     "record " + std::to_string(index) + " (byte offset " + std::to_string(offset) +
                         "): " + message);
  }

  // Record `index` (1-based) at byte `offset` of the file, in the layout of lcs `version` (1 for
  // oracle_general).
  void Add(const char* p, int64_t index, size_t offset, int64_t version) {
    const uint32_t clock_time = static_cast<uint32_t>(LoadLe(p, 4));
    const uint64_t obj_id = LoadLe(p + 4, 8);
    const int64_t obj_size = version >= 3 ? static_cast<int64_t>(LoadLe(p + 12, 8))
                                          : static_cast<int64_t>(LoadLe(p + 12, 4));
    if (obj_size < 0)
      Fail(index, offset, "obj_size", "must not be negative, got " + std::to_string(obj_size));
    // libCacheSim's readers skip size-0 requests by default (ignore_size_zero_req).
    if (obj_size == 0) return;
    const int64_t arrival_ns = static_cast<int64_t>(clock_time) * kNsPerClockSecond;
    if (!opt_.allow_unsorted && has_prev_ && arrival_ns < prev_ns_) {
      Fail(index, offset, "clock_time",
           "timestamp goes backwards: " + std::to_string(clock_time) + " s after " +
               std::to_string(prev_ns_ / kNsPerClockSecond) + " s in record " +
               std::to_string(prev_index_) + " (pass --allow-unsorted to sort the file by time)");
    }
    has_prev_ = true;
    prev_ns_ = arrival_ns;
    prev_index_ = index;
    // Object ids are 64-bit hashes; block ids must stay below 2^40, so each distinct id gets the
    // next sequential one (first-seen order): equal objects keep equal ids, exactly.
    const auto [it, fresh] = ids_.try_emplace(obj_id, ids_.size());
    Request r;
    r.arrival_ns = arrival_ns;
    // The object's block is the cacheable prefix; the one token past it is the one the engine
    // computes in any request, so a request for a cached object hits its whole block.
    r.input_tokens = out_->block_tokens + 1;
    r.output_tokens = 0;
    r.line = index;
    const size_t first = out_->ids.size();
    out_->ids.push_back(it->second);
    out_->AddRequest(std::move(r), first);
  }

  // Every whole record of data[begin, end); a partial last record is an error.
  void AddAll(const std::string& data, size_t begin, size_t record_bytes, int64_t version) {
    const size_t n = (data.size() - begin) / record_bytes;
    const size_t rest = (data.size() - begin) % record_bytes;
    if (rest != 0) {
      Fail(static_cast<int64_t>(n) + 1, begin + n * record_bytes, "",
           "the file ends " + std::to_string(rest) + " bytes into a record of " +
               std::to_string(record_bytes) + " bytes (version " + std::to_string(version) +
               "): truncated or not this format");
    }
    out_->ids.reserve(n);
    out_->requests.reserve(n);
    out_->id_first.reserve(n);
    for (size_t i = 0; i < n; ++i) {
      const size_t offset = begin + i * record_bytes;
      Add(data.data() + offset, static_cast<int64_t>(i) + 1, offset, version);
    }
  }

 private:
  const std::string& path_;
  const TraceOptions& opt_;
  FileTrace* out_;
  std::unordered_map<uint64_t, uint64_t> ids_;
  bool has_prev_ = false;
  int64_t prev_ns_ = 0;
  int64_t prev_index_ = 0;
};

}  // namespace

bool HasLcsMagic(const char* data, size_t size) {
  return size >= 8 && LoadLe(data, 8) == kLcsMagic;
}

void ReadLcs(const std::string& path, const std::string& data, const TraceOptions& opt,
             FileTrace* out) {
  if (data.size() < kLcsHeaderBytes) {
    throw InputError(path, 0, "",
                     "file is " + std::to_string(data.size()) +
                         " bytes, shorter than the 8192-byte header of a libCacheSim lcs trace");
  }
  const char* h = data.data();
  const auto header_fail = [&](const char* field, const std::string& message) {
    throw InputError(path, 0, field, "lcs header: " + message);
  };
  if (LoadLe(h, 8) != kLcsMagic) {
    header_fail("start_magic", "is " + Hex(LoadLe(h, 8)) + ", expected " + Hex(kLcsMagic) +
                                   " (not a libCacheSim lcs trace; a zstd-compressed .lcs.zst "
                                   "must be decompressed first)");
  }
  if (LoadLe(h + kLcsEndMagicAt, 8) != kLcsMagic) {
    header_fail("end_magic", "is " + Hex(LoadLe(h + kLcsEndMagicAt, 8)) + ", expected " +
                                 Hex(kLcsMagic) + " at byte offset 8184");
  }
  const uint64_t version = LoadLe(h + kLcsVersionAt, 8);
  if (version < 1 || version > static_cast<uint64_t>(kLcsMaxVersion)) {
    header_fail("version", "is " + std::to_string(version) + "; versions 1 to " +
                               std::to_string(kLcsMaxVersion) + " are known");
  }
  const int64_t n_req = static_cast<int64_t>(LoadLe(h + kLcsNReqAt, 8));
  const int64_t n_obj = static_cast<int64_t>(LoadLe(h + kLcsNObjAt, 8));
  if (n_req < 0 || n_obj < 0) {
    header_fail(n_req < 0 ? "n_req" : "n_obj",
                "must not be negative, got " + std::to_string(n_req < 0 ? n_req : n_obj));
  }
  const size_t record_bytes = kLcsRecordBytes[version];
  const int64_t records = static_cast<int64_t>((data.size() - kLcsHeaderBytes) / record_bytes);
  // A header that counts its requests must count the records the file holds (0: not filled in).
  if (n_req != 0 && (data.size() - kLcsHeaderBytes) % record_bytes == 0 && n_req != records) {
    header_fail("n_req", "says " + std::to_string(n_req) + " requests, the file holds " +
                             std::to_string(records) + " records of " +
                             std::to_string(record_bytes) + " bytes (version " +
                             std::to_string(version) + "): truncated or padded");
  }
  ObjectRequests(path, opt, out)
      .AddAll(data, kLcsHeaderBytes, record_bytes, static_cast<int64_t>(version));
}

void ReadOracleGeneral(const std::string& path, const std::string& data, const TraceOptions& opt,
                       FileTrace* out) {
  if (HasLcsMagic(data.data(), data.size())) {
    throw InputError(path, 0, "",
                     "the file starts with the lcs header's magic number: it is a libCacheSim lcs "
                     "trace, not oracle_general (pass --format lcs or leave --format out)");
  }
  ObjectRequests(path, opt, out).AddAll(data, 0, kOracleGeneralRecordBytes, 1);
}

}  // namespace kvlanes::reader
