// traces/lcs_reader.cpp: libCacheSim's lcs traces (every record version) and oracleGeneral files,
// written here byte by byte, read as one request of one block per record with exact interned ids;
// the hand-made samples of tests/fixtures/traces read end to end; every refusal names the file,
// the field and the record's index and byte offset.
#include <doctest/doctest.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "tests/traces/test_files.h"
#include "traces/trace_reader.h"

namespace kvlanes {
namespace {

using testing::ScratchDir;

constexpr uint64_t kMagic = 0x123456789abcdef0;
constexpr size_t kRecordBytes[] = {0, 24, 28, 36, 40, 44, 52, 68, 100};

struct Rec {
  uint32_t t;
  uint64_t id;
  int64_t size;
};

void PutLe(std::string* s, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) s->push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
}

// One record in the layout of lcs `version` (1 is also oracleGeneral's): the fields this reader
// uses, then op/tenant, ttl, next_access_vtime and features filled with bytes it must skip.
std::string Record(int version, const Rec& r) {
  std::string s;
  PutLe(&s, r.t, 4);
  PutLe(&s, r.id, 8);
  PutLe(&s, static_cast<uint64_t>(r.size), version >= 3 ? 8 : 4);
  if (version >= 2) PutLe(&s, 0x00ABCD01, 4);                    // op 1, tenant 0xABCD
  if (version >= 3) PutLe(&s, 3600, 4);                          // ttl
  PutLe(&s, 0xFFFFFFFFFFFFFFFF, 8);                              // next_access_vtime -1
  while (s.size() < kRecordBytes[version]) s.push_back('\x7F');  // features
  REQUIRE(s.size() == kRecordBytes[version]);
  return s;
}

std::string Header(uint64_t version, int64_t n_req, uint64_t end_magic = kMagic) {
  std::string h;
  PutLe(&h, kMagic, 8);
  PutLe(&h, version, 8);
  PutLe(&h, 1, 8);  // stat version
  PutLe(&h, static_cast<uint64_t>(n_req), 8);
  PutLe(&h, 3, 8);  // n_obj
  h.resize(8192 - 8, '\0');
  PutLe(&h, end_magic, 8);
  return h;
}

std::string Lcs(int version, const std::vector<Rec>& recs) {
  std::string s = Header(static_cast<uint64_t>(version), static_cast<int64_t>(recs.size()));
  for (const Rec& r : recs) s += Record(version, r);
  return s;
}

std::string OracleGeneral(const std::vector<Rec>& recs) {
  std::string s;
  for (const Rec& r : recs) s += Record(1, r);
  return s;
}

// Five records over 3 s: two 64-bit ids seen twice, one of size 0 (skipped), one id at 2^64-1.
const std::vector<Rec> kRecs = {{10, 0xDEADBEEFCAFEF00D, 4096}, {10, 7, 4096},
                                {11, 0xDEADBEEFCAFEF00D, 4096}, {12, 99, 0},
                                {13, 0xFFFFFFFFFFFFFFFF, 1},    {13, 7, 4096}};

// The requests kRecs become with `block` tokens per block.
void CheckMapped(const Trace& t, int64_t block) {
  REQUIRE(t.requests.size() == 5);
  const std::vector<int64_t> secs = {10, 10, 11, 13, 13};
  const std::vector<uint64_t> ids = {0, 1, 0, 2, 1};  // first-seen order
  const std::vector<int64_t> record = {1, 2, 3, 5, 6};
  for (size_t i = 0; i < 5; ++i) {
    const Request& r = t.requests[i];
    CHECK(r.arrival_ns == secs[i] * 1'000'000'000);
    CHECK(r.input_tokens == block + 1);  // the object's block and the token computed past it
    CHECK(r.output_tokens == 0);
    CHECK(r.block_ids == std::vector<uint64_t>{ids[i]});
    CHECK(r.line == record[i]);
  }
  CHECK(t.block_tokens == block);
}

void ExpectError(const std::string& bytes, std::optional<TraceFormat> fmt, const std::string& field,
                 const std::string& fragment, TraceOptions opt = {}) {
  ScratchDir dir;
  const std::string p = dir.Write("bad.lcs", bytes);
  try {
    LoadTrace({p}, fmt, opt);
    FAIL("expected an InputError on field " << field << " with " << fragment);
  } catch (const InputError& e) {
    const std::string what = e.what();
    INFO("message: " << what);
    CHECK(e.file() == p);
    CHECK(e.line() == 0);
    CHECK(e.field() == field);
    CHECK(what.rfind(p + ": " + (field.empty() ? "" : field + ": "), 0) == 0);
    CHECK(what.find(fragment) != std::string::npos);
  }
}

TEST_CASE("an lcs trace of every version becomes one request of one block per record") {
  for (int version = 1; version <= 8; ++version) {
    INFO("version " << version);
    ScratchDir dir;
    const std::string p = dir.Write("t.lcs", Lcs(version, kRecs));
    CHECK(DetectTraceFormat(p) == TraceFormat::kLcs);
    const Trace t = LoadTrace({p}, std::nullopt, {});
    CHECK(t.format == TraceFormat::kLcs);
    CheckMapped(t, 64);  // the page size: the default block
    CheckMapped(LoadTrace({p}, TraceFormat::kLcs, TraceOptions{.block_tokens = 512}), 512);
  }
}

TEST_CASE("an oracleGeneral file reads as lcs version 1 records without a header") {
  ScratchDir dir;
  const std::string p = dir.Write("t.oracleGeneral.bin", OracleGeneral(kRecs));
  const Trace t = LoadTrace({p}, TraceFormat::kOracleGeneral, {});
  CHECK(t.format == TraceFormat::kOracleGeneral);
  CheckMapped(t, 64);
  // With nothing to recognise it by, it is not detected: its bytes are not a text format.
  CHECK_THROWS_AS(LoadTrace({p}, std::nullopt, {}), InputError);
}

TEST_CASE("the hand-made libCacheSim samples read with interned ids in time order") {
  const std::string dir = std::string(KVLANES_SOURCE_DIR) + "/tests/fixtures/traces/";
  const Trace lcs = LoadTrace({dir + "lcs_v2_sample.lcs"}, std::nullopt, {});
  const Trace og = LoadTrace({dir + "oracle_general_sample.bin"}, TraceFormat::kOracleGeneral, {});
  for (const Trace* t : {&lcs, &og}) {
    REQUIRE(t->requests.size() == 11);  // 12 records, one of size 0
    std::vector<uint64_t> ids;
    for (const Request& r : t->requests) ids.push_back(r.block_ids[0]);
    CHECK(ids == std::vector<uint64_t>{0, 1, 2, 0, 3, 1, 4, 3, 5, 0, 6});
    CHECK(t->requests.front().arrival_ns == 100'000'000'000);
    CHECK(t->requests.back().arrival_ns == 107'000'000'000);
    CHECK(t->requests[5].line == 7);  // record 6 skipped
  }
}

TEST_CASE("lcs files merge in time order with the second file's ids namespaced") {
  ScratchDir dir;
  const std::string a = dir.Write("a.lcs", Lcs(1, {{5, 42, 1}, {20, 43, 1}}));
  const std::string b = dir.Write("b.lcs", Lcs(3, {{10, 42, 1}}));
  const Trace t = LoadTrace({a, b}, std::nullopt, {});
  REQUIRE(t.requests.size() == 3);
  CHECK(t.requests[0].block_ids == std::vector<uint64_t>{0});
  CHECK(t.requests[1].block_ids == std::vector<uint64_t>{(uint64_t{1} << 40) | 0});
  CHECK(t.requests[1].source == 1);
  CHECK(t.requests[2].block_ids == std::vector<uint64_t>{1});
}

TEST_CASE("a directory's lcs files are part of it, merged as if named one by one") {
  ScratchDir dir;
  const std::string a = dir.Write("a.lcs", Lcs(1, {{5, 42, 1}, {20, 43, 1}}));
  const std::string b = dir.Write("b.lcs", Lcs(3, {{10, 42, 1}}));
  dir.Write("c.oracleGeneral.bin", OracleGeneral(kRecs));  // no magic: never taken in
  const Trace named = LoadTrace({a, b}, std::nullopt, {});
  const Trace whole = LoadTrace({dir.path()}, std::nullopt, {});
  REQUIRE(whole.requests.size() == 3);
  for (size_t i = 0; i < whole.requests.size(); ++i) {
    CHECK(whole.requests[i].block_ids == named.requests[i].block_ids);
    CHECK(whole.requests[i].arrival_ns == named.requests[i].arrival_ns);
    CHECK(whole.requests[i].source == named.requests[i].source);
  }
}

TEST_CASE("lcs headers and records that cannot be read are refused naming the field") {
  ExpectError(std::string(100, '\0'), TraceFormat::kLcs, "", "shorter than the 8192-byte header");
  std::string wrong_start = Lcs(1, kRecs);
  wrong_start[0] = 'x';
  ExpectError(wrong_start, TraceFormat::kLcs, "start_magic", "not a libCacheSim lcs trace");
  ExpectError(Header(1, 0, 42) + Record(1, kRecs[0]), std::nullopt, "end_magic",
              "byte offset 8184");
  ExpectError(Header(0, 0) + Record(1, kRecs[0]), std::nullopt, "version", "versions 1 to 8");
  ExpectError(Header(9, 0) + Record(1, kRecs[0]), std::nullopt, "version", "is 9");
  ExpectError(Header(2, 3) + Record(2, kRecs[0]), std::nullopt, "n_req",
              "says 3 requests, the file holds 1 records");
  ExpectError(Header(2, -1) + Record(2, kRecs[0]), std::nullopt, "n_req", "must not be negative");
  // n_req 0 (a header whose statistics were not filled in) is accepted.
  ScratchDir dir;
  CHECK(LoadTrace({dir.Write("z.lcs", Header(2, 0) + Record(2, kRecs[0]))}, std::nullopt, {})
            .requests.size() == 1);
  ExpectError(Header(2, 0) + Record(2, kRecs[0]) + "abc", std::nullopt, "",
              "record 2 (byte offset 8220): the file ends 3 bytes into a record of 28 bytes");
  ExpectError(Lcs(3, {{1, 5, 10}, {2, 6, -4}}), std::nullopt, "obj_size",
              "record 2 (byte offset 8228): must not be negative, got -4");
  ExpectError(Header(1, 0), std::nullopt, "", "file holds no requests");
  ExpectError(Lcs(1, {{1, 5, 0}}), std::nullopt, "", "file holds no requests");
}

TEST_CASE("lcs timestamps going backwards are refused naming both records unless unsorted") {
  const std::string text = Lcs(2, {{30, 1, 1}, {20, 2, 1}, {25, 1, 1}});
  ExpectError(text, std::nullopt, "clock_time",
              "record 2 (byte offset 8220): timestamp goes backwards: 20 s after 30 s in record 1");
  ScratchDir dir;
  TraceOptions opt;
  opt.allow_unsorted = true;
  const Trace t = LoadTrace({dir.Write("u.lcs", text)}, std::nullopt, opt);
  REQUIRE(t.requests.size() == 3);
  CHECK(t.requests[0].arrival_ns == 20'000'000'000);
  CHECK(t.requests[0].line == 2);
  CHECK(t.requests[2].block_ids == std::vector<uint64_t>{0});
  ExpectError(OracleGeneral({{30, 1, 1}, {20, 2, 1}}), TraceFormat::kOracleGeneral, "clock_time",
              "record 2 (byte offset 24)");
}

TEST_CASE("a libCacheSim file given the wrong format says which format it is") {
  ExpectError(Lcs(1, kRecs), TraceFormat::kOracleGeneral, "", "pass --format lcs");
  ScratchDir dir;
  const std::string p = dir.Write("t.lcs", Lcs(1, kRecs));
  try {
    LoadTrace({p}, TraceFormat::kMooncake, {});
    FAIL("an lcs file read as Mooncake JSONL");
  } catch (const InputError& e) {
    CHECK(std::string(e.what()).find("looks like a libCacheSim lcs trace") != std::string::npos);
    CHECK(std::string(e.what()).find("pass --format lcs") != std::string::npos);
  }
  ExpectError(OracleGeneral(kRecs) + "x", TraceFormat::kOracleGeneral, "",
              "record 7 (byte offset 144): the file ends 1 bytes into a record of 24 bytes");
}

}  // namespace
}  // namespace kvlanes
