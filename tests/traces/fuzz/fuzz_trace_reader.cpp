// libFuzzer target of one trace reader (KVLANES_FUZZ_FORMAT: 0 mooncake, 1 kvtester, 2 tokens,
// 3 bailian, 4 csv, 5 lcs, 6 oracle_general):
// the input is a trace file's text (bytes, for the libCacheSim formats); it goes through the reader
// of that format and through format detection. An InputError is the expected answer to bad input;
// any other exception escapes and libFuzzer reports it, as it reports crashes and sanitizer
// findings. Built only with -DKVLANES_FUZZ=ON and clang (tools/fuzz.sh).
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "io/input_error.h"
#include "traces/format_readers.h"
#include "traces/trace.h"
#include "traces/trace_reader.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  static const std::string kPath = "fuzz-input";
  // The page size each format's default block size divides (tokens: the shipped examples').
  struct FormatPages {
    kvlanes::TraceFormat format;
    int64_t page_tokens;
  };
  constexpr FormatPages kFormats[] = {
      {kvlanes::TraceFormat::kMooncake, 64},     {kvlanes::TraceFormat::kKvTester, 64},
      {kvlanes::TraceFormat::kTokens, 4},        {kvlanes::TraceFormat::kBailian, 16},
      {kvlanes::TraceFormat::kCsv, 64},          {kvlanes::TraceFormat::kLcs, 64},
      {kvlanes::TraceFormat::kOracleGeneral, 64}};
  const kvlanes::TraceFormat fmt = kFormats[KVLANES_FUZZ_FORMAT].format;
  kvlanes::TraceOptions opt;
  opt.page_tokens = kFormats[KVLANES_FUZZ_FORMAT].page_tokens;
  for (const bool unsorted : {false, true}) {
    opt.allow_unsorted = unsorted;
    try {
      kvlanes::reader::ParseTraceText(kPath, text, fmt, opt);
    } catch (const kvlanes::InputError&) {
    }
  }
  try {
    kvlanes::reader::ParseTraceText(kPath, text, std::nullopt, opt);
  } catch (const kvlanes::InputError&) {
  }
  // A requested block size up to 2^40 pages (chosen by the input's last byte): what the reader
  // accepts, the engine indexes, so every keyed page of every request must lie in its ids.
  if (size > 0) {
    constexpr int kShifts[] = {0, 1, 20, 30, 31, 32, 33, 40};
    opt.allow_unsorted = true;
    opt.block_tokens = opt.page_tokens << kShifts[data[size - 1] % 8];
    try {
      const kvlanes::reader::FileTrace ft = kvlanes::reader::ParseTraceText(kPath, text, fmt, opt);
      const int64_t pages_per_block = ft.block_tokens / opt.page_tokens;
      for (const kvlanes::Request& r : ft.requests) {
        const int64_t keyed =
            kvlanes::KeyedPages(r, r.input_tokens, opt.page_tokens, ft.block_tokens);
        if (keyed > 0) (void)kvlanes::PageKeyAt(r, keyed - 1, pages_per_block);
        if (keyed > 0 && static_cast<size_t>((keyed - 1) / pages_per_block) >= r.block_ids.size())
          __builtin_trap();  // a keyed page beyond the request's ids
      }
    } catch (const kvlanes::InputError&) {
    }
  }
  return 0;
}
