// The standing bad-input suite of the trace readers: every hostile input gives an
// InputError naming file, line and field, never a crash, a hang or another exception type. The
// command-line half (exit code 2, the message, no output file) is
// bad_traces_exit_2_with_file_line_field.py.
#include <doctest/doctest.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "tests/traces/test_files.h"
#include "traces/trace_reader.h"

namespace kvlanes {
namespace {

using testing::ScratchDir;

// Loads and expects an InputError at exactly path:line with `field`, the message containing
// `fragment`.
void ExpectHostileError(const std::string& path, std::optional<TraceFormat> fmt, int64_t line,
                        const std::string& field, const std::string& fragment,
                        TraceOptions opt = {}) {
  try {
    LoadTrace({path}, fmt, opt);
    FAIL("expected an InputError at " << path << ":" << line << " field " << field);
  } catch (const InputError& e) {
    const std::string what = e.what();
    INFO("message: " << what);
    CHECK(e.file() == path);
    CHECK(e.line() == line);
    CHECK(e.field() == field);
    CHECK(std::string(e.what()).find(fragment) != std::string::npos);
  }
}

const std::string kLine1 =
    R"({"timestamp": 0, "input_length": 600, "output_length": 5, "hash_ids": [1, 2]})"
    "\n";

std::string Mooncake(const std::string& second_line) { return kLine1 + second_line + "\n"; }

TEST_CASE("a number beyond a double is refused naming its field, in every reader") {
  ScratchDir dir;
  ExpectHostileError(dir.Write("a.jsonl", Mooncake(R"({"timestamp": 1e400, "input_length": 600,)"
                                                   R"( "output_length": 5, "hash_ids": [1, 2]})")),
                     TraceFormat::kMooncake, 2, "timestamp", "number 1e400 overflows a double");
  ExpectHostileError(dir.Write("b.jsonl", Mooncake(R"({"timestamp": 1, "input_length": -1e400,)"
                                                   R"( "output_length": 5, "hash_ids": [1, 2]})")),
                     std::nullopt, 2, "input_length", "overflows a double");
  ExpectHostileError(
      dir.Write("c.jsonl", Mooncake(R"({"timestamp": 1, "input_length": 600,)"
                                    R"( "output_length": 5, "hash_ids": [1, 2e400]})")),
      std::nullopt, 2, "hash_ids", "element 1 must be a non-negative integer");
  ExpectHostileError(dir.Write("k.json",
                               "{\"block_size\": 64,\n\"requests\": [\n"
                               "{\"t\": 1e999, \"in\": 10, \"out\": 1, \"hash_ids\": []}]}\n"),
                     std::nullopt, 3, "t", "number 1e999 overflows a double");
  ExpectHostileError(dir.Write("t.jsonl",
                               "{\"timestamp\": 0, \"tokens\": [1, 1e400], "
                               "\"output_length\": 1}\n"),
                     std::nullopt, 1, "tokens", "element 1 must be a non-negative integer");
  // A number the reader does not use is only syntax-checked: the file loads.
  const std::string ignored =
      dir.Write("i.jsonl", R"({"timestamp": 0, "input_length": 600, "output_length": 5,)"
                           R"( "hash_ids": [1, 2], "score": 1e400})"
                           "\n");
  CHECK(LoadTrace({ignored}, std::nullopt, {}).requests.size() == 1);
}

TEST_CASE("an integer beyond 64 bits is refused as too large, naming its field") {
  ScratchDir dir;
  ExpectHostileError(dir.Write("a.jsonl", Mooncake(R"({"timestamp": 1, "input_length": )"
                                                   R"(99999999999999999999, "output_length": 5,)"
                                                   R"( "hash_ids": [1, 2]})")),
                     TraceFormat::kMooncake, 2, "input_length",
                     "integer 99999999999999999999 is too large");
  ExpectHostileError(dir.Write("b.jsonl", Mooncake(R"({"timestamp": 9223372036854775808,)"
                                                   R"( "input_length": 600, "output_length": 5,)"
                                                   R"( "hash_ids": [1, 2]})")),
                     TraceFormat::kMooncake, 2, "timestamp", "is too large");
  ExpectHostileError(
      dir.Write("c.jsonl", Mooncake(R"({"timestamp": 9223372036855, "input_length": 600,)"
                                    R"( "output_length": 5, "hash_ids": [1, 2]})")),
      TraceFormat::kMooncake, 2, "timestamp", "ms is too large");
  ExpectHostileError(dir.Write("d.jsonl", Mooncake(R"({"timestamp": 1, "input_length": 600,)"
                                                   R"( "output_length": 5, "hash_ids": [1,)"
                                                   R"( 18446744073709551616]})")),
                     TraceFormat::kMooncake, 2, "hash_ids", "element 1 is 18446744073709551616");
  ExpectHostileError(dir.Write("t.jsonl",
                               "{\"timestamp\": 0, \"tokens\": [9223372036854775808], "
                               "\"output_length\": 1}\n"),
                     TraceFormat::kTokens, 1, "tokens", "below 2^63");
}

// {"t": 0, "type": "subagent", "requests": [ ... ]} nested `depth` times.
std::string NestedGroups(int depth) {
  std::string s = "{\"block_size\": 64, \"requests\": [";
  for (int i = 0; i < depth; ++i) s += "{\"t\": 0, \"type\": \"subagent\", \"requests\": [";
  s += "{\"t\": 0, \"in\": 64, \"out\": 1, \"hash_ids\": [1]}";
  for (int i = 0; i < depth; ++i) s += "]}";
  s += "]}\n";
  return s;
}

TEST_CASE("100,000 nested sub-agent groups give a depth error, not a stack overflow") {
  ScratchDir dir;
  ExpectHostileError(dir.Write("deep.json", NestedGroups(100'000)), std::nullopt, 1, "",
                     "nested deeper than 256 levels");
  ExpectHostileError(
      dir.Write("deep_arrays.jsonl",
                R"({"timestamp": 0, "input_length": 600, "output_length": 5, "x": )" +
                    std::string(100'000, '[') + std::string(100'000, ']') + "}\n"),
      TraceFormat::kMooncake, 1, "", "nested deeper than 256 levels");
  // Nesting within the limit is flattened, with times adding up along the chain of groups.
  const Trace t = LoadTrace({dir.Write("ok.json", NestedGroups(100))}, std::nullopt, {});
  REQUIRE(t.requests.size() == 1);
  CHECK(t.requests[0].block_ids == std::vector<uint64_t>{1});
}

TEST_CASE("duplicate keys in a record are refused naming the key and the line") {
  ScratchDir dir;
  ExpectHostileError(dir.Write("a.jsonl", Mooncake(R"({"timestamp": 1, "input_length": 600,)"
                                                   R"( "timestamp": 2, "output_length": 5,)"
                                                   R"( "hash_ids": [1, 2]})")),
                     TraceFormat::kMooncake, 2, "timestamp", "duplicate key \"timestamp\"");
  ExpectHostileError(
      dir.Write("b.jsonl", Mooncake(R"({"timestamp": 1, "input_length": 600, "x": 1,)"
                                    R"( "output_length": 5, "x": {}, "hash_ids": [1, 2]})")),
      std::nullopt, 2, "x", "duplicate key \"x\"");
  ExpectHostileError(
      dir.Write("k.json",
                "{\"block_size\": 64,\n\"requests\": [\n"
                "{\"t\": 0, \"in\": 10, \"out\": 1, \"hash_ids\": []},\n"
                "{\"t\": 1, \"in\": 10,\n \"in\": 11, \"out\": 1, \"hash_ids\": []}]}\n"),
      std::nullopt, 5, "in", "duplicate key \"in\"");
  ExpectHostileError(dir.Write("t.jsonl",
                               "{\"timestamp\": 0, \"tokens\": [1], \"tokens\": [2], "
                               "\"output_length\": 1}\n"),
                     TraceFormat::kTokens, 1, "tokens", "duplicate key");
  // Many keys: the set that takes over from the list still finds the repeat.
  std::string many = R"({"timestamp": 0, "input_length": 600, "output_length": 5, )";
  for (int i = 0; i < 200; ++i) many += "\"k" + std::to_string(i) + "\": 0, ";
  many += R"("k150": 1, "hash_ids": [1, 2]})";
  ExpectHostileError(dir.Write("m.jsonl", many + "\n"), std::nullopt, 1, "k150", "duplicate key");
}

TEST_CASE("a UTF-8 byte order mark is accepted at the start of a file and named elsewhere") {
  ScratchDir dir;
  const std::string bom = "\xEF\xBB\xBF";
  const Trace t = LoadTrace({dir.Write("bom.jsonl", bom + kLine1)}, std::nullopt, {});
  CHECK(t.requests.size() == 1);
  CHECK(LoadTrace({dir.Write("bom.json", bom + "{\"block_size\": 64, \"requests\": [{\"t\": 0, "
                                               "\"in\": 64, \"out\": 1, \"hash_ids\": [1]}]}")},
                  TraceFormat::kKvTester, {})
            .requests.size() == 1);
  ExpectHostileError(dir.Write("mid.jsonl", kLine1 + bom + kLine1), TraceFormat::kMooncake, 2, "",
                     "byte order mark (BOM; one is accepted only at the start of a file)");
}

TEST_CASE("a format given that the file does not have says what the file looks like") {
  ScratchDir dir;
  const std::string m = dir.Write("m.jsonl", kLine1 + kLine1);
  ExpectHostileError(m, TraceFormat::kKvTester, 2, "",
                     "the file looks like Mooncake JSONL (its first record has "
                     "hash_ids/input_length), not kvtester: pass --format mooncake");
  const std::string k = dir.Write("k.json",
                                  "{\n\"block_size\": 64,\n\"requests\": [{\"t\": 0, \"in\": 64, "
                                  "\"out\": 1, \"hash_ids\": [1]}]\n}\n");
  ExpectHostileError(k, TraceFormat::kMooncake, 1, "", "looks like kv-cache-tester JSON");
  const std::string tok =
      dir.Write("t.jsonl", "{\"timestamp\": 0, \"tokens\": [1, 2], \"output_length\": 1}\n");
  ExpectHostileError(tok, TraceFormat::kMooncake, 1, "input_length", "looks like tokens JSONL");
}

TEST_CASE("a line over max_line_bytes and a file over max_file_bytes are refused") {
  ScratchDir dir;
  const std::string p = dir.Write("m.jsonl", kLine1 + kLine1 + kLine1);
  TraceOptions opt;
  opt.max_line_bytes = static_cast<int64_t>(kLine1.size()) - 2;  // the line without its newline
  ExpectHostileError(p, std::nullopt, 1, "", "bytes, over the limit of", opt);
  opt.max_line_bytes = static_cast<int64_t>(kLine1.size()) - 1;  // exactly one line: accepted
  CHECK(LoadTrace({p}, std::nullopt, opt).requests.size() == 3);
  opt = {};
  opt.max_file_bytes = 3 * static_cast<int64_t>(kLine1.size()) - 1;
  ExpectHostileError(p, std::nullopt, 0, "", "over the limit of", opt);
  opt.max_file_bytes = 3 * static_cast<int64_t>(kLine1.size());
  CHECK(LoadTrace({p}, std::nullopt, opt).requests.size() == 3);
  opt.max_file_bytes = 0;
  try {
    LoadTrace({p}, std::nullopt, opt);
    FAIL("a zero limit must be refused");
  } catch (const InputError& e) {
    CHECK(e.field() == "--max-file-bytes");
  }
}

TEST_CASE("a path that never ends stops with a clear error") {
  // /dev/urandom: binary data stops at its first chunk.
  const auto start = std::chrono::steady_clock::now();
  try {
    LoadTrace({"/dev/urandom"}, TraceFormat::kMooncake, {});
    FAIL("expected an InputError");
  } catch (const InputError& e) {
    CHECK(e.file() == "/dev/urandom");
    CHECK(std::string(e.what()).find("is not allowed anywhere in JSON text") != std::string::npos);
  }
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(10));

  // A FIFO fed valid records without end stops at max_file_bytes.
  ScratchDir dir;
  const std::string fifo = dir.path() + "/endless.jsonl";
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  ::signal(SIGPIPE, SIG_IGN);
  std::atomic<long> written{0};
  std::thread writer([&] {
    const int fd = ::open(fifo.c_str(), O_WRONLY);
    if (fd < 0) return;
    std::string chunk;
    for (int i = 0; i < 100; ++i) chunk += kLine1;
    while (::write(fd, chunk.data(), chunk.size()) > 0) written += 1;
    ::close(fd);
  });
  TraceOptions opt;
  opt.max_file_bytes = 4 << 20;
  try {
    LoadTrace({fifo}, TraceFormat::kMooncake, opt);
    FAIL("expected an InputError");
  } catch (const InputError& e) {
    CHECK(e.file() == fifo);
    CHECK(std::string(e.what()).find("more than 4194304 bytes") != std::string::npos);
  }
  writer.join();
  CHECK(written.load() > 0);
}

TEST_CASE("malformed strings, numbers and trailing content are syntax errors at their line") {
  ScratchDir dir;
  const auto bad = [&](const std::string& line, const std::string& fragment) {
    ExpectHostileError(dir.Write("s.jsonl", Mooncake(line)), TraceFormat::kMooncake, 2, "",
                       "malformed JSON: " + fragment);
  };
  bad("{\"timestamp\": 1, \"x\": \"\xC3\x28\"}", "ill-formed UTF-8");
  bad("{\"timestamp\": 1, \"x\": \"a\tb\"}", "control character");
  bad("{\"timestamp\": 1, \"x\": \"\\ud800\"}", "a \\u escape holds a high surrogate");
  bad("{\"timestamp\": 1, \"x\": \"\\q\"}", "expected an escape character");
  bad("{\"timestamp\": 01}", "expected ',' or '}', got '1'");
  bad("{\"timestamp\": 1.}", "expected a digit after the decimal point");
  bad("{\"timestamp\": 1} {}", "expected the end of the line after the record");
  bad("{\"timestamp\": 1, \"x\": tru}", "expected a value");
  bad("{\"timestamp\": 1, \"x\": \"open", "unterminated string");
  ExpectHostileError(dir.Write("k.json", "{\"block_size\": 64, \"requests\": []}\n{}\n"),
                     TraceFormat::kKvTester, 2, "", "the end of the file after the document");
}

}  // namespace
}  // namespace kvlanes
