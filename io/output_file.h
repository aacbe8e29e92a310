// Output files. A regular file is written to "<path>.tmp" and renamed into place only when
// complete, so a failed or interrupted run never leaves a partial file that looks finished:
//   - the temp file is locked (flock) while it is written, and a second run asked for the same
//     output is refused instead of the two replacing each other;
//   - SIGINT, SIGTERM, SIGHUP, SIGPIPE, SIGXFSZ (each unless inherited ignored) and SIGABRT (an
//     uncaught exception, a broken invariant) remove every temp file still being written, then
//     end the process as the signal would have;
//   - "-" is standard output, and a path that exists and is not a regular file (/dev/stdout, a
//     FIFO) is written in place, never renamed over. Such a file is opened without blocking: a
//     FIFO that no process reads is refused after kOutputOpenWaitSeconds, and a reader that
//     takes no data for kOutputStallSeconds fails the write, so no output blocks a run forever;
//   - CheckDistinctOutputs refuses two options that name one output before any work.
#pragma once

#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <iostream>
#include <ostream>
#include <streambuf>
#include <string>
#include <thread>
#include <vector>

#include "io/input_error.h"

namespace kvlanes {

// How long an output that is not a regular file (a FIFO) may wait for a reader to open it, and
// for the reader to take data once opened (docs/plan.md: a stalled plan output fails in 5 min).
inline constexpr int kOutputOpenWaitSeconds = 10;
inline constexpr int kOutputStallSeconds = 300;

namespace output_file_detail {

// Waits until `fd` (opened O_NONBLOCK) accepts data, at most `seconds`; false when it did not.
inline bool WaitWritable(int fd, int seconds) {
  pollfd p{fd, POLLOUT, 0};
  for (;;) {
    const int r = ::poll(&p, 1, seconds * 1000);
    if (r < 0 && errno == EINTR) continue;  // (the wait restarts: a bound, not an exact time)
    return r > 0 && (p.revents & POLLOUT) != 0;
  }
}

// Whether `fd` is a blocking pipe, FIFO or socket (standard output handed to us by a shell): a
// write to it blocks for as long as the reader takes nothing, and its mode is shared with the
// parent, so it is not made non-blocking; WriteAll waits for room with poll instead.
inline bool IsBlockingPipe(int fd) {
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !(S_ISFIFO(st.st_mode) || S_ISSOCK(st.st_mode))) return false;
  const int flags = ::fcntl(fd, F_GETFL);
  return flags >= 0 && (flags & O_NONBLOCK) == 0;
}

// write(2) of the whole buffer to `fd`, waiting at most `stall_seconds` each time the reader
// takes nothing. On a blocking pipe each write is at most PIPE_BUF bytes after poll reported
// room (a free pipe buffer holds a page, so such a write does not block). Returns "" or the
// reason it stopped.
inline std::string WriteAll(int fd, const char* p, size_t left, int stall_seconds) {
  const bool blocking_pipe = IsBlockingPipe(fd);
  while (left > 0) {
    size_t chunk = left;
    if (blocking_pipe) {
      if (!WaitWritable(fd, stall_seconds))
        return "the reader took no data for " + std::to_string(stall_seconds) +
               " s (is the output stalled?)";
      chunk = std::min<size_t>(left, PIPE_BUF);
    }
    const ssize_t n = ::write(fd, p, chunk);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      if (!WaitWritable(fd, stall_seconds))
        return "the reader took no data for " + std::to_string(stall_seconds) +
               " s (is the output stalled?)";
      continue;
    }
    if (n < 0) return std::string("write failed: ") + std::strerror(errno);
    if (n == 0) return "write failed (disk full?)";
    p += n;
    left -= static_cast<size_t>(n);
  }
  return "";
}

// Temp files being written, for the signal handler: fixed slots of NUL-terminated paths, so the
// handler only reads memory and calls unlink (async-signal-safe).
inline constexpr int kMaxTemps = 64;
inline constexpr size_t kMaxPath = 4096;
inline std::array<std::array<char, kMaxPath>, kMaxTemps> temp_paths{};
inline std::array<std::atomic<bool>, kMaxTemps> temp_used{};

// The signals that remove the temp files: SIGINT and SIGTERM, and SIGABRT, which ends the process
// on any failure that is not an InputError (an uncaught exception, a broken invariant), so that
// no failure leaves a stale FILE.tmp behind.
// SIGHUP (the terminal closed), SIGPIPE (a reader of standard output went away) and SIGXFSZ (past
// `ulimit -f`) end the process by default too, and would leave the temp files behind.
inline constexpr std::array<int, 6> kTempSignals = {SIGINT, SIGTERM, SIGABRT,
                                                    SIGHUP, SIGPIPE, SIGXFSZ};

// The handlers that were installed before ours, restored before the signal is raised again so
// that whoever handled it before (a shell's default, a test framework) still sees it.
inline std::array<struct sigaction, kTempSignals.size()> previous_handlers{};

inline void RemoveTempsAndReraise(int sig) {
  for (int i = 0; i < kMaxTemps; ++i)
    if (temp_used[i].load()) ::unlink(temp_paths[i].data());
  for (size_t i = 0; i < kTempSignals.size(); ++i)
    if (kTempSignals[i] == sig) sigaction(sig, &previous_handlers[i], nullptr);
  std::raise(sig);
}

// Installs the handlers unless they are already ours (called at every registration, since other
// code may have installed its own since). A signal the process was started with ignored (`trap ''
// TERM`, nohup, a shell's background job for SIGINT) stays ignored: the parent asked for the run
// to go on, and deleting its temp files would only make it fail at the end.
inline void InstallHandlers() {
  for (size_t i = 0; i < kTempSignals.size(); ++i) {
    const int sig = kTempSignals[i];
    struct sigaction current {};
    sigaction(sig, nullptr, &current);
    if (current.sa_handler == &RemoveTempsAndReraise || current.sa_handler == SIG_IGN) continue;
    struct sigaction sa {};
    sa.sa_handler = &RemoveTempsAndReraise;
    sigemptyset(&sa.sa_mask);
    sigaction(sig, &sa, &previous_handlers[i]);
  }
}

// Registers `path` for removal on SIGINT/SIGTERM; returns its slot (-1 when the path is too long
// or every slot is taken: the file is then only removed by the normal paths).
inline int RegisterTemp(const std::string& path) {
  InstallHandlers();
  if (path.size() + 1 > kMaxPath) return -1;
  for (int i = 0; i < kMaxTemps; ++i) {
    bool expected = false;
    if (!temp_used[i].load() && temp_used[i].compare_exchange_strong(expected, true)) {
      // The slot is marked used before its path is complete; the handler may then unlink a
      // shorter prefix of the path, which names no file of ours (unlink fails harmlessly).
      std::memcpy(temp_paths[i].data(), path.c_str(), path.size() + 1);
      return i;
    }
  }
  return -1;
}
inline void UnregisterTemp(int slot) {
  if (slot >= 0) temp_used[slot].store(false);
}

// A streambuf over a file descriptor, with its own buffer; reports write errors by state.
class FdBuf : public std::streambuf {
 public:
  explicit FdBuf(int fd, int stall_seconds = kOutputStallSeconds)
      : fd_(fd), stall_seconds_(stall_seconds), buf_(1 << 16) {
    setp(buf_.data(), buf_.data() + buf_.size());
  }
  ~FdBuf() override { sync(); }
  bool failed() const { return !error_.empty(); }
  const std::string& error() const { return error_; }  // "" or why the last write failed

 protected:
  int_type overflow(int_type ch) override {
    if (!Drain()) return traits_type::eof();
    if (!traits_type::eq_int_type(ch, traits_type::eof())) {
      *pptr() = traits_type::to_char_type(ch);
      pbump(1);
    }
    return traits_type::not_eof(ch);
  }
  int sync() override { return Drain() ? 0 : -1; }

 private:
  bool Drain() {
    if (!error_.empty()) {  // the output already failed (a stalled reader is not waited on again)
      setp(buf_.data(), buf_.data() + buf_.size());
      return false;
    }
    std::string why = WriteAll(fd_, pbase(), static_cast<size_t>(pptr() - pbase()), stall_seconds_);
    setp(buf_.data(), buf_.data() + buf_.size());
    if (why.empty()) return true;
    error_ = std::move(why);
    return false;
  }
  int fd_;
  int stall_seconds_;
  std::vector<char> buf_;
  std::string error_;
};

}  // namespace output_file_detail

// Where an output goes, opened for writing: standard output, a special file in place, or a
// locked temp file renamed into place by Commit(). Destroyed without Commit() it removes the temp.
class OutputFile {
 public:
  explicit OutputFile(std::string path) : path_(std::move(path)) {
    if (path_ == "-") {
      if (::fcntl(STDOUT_FILENO, F_GETFL) < 0)
        throw InputError(path_, 0, "", "standard output is closed (started with >&-?)");
      FlushStdout();
      fd_ = STDOUT_FILENO;
      return;
    }
    struct stat st {};
    if (::stat(path_.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) {
      if (S_ISDIR(st.st_mode)) throw InputError(path_, 0, "", "is a directory");
      OpenInPlace();
      return;
    }
    tmp_ = TempPathFor(path_);
    OpenTemp();
    if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
      ::close(fd_);
      fd_ = -1;
      throw InputError(
          path_, 0, "",
          "is being written by another run (" + tmp_ + " is locked); choose another output path");
    }
    // Locked by us: any content is a stale temp of a run that was killed. Start it afresh.
    if (::ftruncate(fd_, 0) != 0) {
      Discard();
      throw InputError(path_, 0, "", "cannot truncate " + tmp_);
    }
    slot_ = output_file_detail::RegisterTemp(tmp_);
  }
  OutputFile(const OutputFile&) = delete;
  OutputFile& operator=(const OutputFile&) = delete;
  ~OutputFile() {
    if (!committed_) Discard();
  }

  void Write(const std::string& content) {
    if (fd_ == STDOUT_FILENO) FlushStdout();
    const std::string why =
        output_file_detail::WriteAll(fd_, content.data(), content.size(), kOutputStallSeconds);
    if (!why.empty()) throw InputError(path_, 0, "", why);
  }
  int fd() const { return fd_; }
  const std::string& path() const { return path_; }

  // Makes the file visible under its name (a temp file is renamed over the path).
  void Commit() {
    if (!tmp_.empty()) {
      if (::fsync(fd_) != 0 && errno != EINVAL)
        throw InputError(path_, 0, "", "write failed (disk full?)");
      if (std::rename(tmp_.c_str(), path_.c_str()) != 0) {
        const std::string why = std::strerror(errno);
        Discard();
        throw InputError(path_, 0, "", "cannot rename " + tmp_ + " into place: " + why);
      }
      output_file_detail::UnregisterTemp(slot_);
      slot_ = -1;
    }
    CloseFd();
    committed_ = true;
  }

 private:
  // "<path>.tmp", or, where that name would pass NAME_MAX (255 bytes), the name cut short with a
  // hash of the whole name, so that an output with a long valid name still gets a temp file and
  // two runs asked for one output still meet at one temp file.
  static std::string TempPathFor(const std::string& path) {
    const size_t slash = path.rfind('/');
    const size_t base = slash == std::string::npos ? 0 : slash + 1;
    constexpr size_t kNameMax = 255;
    if (path.size() - base + 4 <= kNameMax) return path + ".tmp";
    char hash[24];
    std::snprintf(hash, sizeof hash, ".%016zx", std::hash<std::string>{}(path.substr(base)));
    return path.substr(0, base + kNameMax - 4 - 17) + hash + ".tmp";
  }
  // Opens the temp file without following a symlink and without blocking: a stale "<path>.tmp"
  // that is a symlink (writing through it would truncate its target), a FIFO (the open would
  // block forever) or a directory is refused, naming it.
  void OpenTemp() {
    fd_ = ::open(tmp_.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, 0644);
    struct stat st {};
    if (fd_ >= 0 && ::fstat(fd_, &st) == 0 && S_ISREG(st.st_mode)) {
      ::fcntl(fd_, F_SETFL, ::fcntl(fd_, F_GETFL) & ~O_NONBLOCK);
      return;
    }
    const int err = fd_ >= 0 ? 0 : errno;
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
    if (err == 0 || err == ELOOP || err == EISDIR || err == ENXIO || err == EWOULDBLOCK)
      throw InputError(path_, 0, "",
                       "its temp file " + tmp_ +
                           " exists and is not a regular file (a symlink, FIFO or directory); "
                           "remove it or choose another output path");
    throw InputError(path_, 0, "", std::string("cannot open for writing: ") + std::strerror(err));
  }
  // A device, FIFO or socket, written in place. Opened O_NONBLOCK (a FIFO with no reader fails
  // with ENXIO at once instead of blocking), retried until a reader comes or the wait ends; the
  // descriptor stays non-blocking, so every write waits for the reader with a bound (WriteAll).
  void OpenInPlace() {
    const auto until =
        std::chrono::steady_clock::now() + std::chrono::seconds(kOutputOpenWaitSeconds);
    for (;;) {
      fd_ = ::open(path_.c_str(), O_WRONLY | O_CLOEXEC | O_NONBLOCK);
      if (fd_ >= 0) return;
      if (errno == EINTR) continue;
      if (errno != ENXIO)
        throw InputError(path_, 0, "",
                         std::string("cannot open for writing: ") + std::strerror(errno));
      if (std::chrono::steady_clock::now() >= until)
        throw InputError(path_, 0, "",
                         "no process opened it for reading within " +
                             std::to_string(kOutputOpenWaitSeconds) + " s (a FIFO nobody reads?)");
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
  // What the program printed through std::cout/stdout before comes first.
  static void FlushStdout() {
    std::cout.flush();
    std::fflush(stdout);
  }
  void CloseFd() {
    if (fd_ >= 0 && fd_ != STDOUT_FILENO) ::close(fd_);  // closing also drops the lock
    fd_ = -1;
  }
  void Discard() {
    if (!tmp_.empty() && fd_ >= 0) ::unlink(tmp_.c_str());  // unlink while we hold the lock
    output_file_detail::UnregisterTemp(slot_);
    slot_ = -1;
    CloseFd();
  }

  std::string path_, tmp_;
  int fd_ = -1;
  int slot_ = -1;
  bool committed_ = false;
};

// One output a command was asked for: the option that names it and its path ("" when unset).
struct OutputOption {
  std::string option;  // "--json"
  std::string path;
};

namespace output_file_detail {

// What a path names, for comparing outputs with each other and with inputs: "file:DEV:INO" for an
// existing file (one file through ./, a symlink or a hard link; "-" is standard output's file),
// else the canonical path after following dangling symlinks (a link to a file not yet written).
// /dev/null may be named any number of times ("" never matches).
inline std::string FileIdentity(const std::string& path) {
  struct stat st {};
  const bool exists =
      path == "-" ? ::fstat(STDOUT_FILENO, &st) == 0 : ::stat(path.c_str(), &st) == 0;
  if (exists) {
    struct stat null_st {};
    if (S_ISCHR(st.st_mode) && ::stat("/dev/null", &null_st) == 0 && st.st_rdev == null_st.st_rdev)
      return path == "-" ? "-" : "";
    return "file:" + std::to_string(st.st_dev) + ":" + std::to_string(st.st_ino);
  }
  if (path == "-") return "-";
  std::error_code ec;
  std::filesystem::path p = path;
  for (int hops = 0; hops < 40 && std::filesystem::is_symlink(p, ec); ++hops) {
    const std::filesystem::path target = std::filesystem::read_symlink(p, ec);
    if (ec) break;
    p = target.is_absolute() ? target : p.parent_path() / target;
  }
  // Absolute first: weakly_canonical leaves a relative path whose first part does not exist
  // relative ("o.json") but makes "./o.json" or "a/../o.json" absolute, so one file spelled two
  // ways gave two identities and the later output replaced the earlier.
  const std::filesystem::path abs = std::filesystem::absolute(p, ec);
  if (!ec) p = abs;
  const std::filesystem::path canon = std::filesystem::weakly_canonical(p, ec);
  return "path:" + (ec ? p.lexically_normal().string() : canon.string());
}

}  // namespace output_file_detail

// Throws InputError(path, 0, option) when two options name one output, before any work: both
// "-" (standard output: the two would interleave), or one file however it is spelled (./a and a,
// a symlink, a hard link, /dev/stdout and "-": FileIdentity); and when an output names one of
// `inputs` (the command's input files: the output would replace what it is read from). Unset
// options ("") are skipped. Without it the later output silently replaced the earlier one.
inline void CheckDistinctOutputs(const std::vector<OutputOption>& outputs,
                                 const std::vector<OutputOption>& inputs = {}) {
  std::vector<std::string> keys;
  for (const OutputOption& o : outputs)
    keys.push_back(o.path.empty() ? "" : output_file_detail::FileIdentity(o.path));
  for (size_t i = 0; i < outputs.size(); ++i) {
    if (keys[i].empty()) continue;
    for (size_t j = 0; j < i; ++j) {
      if (keys[j] != keys[i]) continue;
      throw InputError(outputs[i].path, 0, outputs[i].option,
                       outputs[i].path == "-" || outputs[j].path == "-"
                           ? "standard output is already " + outputs[j].option +
                                 "'s output: the two would interleave; give one a file"
                           : "names the same file as " + outputs[j].option +
                                 ": one would replace the other; give each its own path");
    }
    for (const OutputOption& in : inputs) {
      if (in.path.empty() || in.path == "-" || output_file_detail::FileIdentity(in.path) != keys[i])
        continue;
      throw InputError(outputs[i].path, 0, outputs[i].option,
                       "names the same file as the input " + in.option +
                           ": writing it would replace what the command reads; give the output "
                           "its own path");
    }
  }
}

inline void WriteFileAtomically(const std::string& path, const std::string& content) {
  OutputFile out(path);
  out.Write(content);
  out.Commit();
}

// A file written as a stream (e.g. a plan) that becomes visible under its name only on
// Commit(); destroyed without Commit() it is removed. "-" streams to standard output.
class StreamingFile {
 public:
  explicit StreamingFile(std::string path)
      : file_(std::move(path)), buf_(file_.fd()), out_(&buf_) {}
  std::ostream& stream() { return out_; }
  void Commit() {
    out_.flush();
    if (!out_ || buf_.failed())
      throw InputError(file_.path(), 0, "",
                       buf_.failed() ? buf_.error() : std::string("write failed (disk full?)"));
    file_.Commit();
  }

 private:
  OutputFile file_;
  output_file_detail::FdBuf buf_;
  std::ostream out_;
};

}  // namespace kvlanes
