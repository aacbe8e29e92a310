// kv-cache-tester JSON: one conversation a file, one JSON object whose `requests` list may nest
// sub-agent groups; they are flattened into one list in time order. Errors name the line where
// the offending request object starts (json_location.h finds it).
#include <algorithm>
#include <utility>

#include "traces/format_readers.h"
#include "traces/json_location.h"
#include "traces/record_fields.h"

namespace kvlanes::reader {

namespace {

using json = nlohmann::json;

constexpr int64_t kNsPerSecond = 1'000'000'000;

json ParseDocument(const std::string& path, const std::string& data) {
  try {
    return json::parse(data);
  } catch (const json::parse_error& err) {
    // err.byte is the 1-based offset of the offending character.
    Fail(Where{path, LineOfByte(data, err.byte)}, "",
         "malformed JSON: " + ParseErrorReason(err.what()));
  }
}

bool IsSubagentGroup(const json& item) {
  const auto type = item.find("type");
  return type != item.end() && type->is_string() &&
         type->get_ref<const std::string&>() == "subagent";
}

class KvTesterReader {
 public:
  KvTesterReader(const std::string& path, const std::string& data, const TraceOptions& opt,
                 FileTrace* out)
      : path_(path), data_(data), opt_(opt), out_(out) {}

  void Read() {
    const json root = ParseDocument(path_, data_);
    const Where w{path_, root.is_object() ? JsonLineOf(data_, {}) : 1};
    if (!root.is_object()) {
      Fail(w, "", "a kv-cache-tester trace must be one JSON object, got " + Describe(root));
    }
    ReadHeader(root, w);
    Flatten(Field(root, "requests", w), {std::string("requests")}, /*base_ns=*/0, w.line);
    // Sub-agent requests interleave with the parent's: put the flat list in time order. Stable,
    // so simultaneous requests keep document order.
    std::stable_sort(
        out_->requests.begin(), out_->requests.end(),
        [](const Request& a, const Request& b) { return a.arrival_ns < b.arrival_ns; });
  }

 private:
  // block_size (checked against a requested block_tokens) and hash_id_scope.
  void ReadHeader(const json& root, const Where& w) {
    block_ = PositiveIntField(root, "block_size", w);
    if (opt_.block_tokens > 0 && opt_.block_tokens != block_) {
      Fail(w, "block_size",
           "the file's block size is " + std::to_string(block_) + " tokens but block_tokens " +
               std::to_string(opt_.block_tokens) +
               " was requested; kv-cache-tester ids cover block_size tokens each");
    }
    if (const auto it = root.find("hash_id_scope"); it != root.end() && !it->is_string()) {
      Fail(w, "hash_id_scope", "must be a string, got " + Describe(*it));
    }
    out_->block_tokens = block_;
  }

  // Appends the requests of one list (the conversation's, or a sub-agent's whose times are
  // relative to base_ns) and, recursively, of the sub-agent groups it contains. `at` is the
  // list's path in the document; `list_line` the line of the object that holds it.
  void Flatten(const json& list, const std::vector<JsonStep>& at, int64_t base_ns,
               int64_t list_line) {
    if (!list.is_array()) {
      Fail(Where{path_, list_line}, "requests", "must be an array, got " + Describe(list));
    }
    const std::vector<int64_t> lines = JsonElementLines(data_, at);
    OrderCheck order(opt_.allow_unsorted, "t", "s", kNsPerSecond);
    for (size_t i = 0; i < list.size(); ++i) {
      const json& item = list[i];
      const bool located = item.is_object() && i < lines.size();
      const Where w{path_, located ? lines[i] : list_line};
      if (!item.is_object())
        Fail(w, "requests", "each request must be an object, got " + Describe(item));
      const int64_t t_ns = SecondsTimestampField(item, "t", w);
      order.Next(t_ns, w);
      if (IsSubagentGroup(item)) {
        // A sub-agent group: `t` is its spawn time in the enclosing list's clock; its own
        // `requests` count time from the sub-agent's first request.
        std::vector<JsonStep> inner = at;
        inner.emplace_back(i);
        inner.emplace_back(std::string("requests"));
        Flatten(Field(item, "requests", w), inner, base_ns + t_ns, w.line);
        continue;
      }
      out_->requests.push_back(ReadRequest(item, base_ns + t_ns, w));
    }
  }

  Request ReadRequest(const json& item, int64_t arrival_ns, const Where& w) const {
    Request r;
    r.arrival_ns = arrival_ns;
    r.input_tokens = PositiveIntField(item, "in", w);
    r.output_tokens = NonNegativeIntField(item, "out", w);
    r.block_ids = HashIdsField(item, w);
    r.line = w.line;
    // The upstream builder keeps full blocks only (floor); some shipped rows also carry the
    // partial last block (ceil). Both are consistent with the length; nothing else is.
    const int64_t lo = r.input_tokens / block_;
    const int64_t hi = CeilDiv(r.input_tokens, block_);
    const int64_t n = static_cast<int64_t>(r.block_ids.size());
    if (n != lo && n != hi) {
      Fail(w, "hash_ids",
           "has " + std::to_string(n) + " ids, expected floor(in " +
               std::to_string(r.input_tokens) + " / block_size " + std::to_string(block_) +
               ") = " + std::to_string(lo) +
               (hi != lo ? " or ceil = " + std::to_string(hi) : std::string()));
    }
    return r;
  }

  const std::string& path_;
  const std::string& data_;
  const TraceOptions& opt_;
  FileTrace* out_;
  int64_t block_ = 0;
};

}  // namespace

void ReadKvTester(const std::string& path, const std::string& data, const TraceOptions& opt,
                  FileTrace* out) {
  KvTesterReader(path, data, opt, out).Read();
}

}  // namespace kvlanes::reader
