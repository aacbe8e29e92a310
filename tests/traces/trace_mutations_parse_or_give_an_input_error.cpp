// Seeded mutation fuzzer over the trace readers: every mutated input either parses or gives
// an InputError naming the file; never a crash, never another exception. It also checks the
// readers' JSON grammar against nlohmann-json (the library the readers used before): a line (or
// document) the readers call "malformed JSON" must be one nlohmann rejects too, and an input the
// readers accept must be one nlohmann parses (duplicate keys, numbers beyond a double and a
// byte order mark inside a JSONL file are where the readers are stricter by design).
//
//   kvlanes_traces_mutations [--count N] [--seed S] [--only I] [--save DIR]
// N mutations per format (default 2000, or $KVLANES_FUZZ_COUNT); --only I runs mutation I alone
// (to reproduce a failure); --save DIR writes each failing input there.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "io/input_error.h"
#include "traces/format_readers.h"
#include "traces/trace_reader.h"

namespace {

using kvlanes::InputError;
using kvlanes::TraceFormat;
using kvlanes::TraceOptions;

std::string Slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    std::fprintf(stderr, "cannot read seed %s\n", path.c_str());
    std::exit(2);
  }
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

std::string FirstLines(const std::string& text, int n) {
  size_t pos = 0;
  for (int i = 0; i < n && pos != std::string::npos; ++i) pos = text.find('\n', pos + 1);
  return pos == std::string::npos ? text : text.substr(0, pos + 1);
}

const std::vector<std::string>& Tokens() {
  static const std::vector<std::string> t = {"1e400",
                                             "-1e400",
                                             "-1",
                                             "99999999999999999999",
                                             "18446744073709551616",
                                             "1.5",
                                             "12.0",
                                             "1e3",
                                             "-0",
                                             "01",
                                             "\"x\"",
                                             "\"\\u0000\"",
                                             "\"\\ud800\"",
                                             "\"\\udc00\"",
                                             "\xC3\x28",
                                             "\xEF\xBB\xBF",
                                             "null",
                                             "true",
                                             "[",
                                             "]",
                                             "{",
                                             "}",
                                             ",",
                                             ":",
                                             "\"",
                                             "\\",
                                             "\n",
                                             "\r\n",
                                             "\"hash_ids\": [1]",
                                             "\"timestamp\": 0",
                                             "\"tokens\": [1, 2]",
                                             "\"requests\": []",
                                             "\"chat_id\": 1",
                                             "\"parent_chat_id\": -1",
                                             ";",
                                             "\"type\": \"subagent\"",
                                             "\"requests\": [{\"t\": 0, \"type\": \"subagent\"}]",
                                             std::string(300, '['),
                                             std::string(40, '{') + "\"a\":",
                                             "1099511627776",
                                             "\t",
                                             " ",
                                             "\x01"};
  return t;
}

// One to four random edits of `s`.
std::string Mutate(std::string s, std::mt19937_64& rng) {
  const auto pick = [&](size_t n) { return n == 0 ? size_t{0} : static_cast<size_t>(rng() % n); };
  const int edits = 1 + static_cast<int>(rng() % 4);
  for (int k = 0; k < edits; ++k) {
    const size_t at = pick(s.size() + 1);
    switch (rng() % 8) {
      case 0:  // flip a bit
        if (!s.empty()) s[pick(s.size())] ^= static_cast<char>(1u << (rng() % 8));
        break;
      case 1: {  // replace a byte with a structural one
        static const char kChars[] = "{}[]\",:-.eE0123456789 \n\\tnul+";
        if (!s.empty()) s[pick(s.size())] = kChars[pick(sizeof kChars - 1)];
        break;
      }
      case 2:  // delete a range
        if (at < s.size()) s.erase(at, 1 + pick(16));
        break;
      case 3: {  // duplicate a range
        if (at < s.size()) {
          const std::string piece = s.substr(at, 1 + pick(64));
          s.insert(pick(s.size() + 1), piece);
        }
        break;
      }
      case 4:
      case 5:  // insert a token
        s.insert(at, Tokens()[pick(Tokens().size())]);
        break;
      case 6:  // truncate
        s.resize(at);
        break;
      default: {  // replace a digit run by another number
        const size_t d = s.find_first_of("0123456789", at);
        if (d != std::string::npos) {
          const size_t e = s.find_first_not_of("0123456789", d);
          s.replace(d, (e == std::string::npos ? s.size() : e) - d, Tokens()[pick(8)]);
        }
        break;
      }
    }
  }
  return s;
}

std::string LineOf(const std::string& text, int64_t line) {
  size_t pos = 0;
  for (int64_t i = 1; i < line; ++i) {
    pos = text.find('\n', pos);
    if (pos == std::string::npos) return "";
    ++pos;
  }
  const size_t end = text.find('\n', pos);
  return text.substr(pos, end == std::string::npos ? std::string::npos : end - pos);
}

// What nlohmann says of one JSON text: 0 parses, 1 syntax error, 2 a number beyond a double.
int Nlohmann(const std::string& text) {
  try {
    const nlohmann::json j = nlohmann::json::parse(text);
    (void)j;
    return 0;
  } catch (const nlohmann::json::parse_error&) {
    return 1;
  } catch (const nlohmann::json::out_of_range&) {
    return 2;
  }
}

bool Blank(const std::string& line) { return line.find_first_not_of(" \t\r") == std::string::npos; }

struct Result {
  int parsed = 0, input_errors = 0, failures = 0;
};

// Runs one mutated input through the reader of `fmt` and through detection. Returns "" when all
// is well, else what went wrong.
std::string Check(const std::string& path, const std::string& text, TraceFormat fmt, bool* parsed) {
  TraceOptions opt;
  opt.page_tokens = fmt == TraceFormat::kTokens || fmt == TraceFormat::kBailian ? 4 : 64;
  opt.allow_unsorted = true;
  const bool jsonl = fmt != TraceFormat::kKvTester;
  // CSV and the libCacheSim binary formats are not JSON: only "parses or gives an InputError
  // naming the file" applies.
  const bool csv =
      fmt == TraceFormat::kCsv || fmt == TraceFormat::kLcs || fmt == TraceFormat::kOracleGeneral;
  for (const std::optional<TraceFormat> f :
       {std::optional<TraceFormat>(fmt), std::optional<TraceFormat>()}) {
    try {
      kvlanes::reader::ParseTraceText(path, text, f, opt);
      if (f) *parsed = true;
      if (!f || csv) continue;
      // Accepted: nlohmann must parse it as well (each line, or the document).
      std::string body = text;
      if (body.compare(0, 3, "\xEF\xBB\xBF") == 0) body.erase(0, 3);
      if (jsonl) {
        size_t pos = 0;
        while (pos <= body.size()) {
          size_t end = body.find('\n', pos);
          if (end == std::string::npos) end = body.size();
          const std::string line = body.substr(pos, end - pos);
          if (!Blank(line) && Nlohmann(line) == 1)
            return "accepted a line nlohmann rejects: " + line;
          pos = end + 1;
        }
      } else if (Nlohmann(body) == 1) {
        return "accepted a document nlohmann rejects";
      }
    } catch (const InputError& e) {
      if (e.file() != path && e.file() != "")
        return std::string("error names another file: ") + e.what();
      if (e.message().empty()) return "empty error message";
      if (csv || e.message().rfind("malformed JSON", 0) != 0) continue;
      // The readers call it malformed: nlohmann must reject it as well.
      std::string body = text;
      if (body.compare(0, 3, "\xEF\xBB\xBF") == 0) body.erase(0, 3);
      const bool doc = !jsonl || !f;  // detection scans the first record of either kind
      if (doc && !jsonl) {
        if (Nlohmann(body) == 0) return std::string("called valid JSON malformed: ") + e.what();
      } else if (jsonl && f) {
        const std::string line = LineOf(body, e.line());
        if (line.compare(0, 3, "\xEF\xBB\xBF") == 0) continue;  // a BOM inside: stricter by design
        if (Nlohmann(line) == 0) return std::string("called a valid line malformed: ") + e.what();
      }
    } catch (const std::exception& e) {
      return std::string("exception other than InputError: ") + e.what();
    } catch (...) {
      return "non-standard exception";
    }
  }
  return "";
}

}  // namespace

int main(int argc, char** argv) {
  long count = 2000;
  if (const char* env = std::getenv("KVLANES_FUZZ_COUNT")) count = std::atol(env);
  uint64_t seed = 20261201;
  long only = -1;
  std::string save;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const bool has_value = i + 1 < argc;
    if (a == "--count" && has_value) {
      count = std::atol(argv[++i]);
    } else if (a == "--seed" && has_value) {
      seed = std::strtoull(argv[++i], nullptr, 10);
    } else if (a == "--only" && has_value) {
      only = std::atol(argv[++i]);
    } else if (a == "--save" && has_value) {
      save = argv[++i];
    } else {
      std::fprintf(stderr, "usage: %s [--count N] [--seed S] [--only I] [--save DIR]\n", argv[0]);
      return 2;
    }
  }
  const std::string src = KVLANES_SOURCE_DIR "/traces/";
  const std::string fixtures = KVLANES_SOURCE_DIR "/tests/fixtures/traces/";
  struct Seed {
    TraceFormat fmt;
    const char* name;
    std::vector<std::string> texts;
  };
  const std::vector<Seed> seeds = {
      {TraceFormat::kMooncake,
       "mooncake",
       {FirstLines(Slurp(src + "mooncake_excerpt.jsonl"), 30),
        FirstLines(Slurp(src + "aligned_prefixes.jsonl"), 20)}},
      {TraceFormat::kKvTester,
       "kvtester",
       {Slurp(src + "kvtester_trace_0034.json"),
        "{\n \"block_size\": 4, \"hash_id_scope\": \"local\",\n \"requests\": [\n"
        "  {\"t\": 0.0, \"in\": 8, \"out\": 1, \"hash_ids\": [1, 2]},\n"
        "  {\"t\": 5.0, \"type\": \"subagent\", \"requests\": [\n"
        "    {\"t\": 0.0, \"in\": 4, \"out\": 1, \"hash_ids\": [7]},\n"
        "    {\"t\": 1.5, \"type\": \"subagent\", \"requests\": [\n"
        "      {\"t\": 0.5, \"in\": 9, \"out\": 1, \"hash_ids\": [7, 8, 9]}]}]},\n"
        "  {\"t\": 10.0, \"in\": 13, \"out\": 2, \"hash_ids\": [1, 2, 3]}\n ]\n}\n"}},
      {TraceFormat::kTokens,
       "tokens",
       {"{\"timestamp\": 0, \"tokens\": [1,2,3,4, 5,6,7,8, 9], \"output_length\": 3}\n"
        "{\"timestamp\": 1, \"tokens\": [1,2,3,4, 5,6,7,8, 10,11,12,13], \"output_length\": 0}\n"
        "{\"timestamp\": 2, \"tokens\": [1,2,3,4, 6,6,7,8], \"output_length\": 0, \"x\": {}}\n"
        "{\"timestamp\": 4, \"tokens\": [1,2,3], \"output_length\": 0}\n"}},
      {TraceFormat::kBailian, "bailian", {FirstLines(Slurp(src + "bailian/sample.jsonl"), 12)}},
      {TraceFormat::kCsv, "csv", {Slurp(src + "csv/sample.csv")}},
      {TraceFormat::kLcs, "lcs", {Slurp(fixtures + "lcs_v2_sample.lcs")}},
      {TraceFormat::kOracleGeneral,
       "oracle_general",
       {Slurp(fixtures + "oracle_general_sample.bin")}},
  };
  int failures = 0;
  for (size_t s = 0; s < seeds.size(); ++s) {
    Result r;
    const std::string path = std::string("mutant.") + seeds[s].name;
    for (long i = 0; i < count; ++i) {
      if (only >= 0 && i != only) continue;
      std::mt19937_64 rng(seed ^ (static_cast<uint64_t>(s) << 56) ^ static_cast<uint64_t>(i));
      const std::string& base = seeds[s].texts[static_cast<size_t>(i) % seeds[s].texts.size()];
      const std::string text = Mutate(base, rng);
      bool parsed = false;
      const std::string why = Check(path, text, seeds[s].fmt, &parsed);
      if (!why.empty()) {
        ++r.failures;
        std::fprintf(stderr, "FAIL %s mutation %ld (seed %llu): %s\n", seeds[s].name, i,
                     static_cast<unsigned long long>(seed), why.c_str());
        if (!save.empty()) {
          std::ofstream(save + "/" + seeds[s].name + "_" + std::to_string(i), std::ios::binary)
              << text;
        }
      } else if (parsed) {
        ++r.parsed;
      } else {
        ++r.input_errors;
      }
    }
    std::printf("%-8s %ld mutations (seed %llu): %d parsed, %d input errors, %d failures\n",
                seeds[s].name, only >= 0 ? 1 : count, static_cast<unsigned long long>(seed),
                r.parsed, r.input_errors, r.failures);
    failures += r.failures;
  }
  return failures == 0 ? 0 : 1;
}
