// Whole-file reads for every input that is not a trace (plans read by line, JSON measured,
// predicted and measurement files, YAML configs, profiles and suites): bounded, so a path that
// never ends (/dev/zero, a FIFO) stops at the limit instead of filling memory, and binary data
// stops at its first chunk. Traces have their own, overridable limits (trace_reader.h).
//
// Every input is opened without blocking and each read waits at most kInputWaitSeconds for data:
// a FIFO that no process writes (whose plain open would block until a writer appears), or a
// writer that stops without closing, ends in an InputError naming the file instead of a hang.
#pragma once

#include <cstdint>
#include <streambuf>
#include <string>
#include <string_view>
#include <vector>

namespace kvlanes {

// The largest input file ReadInputFile reads by default (1 GiB, as for a trace file).
inline constexpr int64_t kMaxInputFileBytes = int64_t{1} << 30;

// How long one read of an input waits for data before giving up (10 s). A regular file or a
// device never waits; only a FIFO or another stream with no data yet does.
inline constexpr int kInputWaitSeconds = 10;

// An input file opened for reading without blocking (O_NONBLOCK), read in chunks that each wait
// at most `wait_seconds` for data. Not copyable; closes the file when destroyed.
class InputFd {
 public:
  // Throws InputError naming `path` when it cannot be opened or is a directory; `what` names the
  // kind of file in errors ("plan file"). REQUIRES: wait_seconds >= 0.
  InputFd(const std::string& path, const std::string& what, int wait_seconds = kInputWaitSeconds);
  ~InputFd();
  InputFd(const InputFd&) = delete;
  InputFd& operator=(const InputFd&) = delete;

  // Reads up to `n` bytes into `buf`; returns 0 at the end of the file. Throws InputError naming
  // the file on a read error or when no byte (nor the end) arrives within wait_seconds.
  size_t Read(char* buf, size_t n);

  const std::string& path() const { return path_; }
  // True when the open file is a regular file (not a FIFO, device or socket).
  bool IsRegularFile() const;

 private:
  std::string path_, what_;
  int wait_ms_;
  int fd_ = -1;
};

// A std::streambuf over an InputFd, for readers that take an std::istream or read by character
// (the plan reader): its errors are InputErrors thrown out of sgetc/sbumpc.
class InputStreambuf : public std::streambuf {
 public:
  InputStreambuf(const std::string& path, const std::string& what,
                 int wait_seconds = kInputWaitSeconds)
      : in_(path, what, wait_seconds) {}

 protected:
  int_type underflow() override;

 private:
  InputFd in_;
  char buf_[1 << 16];
};

// Throws InputError naming `path` and the line of the first byte of `text` that does not begin a
// well-formed UTF-8 sequence (RFC 3629: no overlong forms, no surrogates, nothing past U+10FFFF).
// JSON and YAML text is UTF-8; a name read from it is later written into JSON reports, where an
// invalid byte would fail at the end of a run instead of at its input.
void CheckUtf8(const std::string& text, const std::string& path, const std::string& what);

// The length of the well-formed UTF-8 sequence that begins at byte `i` of `text` (1 for ASCII),
// or 0 when the byte begins none. REQUIRES: i < text.size().
size_t Utf8SequenceLength(std::string_view text, size_t i);

// Bytes from outside (a path, a name given on the command line) as a string nlohmann::json can
// write: each byte that does not begin a well-formed UTF-8 sequence becomes the four characters
// \xHH; UTF-8 text comes back unchanged. Without it a path such as $'tr\xff.jsonl' made the
// report's dump throw type_error.316 at the end of a run.
std::string JsonSafeText(std::string_view bytes);
std::vector<std::string> JsonSafeTexts(const std::vector<std::string>& texts);

// The whole text of `path`; `what` names the kind of file in errors ("measured file"). Throws
// InputError naming the file: cannot open (or a directory), more than `max_bytes` bytes, a read
// error, no data within `wait_seconds` (a FIFO with no writer), a control byte (below 0x20
// other than tab, LF, CR: never valid in JSON or YAML text) or a byte that is not UTF-8, with its
// line.
std::string ReadInputFile(const std::string& path, const std::string& what,
                          int64_t max_bytes = kMaxInputFileBytes,
                          int wait_seconds = kInputWaitSeconds);

}  // namespace kvlanes
