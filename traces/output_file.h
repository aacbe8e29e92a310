// Output files. A regular file is written to "<path>.tmp" and renamed into place only when
// complete, so a failed or interrupted run never leaves a partial file that looks finished:
//   - the temp file is locked (flock) while it is written, and a second run asked for the same
//     output is refused instead of the two replacing each other;
//   - SIGINT and SIGTERM remove every temp file still being written, then end the process as
//     the signal would have;
//   - "-" is standard output, and a path that exists and is not a regular file (/dev/stdout, a
//     FIFO) is written in place, never renamed over.
#pragma once

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <ostream>
#include <streambuf>
#include <string>
#include <vector>

#include "traces/input_error.h"

namespace kvlanes {
namespace output_file_detail {

// Temp files being written, for the signal handler: fixed slots of NUL-terminated paths, so the
// handler only reads memory and calls unlink (async-signal-safe).
inline constexpr int kMaxTemps = 64;
inline constexpr size_t kMaxPath = 4096;
inline std::array<std::array<char, kMaxPath>, kMaxTemps> temp_paths{};
inline std::array<std::atomic<bool>, kMaxTemps> temp_used{};

// The handlers that were installed before ours, restored before the signal is raised again so
// that whoever handled it before (a shell's default, a test framework) still sees it.
inline struct sigaction previous_int {
}, previous_term{};

inline void RemoveTempsAndReraise(int sig) {
  for (int i = 0; i < kMaxTemps; ++i)
    if (temp_used[i].load()) ::unlink(temp_paths[i].data());
  sigaction(sig, sig == SIGINT ? &previous_int : &previous_term, nullptr);
  std::raise(sig);
}

// Installs the handlers unless they are already ours (called at every registration, since other
// code may have installed its own since).
inline void InstallHandlers() {
  for (int sig : {SIGINT, SIGTERM}) {
    struct sigaction current {};
    sigaction(sig, nullptr, &current);
    if (current.sa_handler == &RemoveTempsAndReraise) continue;
    struct sigaction sa {};
    sa.sa_handler = &RemoveTempsAndReraise;
    sigemptyset(&sa.sa_mask);
    sigaction(sig, &sa, sig == SIGINT ? &previous_int : &previous_term);
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
  explicit FdBuf(int fd) : fd_(fd), buf_(1 << 16) { setp(buf_.data(), buf_.data() + buf_.size()); }
  ~FdBuf() override { sync(); }
  bool failed() const { return failed_; }

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
    const char* p = pbase();
    while (p < pptr()) {
      const ssize_t n = ::write(fd_, p, static_cast<size_t>(pptr() - p));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        failed_ = true;
        setp(buf_.data(), buf_.data() + buf_.size());
        return false;
      }
      p += n;
    }
    setp(buf_.data(), buf_.data() + buf_.size());
    return true;
  }
  int fd_;
  std::vector<char> buf_;
  bool failed_ = false;
};

}  // namespace output_file_detail

// Where an output goes, opened for writing: standard output, a special file in place, or a
// locked temp file renamed into place by Commit(). Destroyed without Commit() it removes the temp.
class OutputFile {
 public:
  explicit OutputFile(std::string path) : path_(std::move(path)) {
    if (path_ == "-") {
      FlushStdout();
      fd_ = STDOUT_FILENO;
      return;
    }
    struct stat st {};
    if (::stat(path_.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) {
      if (S_ISDIR(st.st_mode)) throw InputError(path_, 0, "", "is a directory");
      fd_ = ::open(path_.c_str(), O_WRONLY | O_CLOEXEC);  // in place: a device, FIFO or socket
      if (fd_ < 0)
        throw InputError(path_, 0, "",
                         std::string("cannot open for writing: ") + std::strerror(errno));
      return;
    }
    tmp_ = path_ + ".tmp";
    fd_ = ::open(tmp_.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
    if (fd_ < 0)
      throw InputError(path_, 0, "",
                       std::string("cannot open for writing: ") + std::strerror(errno));
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
    const char* p = content.data();
    size_t left = content.size();
    while (left > 0) {
      const ssize_t n = ::write(fd_, p, left);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) throw InputError(path_, 0, "", "write failed (disk full?)");
      p += n;
      left -= static_cast<size_t>(n);
    }
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
    if (!out_ || buf_.failed()) throw InputError(file_.path(), 0, "", "write failed (disk full?)");
    file_.Commit();
  }

 private:
  OutputFile file_;
  output_file_detail::FdBuf buf_;
  std::ostream out_;
};

}  // namespace kvlanes
