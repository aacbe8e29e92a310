// kv-cache-tester JSON: one conversation a file, one JSON object whose `requests` list may nest
// sub-agent groups; they are flattened into one list in time order. Errors name the line where
// the offending request object starts. The document is parsed once into a flat node array
// (json_scan.h); nesting is walked with an explicit stack, never by recursion, so the depth of the
// input cannot exhaust the call stack (the parser's depth limit bounds it anyway).
#include <algorithm>
#include <utility>
#include <vector>

#include "io/json_scan.h"
#include "traces/format_readers.h"
#include "traces/record_fields.h"

namespace kvlanes::reader {

namespace {

constexpr int64_t kNsPerSecond = 1'000'000'000;

class KvTesterReader {
 public:
  KvTesterReader(const std::string& path, const std::string& data, const TraceOptions& opt,
                 FileTrace* out)
      : path_(path), tree_(data, path), opt_(opt), out_(out) {}

  void Read() {
    const JsonNode& root = tree_.root();
    const Where w{path_, root.line};
    if (root.kind != JsonKind::kObject) {
      Fail(w, "", "a kv-cache-tester trace must be one JSON object, got " + Describe(root.raw()));
    }
    ReadHeader(w);
    Flatten(Member(0, "requests"), w.line, w);
    // Sub-agent requests interleave with the parent's: put the flat list in time order. Stable,
    // so simultaneous requests keep document order.
    std::stable_sort(
        out_->requests.begin(), out_->requests.end(),
        [](const Request& a, const Request& b) { return a.arrival_ns < b.arrival_ns; });
  }

 private:
  // The member `key` of the object node `obj` as a RawValue, or null when absent.
  const RawValue* Member(size_t obj, const char* key) {
    const size_t i = tree_.Member(obj, key);
    if (i == 0) return nullptr;
    scratch_.push_back(tree_.node(i).raw());
    return &scratch_.back();
  }
  size_t MemberIndex(size_t obj, const char* key) const { return tree_.Member(obj, key); }

  // block_size (checked against a requested block_tokens) and hash_id_scope.
  void ReadHeader(const Where& w) {
    block_ = PositiveIntField(Member(0, "block_size"), "block_size", w);
    if (opt_.block_tokens > 0 && opt_.block_tokens != block_) {
      Fail(w, "block_size",
           "the file's block size is " + std::to_string(block_) + " tokens but block_tokens " +
               std::to_string(opt_.block_tokens) +
               " was requested; kv-cache-tester ids cover block_size tokens each");
    }
    if (const RawValue* scope = Member(0, "hash_id_scope");
        scope != nullptr && scope->kind != JsonKind::kString) {
      Fail(w, "hash_id_scope", "must be a string, got " + Describe(*scope));
    }
    out_->block_tokens = block_;
  }

  bool IsSubagentGroup(size_t item) const {
    const size_t type = tree_.Member(item, "type");
    return type != 0 && tree_.node(type).kind == JsonKind::kString &&
           tree_.StringValue(type) == "subagent";
  }

  // One list being walked: the conversation's, or a sub-agent's whose times count from base_ns.
  struct Frame {
    size_t list;       // the array node
    size_t next;       // the next element's node
    int64_t base_ns;   // the list's time origin
    int64_t line;      // line of the object that holds the list (for errors about the list)
    OrderCheck order;  // times must not go backwards within one list
  };

  // Appends the requests of the conversation's list and, in document order (depth first), of the
  // sub-agent groups it contains. `list` is the value of the root's `requests` (null: missing).
  void Flatten(const RawValue* list, int64_t list_line, const Where& w) {
    const RawValue& l = Field(list, "requests", w);
    std::vector<Frame> stack;
    Push(&stack, MemberIndex(0, "requests"), l, 0, list_line);
    while (!stack.empty()) {
      Frame& f = stack.back();
      if (f.next >= tree_.node(f.list).end) {
        stack.pop_back();
        continue;
      }
      const size_t item = f.next;
      f.next = tree_.node(item).end;
      const JsonNode& n = tree_.node(item);
      const bool is_object = n.kind == JsonKind::kObject;
      const Where iw{path_, is_object ? n.line : f.line};
      if (!is_object) {
        Fail(iw, "requests", "each request must be an object, got " + Describe(n.raw()));
      }
      scratch_.clear();
      const int64_t t_ns = SecondsTimestampField(Member(item, "t"), "t", iw);
      f.order.Next(t_ns, iw);
      // Times nest: a sub-agent's requests count from its spawn time, itself counted from its
      // list's origin, so the sum is held to the limit one timestamp has (9e9 s).
      if (t_ns > kMaxNestedNs - f.base_ns) {
        Fail(iw, "t",
             "adds to more than 9e9 s with the enclosing sub-agent groups' spawn times (" +
                 std::to_string(f.base_ns) + " ns + " + std::to_string(t_ns) + " ns)");
      }
      const int64_t at_ns = f.base_ns + t_ns;
      if (IsSubagentGroup(item)) {
        // A sub-agent group: `t` is its spawn time in the enclosing list's clock; its own
        // `requests` count time from the sub-agent's first request.
        const RawValue& inner = Field(Member(item, "requests"), "requests", iw);
        Push(&stack, MemberIndex(item, "requests"), inner, at_ns, iw.line);  // may move `f`
        continue;
      }
      out_->requests.push_back(ReadRequest(item, at_ns, iw));
    }
  }

  void Push(std::vector<Frame>* stack, size_t list, const RawValue& v, int64_t base_ns,
            int64_t line) {
    if (v.kind != JsonKind::kArray) {
      Fail(Where{path_, line}, "requests", "must be an array, got " + Describe(v));
    }
    stack->push_back(Frame{list, JsonTree::FirstChild(list), base_ns, line,
                           OrderCheck(opt_.allow_unsorted, "t", "s", kNsPerSecond)});
  }

  Request ReadRequest(size_t item, int64_t arrival_ns, const Where& w) {
    Request r;
    r.arrival_ns = arrival_ns;
    r.input_tokens = PositiveIntField(Member(item, "in"), "in", w);
    r.output_tokens = NonNegativeIntField(Member(item, "out"), "out", w);
    const size_t ids = MemberIndex(item, "hash_ids");
    if (ids == 0) Fail(w, "hash_ids", "missing field");
    const JsonNode& a = tree_.node(ids);
    if (a.kind != JsonKind::kArray) {
      Fail(w, "hash_ids", "must be an array of integers, got " + Describe(a.raw()));
    }
    size_t k = 0;
    for (size_t e = JsonTree::FirstChild(ids); e < a.end; e = tree_.node(e).end, ++k) {
      r.block_ids.push_back(HashIdElement(tree_.node(e).raw(), k, w));
    }
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

  // The largest arrival time, as the largest single timestamp (SecondsTimestampField).
  static constexpr int64_t kMaxNestedNs = 9'000'000'000'000'000'000;

  const std::string& path_;
  JsonTree tree_;
  const TraceOptions& opt_;
  FileTrace* out_;
  int64_t block_ = 0;
  std::deque<RawValue> scratch_;  // values handed out by Member (stable addresses)
};

}  // namespace

void ReadKvTester(const std::string& path, const std::string& data, const TraceOptions& opt,
                  FileTrace* out) {
  KvTesterReader(path, data, opt, out).Read();
}

}  // namespace kvlanes::reader
