#include "io/input_file.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>

#include "io/input_error.h"
#include "io/json_location.h"

namespace kvlanes {

InputFd::InputFd(const std::string& path, const std::string& what, int wait_seconds)
    : path_(path), what_(what), wait_ms_(wait_seconds * 1000) {
  // O_NONBLOCK: opening a FIFO for reading returns at once even when no process has it open for
  // writing; Read then waits for data with poll, bounded.
  fd_ = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd_ < 0) throw InputError(path, 0, "", "cannot open " + what + ": " + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd_, &st) == 0 && S_ISDIR(st.st_mode)) {
    ::close(fd_);
    fd_ = -1;
    throw InputError(path, 0, "", "cannot open " + what + ": it is a directory");
  }
}

InputFd::~InputFd() {
  if (fd_ >= 0) ::close(fd_);
}

bool InputFd::IsRegularFile() const {
  struct stat st {};
  return ::fstat(fd_, &st) == 0 && S_ISREG(st.st_mode);
}

size_t InputFd::Read(char* buf, size_t n) {
  using Clock = std::chrono::steady_clock;
  const Clock::time_point deadline = Clock::now() + std::chrono::milliseconds(wait_ms_);
  for (;;) {
    const ssize_t got = ::read(fd_, buf, n);
    if (got >= 0) {
      // A FIFO opened without blocking reads 0 bytes while no writer has it open: the end only
      // once poll has said so (POLLHUP: a writer came and went) or the file is not a FIFO.
      if (got > 0) return static_cast<size_t>(got);
      struct stat st {};
      if (::fstat(fd_, &st) != 0 || !S_ISFIFO(st.st_mode)) return 0;
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, 0) > 0 && (p.revents & POLLHUP) != 0) {
        const ssize_t last = ::read(fd_, buf, n);  // data written just before the hang-up
        if (last > 0) return static_cast<size_t>(last);
        return 0;
      }
    } else if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
      throw InputError(path_, 0, "", "cannot read " + what_ + ": " + std::strerror(errno));
    }
    // Nothing yet: wait for data, the writer's close or the deadline.
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0)
      throw InputError(path_, 0, "",
                       "no data for " + std::to_string(wait_ms_ / 1000) +
                           " s, the limit of one read: is this " + what_ +
                           " a FIFO or stream that no process writes?");
    pollfd p{fd_, POLLIN, 0};
    const int r = ::poll(&p, 1, static_cast<int>(left));
    if (r < 0 && errno != EINTR)
      throw InputError(path_, 0, "", "cannot read " + what_ + ": " + std::strerror(errno));
  }
}

InputStreambuf::int_type InputStreambuf::underflow() {
  if (gptr() < egptr()) return traits_type::to_int_type(*gptr());
  const size_t n = in_.Read(buf_, sizeof buf_);
  if (n == 0) return traits_type::eof();
  setg(buf_, buf_, buf_ + n);
  return traits_type::to_int_type(*gptr());
}

size_t Utf8SequenceLength(std::string_view text, size_t i) {
  const auto* b = reinterpret_cast<const unsigned char*>(text.data());
  const size_t n = text.size();
  const unsigned c = b[i];
  if (c < 0x80) return 1;
  // The length of the sequence and the range of its second byte (RFC 3629, section 4).
  size_t len = 0;
  unsigned lo = 0x80, hi = 0xBF;
  if (c >= 0xC2 && c <= 0xDF) {
    len = 2;
  } else if (c >= 0xE0 && c <= 0xEF) {
    len = 3;
    if (c == 0xE0) lo = 0xA0;  // overlong
    if (c == 0xED) hi = 0x9F;  // surrogates
  } else if (c >= 0xF0 && c <= 0xF4) {
    len = 4;
    if (c == 0xF0) lo = 0x90;  // overlong
    if (c == 0xF4) hi = 0x8F;  // beyond U+10FFFF
  }
  bool ok = len > 0 && i + len <= n && b[i + 1] >= lo && b[i + 1] <= hi;
  for (size_t k = 2; ok && k < len; ++k) ok = b[i + k] >= 0x80 && b[i + k] <= 0xBF;
  return ok ? len : 0;
}

void CheckUtf8(const std::string& text, const std::string& path, const std::string& what) {
  for (size_t i = 0; i < text.size();) {
    const size_t len = Utf8SequenceLength(text, i);
    if (len == 0) {
      char byte[8];
      std::snprintf(byte, sizeof byte, "0x%02X", static_cast<unsigned char>(text[i]));
      throw InputError(path, LineOfByte(text, i + 1), "",
                       std::string("byte ") + byte + " is not UTF-8 text (a " + what +
                           " is UTF-8; was it saved in another encoding?)");
    }
    i += len;
  }
}

std::string JsonSafeText(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size());
  for (size_t i = 0; i < bytes.size();) {
    const size_t len = Utf8SequenceLength(bytes, i);
    if (len == 0) {
      char esc[8];
      std::snprintf(esc, sizeof esc, "\\x%02X", static_cast<unsigned char>(bytes[i]));
      out += esc;
      ++i;
      continue;
    }
    out.append(bytes.substr(i, len));
    i += len;
  }
  return out;
}

std::vector<std::string> JsonSafeTexts(const std::vector<std::string>& texts) {
  std::vector<std::string> out;
  out.reserve(texts.size());
  for (const std::string& t : texts) out.push_back(JsonSafeText(t));
  return out;
}

std::string ReadInputFile(const std::string& path, const std::string& what, int64_t max_bytes,
                          int wait_seconds) {
  InputFd in(path, what, wait_seconds);
  std::string text;
  constexpr size_t kChunk = size_t{1} << 20;
  for (;;) {
    const size_t old = text.size();
    text.resize(old + kChunk);
    // One chunk, filled by as many reads as it takes (a FIFO returns what its writer wrote).
    size_t n = 0;
    while (n < kChunk) {
      const size_t got = in.Read(text.data() + old + n, kChunk - n);
      if (got == 0) break;
      n += got;
    }
    text.resize(old + n);
    for (size_t i = old; i < text.size(); ++i) {
      const auto c = static_cast<unsigned char>(text[i]);
      if (c < 0x20 && c != '\t' && c != '\n' && c != '\r') {
        char byte[8];
        std::snprintf(byte, sizeof byte, "0x%02X", c);
        throw InputError(path, LineOfByte(text, i + 1), "",
                         std::string("control byte ") + byte + " is not allowed in a " + what +
                             " (is this a binary file?)");
      }
    }
    if (static_cast<int64_t>(text.size()) > max_bytes)
      throw InputError(path, 0, "",
                       what + " is more than " + std::to_string(max_bytes) + " bytes, the limit");
    if (n < kChunk) break;
  }
  CheckUtf8(text, path, what);
  return text;
}

}  // namespace kvlanes
