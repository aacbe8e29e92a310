// Mooncake JSONL: one request a line, an id for every block including the partial last one. The
// hot path of trace loading. Each line first goes through a scanner made for the one record shape
// Mooncake files have (the four keys in any order, plain integers, an id list), which reads the
// ids straight into the file's one id array; a line it does not take whole (another key, a string,
// a sign, a fraction, a leading zero, an escape, an out-of-range or missing value, any fault) is
// read again by the strict scanner (json_scan.h), which then gives the result or the error. The
// fast scanner accepts only lines the strict one accepts, with the same values (traces/README.md,
// "Reading speed").
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include <cstdint>
#include <cstring>
#include <limits>
#include <utility>
#include <vector>

#include "base/huge_pages.h"
#include "traces/format_readers.h"
#include "traces/record_fields.h"

namespace kvlanes::reader {

namespace {
constexpr int64_t kMooncakeBlockTokens = 512;
// The shortest record line the reader accepts, its newline included:
// {"timestamp":0,"input_length":1,"output_length":0,"hash_ids":[0]}
constexpr size_t kMinRecordBytes = 66;
enum : size_t { kTimestamp, kInputLength, kOutputLength, kHashIds };

// ---- the fast scanner for the plain record shape ----------------------------------------------

bool IsDigit(char c) { return static_cast<unsigned char>(c - '0') <= 9; }
// The white space JSON allows, as TextScanner::Ws skips it inside a line.
bool IsSpace(char c) { return c == ' ' || c == '\t' || c == '\r'; }
const char* SkipSpace(const char* p, const char* e) {
  while (p < e && IsSpace(*p)) ++p;
  return p;
}

// The value of the first `len` (1..8) digits of `x`, the eight bytes at the number's start minus
// '0' from each (little-endian): the digits are moved to the top bytes, then combined in pairs,
// fours and eights (three multiplications).
[[gnu::always_inline]] inline uint64_t SwarDigits(uint64_t x, int len) {
  uint64_t y = x << (8 * (8 - len));
  y = ((y & 0x0F0F0F0F0F0F0F0Full) * 2561) >> 8;
  y = ((y & 0x00FF00FF00FF00FFull) * 6553601) >> 16;
  return ((y & 0x0000FFFF0000FFFFull) * 42949672960001ull) >> 32;
}

// At *p (p < e): a plain non-negative integer literal of at most `max_digits` digits (<= 19, so it
// fits 64 bits): no sign, no leading zero. Moves *p past it and returns true; false when the text
// there is anything else (or a longer number). What follows is the caller's to check: a fraction
// or exponent is no separator, so it ends the fast path there.
[[gnu::always_inline]] inline bool PlainInt(const char** pp, const char* e, int max_digits,
                                            uint64_t* out) {
  const char* p = *pp;
  if (e - p >= 8) {
    uint64_t w;
    std::memcpy(&w, p, 8);
    const uint64_t x = w - 0x3030303030303030ull;
    // A byte whose value minus '0' is not 0..9 has a bit in its high nibble of x or of x + 6; a
    // borrow or carry only reaches the bytes after the first such byte.
    const uint64_t non_digit = (x | (x + 0x0606060606060606ull)) & 0xF0F0F0F0F0F0F0F0ull;
    if (non_digit != 0) {
      const int len = __builtin_ctzll(non_digit) / 8;
      if (len == 0 || (len > 1 && *p == '0')) return false;
      *out = SwarDigits(x, len);
      *pp = p + len;
      return true;
    }
    // Eight digits or more (rare: an id below 2^40 has at most 13).
    if (*p == '0') return false;
    uint64_t v = SwarDigits(x, 8);
    const char* q = p + 8;
    while (q < e && IsDigit(*q)) {
      if (q - p >= max_digits) return false;
      v = v * 10 + static_cast<uint64_t>(*q - '0');
      ++q;
    }
    *out = v;
    *pp = q;
    return true;
  }
  // Fewer than eight bytes left in the line: digit by digit (at most 7, no overflow).
  if (p >= e || !IsDigit(*p)) return false;
  if (*p == '0' && p + 1 < e && IsDigit(p[1])) return false;
  uint64_t v = 0;
  const char* q = p;
  while (q < e && IsDigit(*q)) {
    v = v * 10 + static_cast<uint64_t>(*q - '0');
    ++q;
  }
  if (q - p > max_digits) return false;
  *out = v;
  *pp = q;
  return true;
}

// At the first byte after '[': the list's ids appended to *ids and *pp moved past ']'. False at
// the first thing that is not a plain id below 2^40, a separator (',' with white space around it)
// or the closing bracket; *ids may then hold part of the list (the caller cuts it back).
bool IdList(const char** pp, const char* e, std::vector<uint64_t>* ids) {
  const char* p = SkipSpace(*pp, e);
  if (p < e && *p == ']') {
    *pp = p + 1;
    return true;
  }
  uint64_t all = 0;  // the bitwise or of the ids: one test for the 2^40 limit
  for (;;) {
    uint64_t v;
    if (!PlainInt(&p, e, 13, &v)) return false;
    ids->push_back(v);
    all |= v;
    // The usual separator ", " before the next id, else the general case.
    if (e - p >= 3 && p[0] == ',' && p[1] == ' ' && IsDigit(p[2])) {
      p += 2;
      continue;
    }
    p = SkipSpace(p, e);
    if (p < e && *p == ']') break;
    if (p >= e || *p != ',') return false;
    p = SkipSpace(p + 1, e);
  }
  if (all >= kIdLimit) return false;
  *pp = p + 1;
  return true;
}

#if defined(__SSE2__)
// Bits of the 64 bytes at p: bit i set when p[i] is a comma, a space, a digit, a '0', a ']'.
struct ByteClasses {
  uint64_t comma, space, digit, zero, close;
};

[[gnu::always_inline]] inline ByteClasses Classify64(const char* p) {
  ByteClasses c{0, 0, 0, 0, 0};
  const __m128i kComma = _mm_set1_epi8(',');
  const __m128i kSpace = _mm_set1_epi8(' ');
  const __m128i kClose = _mm_set1_epi8(']');
  const __m128i kZero = _mm_set1_epi8('0');
  const __m128i kNine = _mm_set1_epi8(9);
  for (int i = 0; i < 4; ++i) {
    const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 16 * i));
    const __m128i d = _mm_sub_epi8(v, kZero);  // 0..9 for a digit (unsigned)
    const auto bits = [&](__m128i m) {
      return static_cast<uint64_t>(static_cast<uint32_t>(_mm_movemask_epi8(m))) << (16 * i);
    };
    c.comma |= bits(_mm_cmpeq_epi8(v, kComma));
    c.space |= bits(_mm_cmpeq_epi8(v, kSpace));
    c.close |= bits(_mm_cmpeq_epi8(v, kClose));
    c.zero |= bits(_mm_cmpeq_epi8(v, kZero));
    c.digit |= bits(_mm_cmpeq_epi8(_mm_max_epu8(d, kNine), kNine));
  }
  return c;
}

// Two ids of at most 8 digits each, at a0 and a1 (8 bytes readable at each), into out[0], out[1]:
// each one's digits moved to the top of its 64-bit half as SwarDigits does, then both combined
// at once in pairs, fours and eights (16-bit, 32-bit and 64-bit multiplications).
inline void TwoIds(const char* a0, int len0, const char* a1, int len1, uint64_t* out) {
  uint64_t w0, w1;
  std::memcpy(&w0, a0, 8);
  std::memcpy(&w1, a1, 8);
  const uint64_t x0 = (w0 - 0x3030303030303030ull) << (8 * (8 - len0));
  const uint64_t x1 = (w1 - 0x3030303030303030ull) << (8 * (8 - len1));
  const __m128i x = _mm_and_si128(
      _mm_set_epi64x(static_cast<int64_t>(x1), static_cast<int64_t>(x0)), _mm_set1_epi8(0x0F));
  const __m128i pairs =
      _mm_add_epi16(_mm_mullo_epi16(_mm_and_si128(x, _mm_set1_epi16(0x00FF)), _mm_set1_epi16(10)),
                    _mm_srli_epi16(x, 8));
  const __m128i fours = _mm_madd_epi16(pairs, _mm_set1_epi32((1 << 16) | 100));
  const __m128i eights =
      _mm_add_epi64(_mm_mul_epu32(fours, _mm_set1_epi64x(10000)), _mm_srli_epi64(fours, 32));
  _mm_storeu_si128(reinterpret_cast<__m128i*>(out), eights);
}

// At the byte after '[': when the list up to its ']' has the form Mooncake files write,
// "D, D, D" (D: 1 to 13 digits, no leading zero), and every id is below 2^40, its ids are
// appended to *ids, *pp moved past the ']', true. False otherwise, *ids then as it was. The form
// is checked on bit masks of 64 bytes at a time (each space right after a comma, a digit right
// after each space, nothing else but digits before the ']'), so the start of every id is known
// without reading the one before, and the ids are read independently of each other.
bool CanonicalIdList(const char** pp, const char* e, std::vector<uint64_t>* ids) {
  const char* const p = *pp;
  if (p >= e || !IsDigit(*p)) return false;
  const size_t old = ids->size();
  uint64_t all = 0;
  uint64_t comma_carry = 0;  // the last byte of the previous block was a comma
  uint64_t space_carry = 1;  // an id starts at the first byte (as if after a space)
  // The ids of a few blocks, appended to *ids together (an id takes 3 bytes or more here: a
  // block holds at most 22).
  uint64_t out[256];
  size_t k = 0;
  for (const char* blk = p; blk < e; blk += 64) {
    ByteClasses c;
    uint64_t valid = ~uint64_t{0};
    const size_t left = static_cast<size_t>(e - blk);
    if (left >= 64) {
      c = Classify64(blk);
    } else {
      char buf[64];
      std::memset(buf, 0, sizeof buf);
      std::memcpy(buf, blk, left);
      c = Classify64(buf);
      valid = (uint64_t{1} << left) - 1;
    }
    const uint64_t close = c.close & valid;
    if (close != 0) valid = (close & (0 - close)) - 1;  // the bytes before the first ']'
    const uint64_t starts = ((c.space << 1) | space_carry) & valid;  // the byte after a space
    if ((((c.comma | c.space | c.digit) & valid) != valid) ||
        (c.space & valid) != (((c.comma << 1) | comma_carry) & valid) || (starts & ~c.digit) != 0) {
      break;
    }
    comma_carry = c.comma >> 63;
    space_carry = c.space >> 63;
    if (k > 256 - 22) {
      ids->insert(ids->end(), out, out + k);
      k = 0;
    }
    // A leading zero: an id that starts with '0' and has a digit after it (for an id that starts
    // at the block's last byte, the next block's first byte).
    const uint64_t zero_starts = starts & c.zero;
    if ((zero_starts & (c.digit >> 1)) != 0 ||
        ((zero_starts >> 63) != 0 && blk + 64 < e && IsDigit(blk[64]))) {
      break;
    }
    // Each id ends at the next comma or at the ']'; one that runs past the block has none here.
    const uint64_t ends = (c.comma & valid) | close;
    bool ok = true;
    // The id starting at byte `at` of the block, on its own.
    const auto one = [&](int at) {
      const uint64_t rest = ends >> at;
      const int len = rest != 0 ? __builtin_ctzll(rest) : 64;
      const char* t = blk + at;
      uint64_t v = 0;
      if (len <= 8 && e - t >= 8) {
        uint64_t w;
        std::memcpy(&w, t, 8);
        v = SwarDigits(w - 0x3030303030303030ull, len);
      } else {
        ok &= PlainInt(&t, e, 13, &v);  // false: more than 13 digits
      }
      out[k++] = v;
      all |= v;
    };
    // Two ids at a time where both have at most 8 digits (all but the rarest): TwoIds.
    uint64_t m = starts;
    while (m != 0) {
      const int at0 = __builtin_ctzll(m);
      m &= m - 1;
      if (m == 0) {
        one(at0);
        break;
      }
      const int at1 = __builtin_ctzll(m);
      m &= m - 1;
      const uint64_t rest0 = ends >> at0, rest1 = ends >> at1;
      const int len0 = rest0 != 0 ? __builtin_ctzll(rest0) : 64;
      const int len1 = rest1 != 0 ? __builtin_ctzll(rest1) : 64;
      if (len0 > 8 || len1 > 8 || e - (blk + at1) < 8) {
        one(at0);
        one(at1);
        continue;
      }
      TwoIds(blk + at0, len0, blk + at1, len1, out + k);
      all |= out[k] | out[k + 1];
      k += 2;
    }
    if (!ok) break;
    if (close != 0) {
      const char* end = blk + __builtin_ctzll(close);  // the ']'
      // The list ends with an id, not a separator (valid ends at a digit).
      if (!IsDigit(end[-1]) || all >= kIdLimit) break;
      ids->insert(ids->end(), out, out + k);
      *pp = end + 1;
      return true;
    }
  }
  ids->resize(old);
  return false;
}
#endif

// The length of `name` (a key with its closing quote) when the bytes at p are that name, else 0.
// A constant length: the comparison needs no library call.
template <size_t N>
size_t KeyIs(const char* p, const char* e, const char (&name)[N]) {
  return static_cast<size_t>(e - p) >= N - 1 && std::memcmp(p, name, N - 1) == 0 ? N - 1 : 0;
}

// The record at b (white space first, then '{'), read no further than e, when it has the plain
// shape and every value is valid: fills `r` (not its line), appends its ids to *ids and returns
// the byte after its '}' (what follows it is the caller's to check). Null otherwise, with *ids as
// it was: the strict scanner then reads the line. A '\n' is none of the bytes it takes, so a
// record it reads lies on one line even when e is further.
const char* FastRecord(const char* b, const char* e, int64_t block, std::vector<uint64_t>* ids,
                       Request* r) {
  const size_t first = ids->size();
  const char* p = SkipSpace(b, e);
  if (p >= e || *p != '{') return nullptr;
  p = SkipSpace(p + 1, e);
  uint64_t value[3] = {0, 0, 0};
  unsigned seen = 0;
  const auto fail = [&]() -> const char* {
    ids->resize(first);
    return nullptr;
  };
  for (;;) {
    if (e - p < 2 || *p != '"') return fail();
    ++p;
    // The key: one of the four names, byte for byte, then its closing quote.
    size_t k;
    size_t n;
    switch (*p) {
      case 't':
        k = kTimestamp;
        n = KeyIs(p, e, "timestamp\"");
        break;
      case 'i':
        k = kInputLength;
        n = KeyIs(p, e, "input_length\"");
        break;
      case 'o':
        k = kOutputLength;
        n = KeyIs(p, e, "output_length\"");
        break;
      case 'h':
        k = kHashIds;
        n = KeyIs(p, e, "hash_ids\"");
        break;
      default:
        return fail();
    }
    if (n == 0) return fail();
    if ((seen & (1u << k)) != 0) return fail();  // a duplicate: the strict scanner reports it
    seen |= 1u << k;
    p = SkipSpace(p + n, e);
    if (p >= e || *p != ':') return fail();
    p = SkipSpace(p + 1, e);
    if (k == kHashIds) {
      if (p >= e || *p != '[') return fail();
      ++p;
#if defined(__SSE2__)
      // The usual form first, checked and read 64 bytes at a time; else the general one.
      if (!CanonicalIdList(&p, e, ids) && !IdList(&p, e, ids)) return fail();
#else
      if (!IdList(&p, e, ids)) return fail();
#endif
    } else if (!PlainInt(&p, e, 18, &value[k])) {  // 18 digits: below 2^63
      return fail();
    }
    p = SkipSpace(p, e);
    if (p < e && *p == ',') {
      p = SkipSpace(p + 1, e);
      continue;
    }
    if (p < e && *p == '}') break;
    return fail();
  }
  if (seen != 15) return fail();
  // The checks of the strict path's field readers; a value they refuse goes to them for the error.
  const int64_t ts = static_cast<int64_t>(value[kTimestamp]);
  const int64_t in = static_cast<int64_t>(value[kInputLength]);
  if (ts > std::numeric_limits<int64_t>::max() / kNsPerMs || in == 0) return fail();
  if (static_cast<int64_t>(ids->size() - first) != CeilDiv(in, block)) return fail();
  r->arrival_ns = ts * kNsPerMs;
  r->input_tokens = in;
  r->output_tokens = static_cast<int64_t>(value[kOutputLength]);
  return p + 1;
}

}  // namespace

MooncakeLines::MooncakeLines(const std::string& path, size_t text_bytes, const TraceOptions& opt,
                             FileTrace* out, bool fast)
    : path_(path),
      max_line_bytes_(opt.max_line_bytes),
      block_(opt.block_tokens > 0 ? opt.block_tokens : kMooncakeBlockTokens),
      fast_(fast),
      out_(out),
      order_(opt.allow_unsorted, "timestamp", "ms", kNsPerMs),
      scan_({RecordField("timestamp"), RecordField("input_length"), RecordField("output_length"),
             RecordField("hash_ids", /*list=*/true)}) {
  out->block_tokens = block_;
  scan_.field(kHashIds).sink = &out->ids;  // every record's ids into one array
  // Room for more ids than a file with ", " between them can hold (each takes 3 bytes or more), so
  // the array is not copied as it grows; pages of it that are never written take no memory.
  out->ids.reserve(text_bytes / 3 + 1);
  AdviseHugePages(out->ids.data(), out->ids.capacity() * sizeof(uint64_t));
  // Room for as many requests as the text can hold, so that the list is never moved as it
  // grows: each takes a line of kMinRecordBytes or more.
  out->requests.reserve(text_bytes / kMinRecordBytes + 1);
  out->id_first.reserve(text_bytes / kMinRecordBytes + 1);
}

void MooncakeLines::Line(const char* b, const char* e, int64_t line) {
  const Where w{path_, line};
  Request r;
  r.line = line;
  const size_t first = out_->ids.size();
  const char* rec = fast_ ? FastRecord(b, e, block_, &out_->ids, &r) : nullptr;
  if (rec != nullptr && SkipSpace(rec, e) != e) {  // more after the record: the strict scanner
    out_->ids.resize(first);
    rec = nullptr;
  }
  if (rec == nullptr) {
    const auto value = [&](size_t i) {
      const RecordField& f = scan_.field(i);
      return f.present ? &f.value : nullptr;
    };
    scan_.Scan(b, e, w);
    // Checked in this order whatever the key order of the line, so a line with several faults
    // always reports the same one.
    r.arrival_ns = MsTimestampField(value(kTimestamp), "timestamp", w);
    r.input_tokens = PositiveIntField(value(kInputLength), "input_length", w);
    r.output_tokens = NonNegativeIntField(value(kOutputLength), "output_length", w);
    const size_t ids = HashIdsField(scan_.field(kHashIds), w);
    // Mooncake gives an id to every block, the partial last one included.
    const int64_t expected = CeilDiv(r.input_tokens, block_);
    if (static_cast<int64_t>(ids) != expected) {
      Fail(w, "hash_ids",
           "has " + std::to_string(ids) + " ids, expected ceil(input_length " +
               std::to_string(r.input_tokens) + " / block " + std::to_string(block_) +
               ") = " + std::to_string(expected));
    }
  }
  order_.Next(r.arrival_ns, w);
  out_->AddRequest(std::move(r), first);
}

void MooncakeLines::Lines(const char* p, const char* end, int64_t* line_no) {
  while (p < end) {
    if (fast_) {
      // The record read first, up to its '}', without looking for the line's end: the fast
      // scanner takes no '\n', so when only spaces, tabs or a CR follow the '}' up to a '\n' (or
      // the end), that '\n' ends the line (as ForEachLineIn would have found it, with no line
      // limit passed) and the record is the line.
      Request r;
      const size_t first = out_->ids.size();
      if (const char* rec = FastRecord(p, end, block_, &out_->ids, &r)) {
        const char* q = SkipSpace(rec, end);
        if ((q == end || *q == '\n') && q - p <= max_line_bytes_) {
          r.line = ++*line_no;
          order_.Next(r.arrival_ns, Where{path_, r.line});
          out_->AddRequest(std::move(r), first);
          p = q + 1;
          continue;
        }
        out_->ids.resize(first);
      }
    }
    // Anything else, one line as ForEachLineIn gives it.
    const char* nl = static_cast<const char*>(std::memchr(p, '\n', static_cast<size_t>(end - p)));
    const char* e = nl == nullptr ? end : nl;
    ++*line_no;
    if (e - p > max_line_bytes_)
      LineTooLong(path_, *line_no, static_cast<size_t>(e - p), max_line_bytes_);
    const char* q = p;
    while (q < e && (*q == ' ' || *q == '\t' || *q == '\r')) ++q;
    if (q < e) Line(p, e, *line_no);
    p = e + 1;
  }
}

void ReadMooncake(const std::string& path, const std::string& data, const TraceOptions& opt,
                  FileTrace* out) {
  MooncakeLines lines(path, data.size(), opt, out, /*fast=*/true);
  int64_t line_no = 0;
  lines.Lines(data.data(), data.data() + data.size(), &line_no);
}

void ReadMooncakeStrict(const std::string& path, const std::string& data, const TraceOptions& opt,
                        FileTrace* out) {
  MooncakeLines lines(path, data.size(), opt, out, /*fast=*/false);
  int64_t line_no = 0;
  lines.Lines(data.data(), data.data() + data.size(), &line_no);
}

}  // namespace kvlanes::reader
