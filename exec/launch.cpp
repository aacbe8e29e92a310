#include "exec/launch.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <optional>
#include <thread>

#include "exec/exec_error.h"
#include "io/input_error.h"

namespace kvlanes::exec {
namespace {

using Clock = std::chrono::steady_clock;

int ParseNonNegative(const char* name, const char* value) {
  const std::string s(value);
  if (s.empty() || s.size() > 9 || s.find_first_not_of("0123456789") != std::string::npos)
    throw InputError("", 0, name, "expected a non-negative integer, got '" + s + "'");
  return std::stoi(s);
}

Clock::time_point Deadline(double timeout_s) {
  return Clock::now() + std::chrono::microseconds(static_cast<int64_t>(timeout_s * 1e6));
}

std::string ClaimPath(const std::string& dir, int rank) {
  return dir + "/claim.rank" + std::to_string(rank);
}

// Locked by a claim's holder once its token is written (RendezvousClaim::Take): a claim file
// locked while this one is not is still being written over, its text possibly a dead run's.
std::string ReadyPath(const std::string& dir, int rank) {
  return dir + "/ready.rank" + std::to_string(rank);
}

// Opens `path` non-blocking (a FIFO in its place must not block) and returns the descriptor when
// it is a regular file, else -1.
int OpenRegular(const std::string& path, int flags) {
  const int fd = open(path.c_str(), flags | O_NONBLOCK | O_CLOEXEC, 0644);
  if (fd < 0) return -1;
  struct stat st {};
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    close(fd);
    return -1;
  }
  return fd;
}

// Takes flock(op | LOCK_NB) on fd, retrying while another holds it until `deadline`. Returns 0,
// or the errno of the last try (EWOULDBLOCK: still held at the deadline).
int LockBy(int fd, int op, Clock::time_point deadline) {
  while (flock(fd, op | LOCK_NB) != 0) {
    const int e = errno;
    if ((e != EWOULDBLOCK && e != EINTR) || Clock::now() > deadline) return e;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return 0;
}

std::string ReadFd(int fd) {
  std::string out;
  char buf[512];
  off_t at = 0;
  while (true) {
    const ssize_t n = pread(fd, buf, sizeof(buf), at);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return out;
    out.append(buf, static_cast<size_t>(n));
    at += n;
    if (out.size() > 4096) return out;  // a claim is one short line
  }
}

// A claim token is one short line (ReadFd reads at most 4 KiB of it).
constexpr uint64_t kMaxTokenLineBytes = 4096;

// The text of the round file `path`, or nullopt while it does not exist. Opened non-blocking and
// checked to be a regular file before it is read (the ranks only rename regular files into place:
// a FIFO there would block the open, /dev/zero would never end); read up to the stated limit.
std::optional<std::string> ReadRoundFile(const std::string& path) {
  const int fd = open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  struct stat st {};
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    close(fd);
    throw InputError(path, 0, "--rendezvous",
                     "rendezvous round file is not a regular file (a FIFO, a device or a "
                     "directory): the ranks write regular files only; give the run an empty "
                     "directory");
  }
  const uint64_t limit = kMaxRendezvousMessageBytes + kMaxTokenLineBytes;
  if (static_cast<uint64_t>(st.st_size) > limit) {
    close(fd);
    throw InputError(path, 0, "--rendezvous",
                     "rendezvous round file of " + std::to_string(st.st_size) +
                         " bytes, more than the limit of " + std::to_string(limit) +
                         " (one rank's message of at most " +
                         std::to_string(kMaxRendezvousMessageBytes) + " bytes and its token)");
  }
  std::string text(static_cast<size_t>(st.st_size), '\0');
  size_t at = 0;
  while (at < text.size()) {
    const ssize_t n = pread(fd, text.data() + at, text.size() - at, static_cast<off_t>(at));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;  // shorter than its size said: read as it is (a token check follows)
    at += static_cast<size_t>(n);
  }
  close(fd);
  text.resize(at);
  return text;
}

// --- file rendezvous: round k, rank r writes DIR/round<k>.rank<r> (complete files only: written
// to a temporary name and renamed), its first line the token of rank r's claim, then reads every
// rank's file of round k whose token matches that rank's live claim. ---
class FileRendezvous : public Rendezvous {
 public:
  FileRendezvous(std::string dir, int rank, int ranks, double timeout_s)
      : dir_(std::move(dir)), rank_(rank), ranks_(ranks), timeout_s_(timeout_s) {
    struct stat st {};
    if (stat(dir_.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
      throw ExecError("rendezvous directory " + dir_ +
                      " does not exist (create it, empty, before the run)");
    claim_ = RendezvousClaim::Take(dir_, rank_, std::min(timeout_s_, 1.0));
  }

  std::vector<std::string> AllGather(const std::string& mine) override {
    const int round = round_++;
    const std::string stem = dir_ + "/round" + std::to_string(round) + ".rank";
    if (mine.size() > kMaxRendezvousMessageBytes)
      throw ExecError("rank " + std::to_string(rank_) + ": rendezvous message of " +
                      std::to_string(mine.size()) + " bytes, more than the limit of " +
                      std::to_string(kMaxRendezvousMessageBytes));
    {
      const std::string tmp = stem + std::to_string(rank_) + ".tmp";
      std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
      out << claim_->token() << '\n' << mine;
      out.close();
      if (!out || std::rename(tmp.c_str(), (stem + std::to_string(rank_)).c_str()) != 0)
        throw ExecError("rank " + std::to_string(rank_) + ": cannot write rendezvous file " + stem +
                        std::to_string(rank_) + ": " + std::strerror(errno));
    }
    std::vector<std::string> all(static_cast<size_t>(ranks_));
    std::vector<bool> have(static_cast<size_t>(ranks_), false);
    const auto deadline = Deadline(timeout_s_);
    int missing = ranks_;
    while (true) {
      for (int r = 0; r < ranks_; ++r) {
        if (have[static_cast<size_t>(r)]) continue;
        const std::optional<std::string> file = ReadRoundFile(stem + std::to_string(r));
        if (!file) continue;
        const std::string& text = *file;
        const size_t nl = text.find('\n');
        // A file of another (dead) run, or one whose rank has not claimed yet: not this round's.
        // A rank's token is learnt once, while its claim is live (round 0: it cannot leave before
        // every rank has written round 0), so a rank that finished its last round and let its
        // claim go is still recognized.
        std::string& token = tokens_[static_cast<size_t>(r)];
        if (token.empty()) token = LiveClaimToken(dir_, r);
        if (nl == std::string::npos || token.empty() || text.compare(0, nl, token) != 0) continue;
        all[static_cast<size_t>(r)] = text.substr(nl + 1);
        have[static_cast<size_t>(r)] = true;
        --missing;
      }
      if (missing == 0) return all;
      if (Clock::now() > deadline) {
        std::string who;
        for (int r = 0; r < ranks_; ++r)
          if (!have[static_cast<size_t>(r)]) who += (who.empty() ? "" : ", ") + std::to_string(r);
        throw ExecError("rank " + std::to_string(rank_) + ": rendezvous round " +
                        std::to_string(round) + " in " + dir_ + ": no answer from rank(s) " + who +
                        " after " + std::to_string(timeout_s_) + " s");
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
  }

 private:
  std::string dir_;
  int rank_, ranks_;
  double timeout_s_;
  int round_ = 0;
  std::unique_ptr<RendezvousClaim> claim_;
  std::vector<std::string> tokens_ = std::vector<std::string>(static_cast<size_t>(ranks_));
};

// --- TCP rendezvous: rank 0 listens; every other rank connects once and says its rank. Each
// round, the others send their bytes to rank 0, which answers everyone with all of them.
// Messages are [uint64 length][bytes]. Every wait is bounded by the timeout (poll). ---
class TcpRendezvous : public Rendezvous {
 public:
  TcpRendezvous(const RendezvousSpec& spec, int rank, int ranks, double timeout_s)
      : rank_(rank),
        ranks_(ranks),
        timeout_s_(timeout_s),
        where_(spec.host + ":" + std::to_string(spec.port)) {
    const auto deadline = Deadline(timeout_s);
    addrinfo hints{};
    hints.ai_family = AF_INET;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* res = nullptr;
    if (getaddrinfo(spec.host.c_str(), std::to_string(spec.port).c_str(), &hints, &res) != 0 ||
        !res)
      throw ExecError("rendezvous tcp:" + where_ + ": cannot resolve host '" + spec.host + "'");
    sockaddr_in addr{};
    std::memcpy(&addr, res->ai_addr, sizeof(addr));
    freeaddrinfo(res);
    if (rank_ == 0) {
      listen_fd_ = socket(AF_INET, SOCK_STREAM, 0);
      const int one = 1;
      setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
      if (bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
          listen(listen_fd_, ranks_) != 0)
        throw ExecError("rank 0: cannot listen on rendezvous tcp:" + where_ + ": " +
                        std::strerror(errno));
      peers_.assign(static_cast<size_t>(ranks_), -1);
      for (int accepted = 1; accepted < ranks_; ++accepted) {
        WaitFd(listen_fd_, POLLIN, deadline, "waiting for the other ranks to connect");
        const int fd = accept(listen_fd_, nullptr, nullptr);
        if (fd < 0)
          throw ExecError("rank 0: accept on tcp:" + where_ + ": " + std::strerror(errno));
        uint64_t r = 0;
        RecvAll(fd, &r, sizeof(r), deadline);
        if (r == 0 || r >= static_cast<uint64_t>(ranks_) || peers_[r] != -1)
          throw ExecError("rank 0: rendezvous tcp:" + where_ + ": a peer said it is rank " +
                          std::to_string(r) + " (duplicate or out of range for " +
                          std::to_string(ranks_) + " ranks)");
        peers_[r] = fd;
      }
    } else {
      while (true) {
        root_fd_ = socket(AF_INET, SOCK_STREAM, 0);
        if (connect(root_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0) break;
        close(root_fd_);
        root_fd_ = -1;
        if (Clock::now() > deadline)
          throw ExecError("rank " + std::to_string(rank_) +
                          ": cannot connect to rendezvous tcp:" + where_ +
                          " (rank 0 not listening after " + std::to_string(timeout_s_) + " s)");
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
      const uint64_t r = static_cast<uint64_t>(rank_);
      SendAll(root_fd_, &r, sizeof(r));
    }
  }
  ~TcpRendezvous() override {
    for (int fd : peers_)
      if (fd >= 0) close(fd);
    if (listen_fd_ >= 0) close(listen_fd_);
    if (root_fd_ >= 0) close(root_fd_);
  }

  std::vector<std::string> AllGather(const std::string& mine) override {
    const auto deadline = Deadline(timeout_s_);
    std::vector<std::string> all(static_cast<size_t>(ranks_));
    if (rank_ == 0) {
      all[0] = mine;
      for (int r = 1; r < ranks_; ++r)
        all[static_cast<size_t>(r)] = RecvMsg(peers_[static_cast<size_t>(r)], deadline);
      for (int r = 1; r < ranks_; ++r)
        for (const std::string& s : all) SendMsg(peers_[static_cast<size_t>(r)], s);
    } else {
      SendMsg(root_fd_, mine);
      for (auto& s : all) s = RecvMsg(root_fd_, deadline);
    }
    return all;
  }

 private:
  void WaitFd(int fd, short events, Clock::time_point deadline, const char* what) const {
    while (true) {
      const auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
      if (left <= 0)
        throw ExecError("rank " + std::to_string(rank_) + ": rendezvous tcp:" + where_ +
                        ": timed out after " + std::to_string(timeout_s_) + " s " + what);
      pollfd p{fd, events, 0};
      const int n = poll(&p, 1, static_cast<int>(std::min<int64_t>(left, 1000)));
      if (n > 0) return;
      if (n < 0 && errno != EINTR)
        throw ExecError("rank " + std::to_string(rank_) + ": poll: " + std::strerror(errno));
    }
  }
  void SendAll(int fd, const void* data, size_t n) const {
    const char* p = static_cast<const char*>(data);
    while (n > 0) {
      const ssize_t k = send(fd, p, n, MSG_NOSIGNAL);
      if (k < 0 && errno == EINTR) continue;
      if (k <= 0)
        throw ExecError("rank " + std::to_string(rank_) + ": rendezvous tcp:" + where_ +
                        ": send failed (peer gone?)");
      p += k;
      n -= static_cast<size_t>(k);
    }
  }
  void RecvAll(int fd, void* data, size_t n, Clock::time_point deadline) const {
    char* p = static_cast<char*>(data);
    while (n > 0) {
      WaitFd(fd, POLLIN, deadline, "waiting for a peer's bytes");
      const ssize_t k = recv(fd, p, n, 0);
      if (k < 0 && errno == EINTR) continue;
      if (k <= 0)
        throw ExecError("rank " + std::to_string(rank_) + ": rendezvous tcp:" + where_ +
                        ": a peer closed the connection (it died?)");
      p += k;
      n -= static_cast<size_t>(k);
    }
  }
  void SendMsg(int fd, const std::string& s) const {
    const uint64_t n = s.size();
    SendAll(fd, &n, sizeof(n));
    SendAll(fd, s.data(), s.size());
  }
  std::string RecvMsg(int fd, Clock::time_point deadline) const {
    uint64_t n = 0;
    RecvAll(fd, &n, sizeof(n), deadline);
    if (n > kMaxRendezvousMessageBytes)
      throw ExecError("rendezvous tcp:" + where_ + ": message of " + std::to_string(n) +
                      " bytes, more than the limit of " +
                      std::to_string(kMaxRendezvousMessageBytes));
    std::string s(n, '\0');
    RecvAll(fd, s.data(), n, deadline);
    return s;
  }

  int rank_, ranks_;
  double timeout_s_;
  std::string where_;
  int listen_fd_ = -1;
  int root_fd_ = -1;
  std::vector<int> peers_;
};

}  // namespace

RankEnv ParseRankEnv(const GetEnvFn& getenv) {
  struct Source {
    const char* rank;
    const char* size;
    const char* local;
  };
  static constexpr Source kSources[] = {
      {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK"},
      {"SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID"},
      {"RANK", "WORLD_SIZE", "LOCAL_RANK"},
  };
  for (const Source& s : kSources) {
    const char* r = getenv(s.rank);
    const char* n = getenv(s.size);
    if (!r && !n) continue;
    if (!r || !n)
      throw InputError(
          "", 0, r ? s.size : s.rank,
          std::string("not set, but ") + (r ? s.rank : s.size) + " is (--launch env needs both)");
    RankEnv e;
    e.rank = ParseNonNegative(s.rank, r);
    e.ranks = ParseNonNegative(s.size, n);
    if (e.ranks < 1) throw InputError("", 0, s.size, "must be at least 1");
    if (e.rank >= e.ranks)
      throw InputError(
          "", 0, s.rank,
          std::to_string(e.rank) + " is not below " + s.size + "=" + std::to_string(e.ranks));
    if (const char* l = getenv(s.local)) e.local_rank = ParseNonNegative(s.local, l);
    e.source = std::string(s.rank) + "/" + s.size;
    return e;
  }
  throw InputError(
      "", 0, "--launch env",
      "no rank in the environment (set OMPI_COMM_WORLD_RANK/SIZE, SLURM_PROCID/SLURM_NTASKS or "
      "RANK/WORLD_SIZE, or use --launch local)");
}

std::unique_ptr<RendezvousClaim> RendezvousClaim::Take(const std::string& dir, int rank,
                                                       double wait_s) {
  const std::string path = ClaimPath(dir, rank);
  const int fd = open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0)
    throw InputError("", 0, "--rendezvous",
                     "cannot create the claim " + path + ": " + std::strerror(errno));
  const auto deadline = Deadline(wait_s);
  if (const int e = LockBy(fd, LOCK_EX, deadline); e != 0) {
    if (e != EWOULDBLOCK && e != EINTR) {
      close(fd);
      throw InputError("", 0, "--rendezvous",
                       "cannot lock the claim " + path + ": " + std::strerror(e));
    }
    std::string holder = ReadFd(fd);
    while (!holder.empty() && holder.back() == '\n') holder.pop_back();
    close(fd);
    throw InputError("", 0, "--rendezvous",
                     "directory " + dir + " is in use by another run: rank " +
                         std::to_string(rank) + " is claimed by " +
                         (holder.empty() ? "a live process" : holder) + " (" + path +
                         " is locked); give each run its own directory");
  }
  const bool stale = !ReadFd(fd).empty();
  char host[256] = {0};
  gethostname(host, sizeof(host) - 1);
  // Unique per claim (a process may claim the same rank twice in turn, as tests do).
  static std::atomic<int64_t> claims{0};
  const int64_t ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                         std::chrono::system_clock::now().time_since_epoch())
                         .count();
  const std::string token = "pid " + std::to_string(getpid()) + " on host " + host + " (started " +
                            std::to_string(ns) + " ns, claim " + std::to_string(claims++) +
                            ", rank " + std::to_string(rank) + ")";
  const std::string line = token + "\n";
  if (ftruncate(fd, 0) != 0 ||
      pwrite(fd, line.data(), line.size(), 0) != static_cast<ssize_t>(line.size())) {
    const std::string why = std::strerror(errno);
    close(fd);
    throw InputError("", 0, "--rendezvous", "cannot write the claim " + path + ": " + why);
  }
  // Only now is the token readable as live: until the ready lock is taken, a reader that finds
  // the claim locked may still read the text a dead run left in it. Nobody else takes the ready
  // lock while we hold the claim; a reader's momentary probe is waited out.
  const std::string ready_path = ReadyPath(dir, rank);
  const int ready = OpenRegular(ready_path, O_RDWR | O_CREAT);
  const int e = ready < 0 ? 0 : LockBy(ready, LOCK_EX, Clock::now() + std::chrono::seconds(5));
  if (ready < 0 || e != 0) {
    const std::string why = ready < 0 ? "cannot open it as a regular file" : std::strerror(e);
    if (ready >= 0) close(ready);
    close(fd);
    throw InputError("", 0, "--rendezvous", "cannot lock " + ready_path + ": " + why);
  }
  return std::unique_ptr<RendezvousClaim>(new RendezvousClaim(fd, ready, token, stale));
}

RendezvousClaim::~RendezvousClaim() {
  // Drops the locks, ready first; the files stay (a stale claim for the next run).
  if (ready_fd_ >= 0) close(ready_fd_);
  if (fd_ >= 0) close(fd_);
}

std::string LiveClaimToken(const std::string& dir, int rank) {
  // Live means the ready lock is held: its holder wrote the claim's token before taking it.
  // (Our probe lock is released at once; a claimant that meets it retries.)
  const int ready = OpenRegular(ReadyPath(dir, rank), O_RDONLY);
  if (ready < 0) return "";
  const bool held = flock(ready, LOCK_SH | LOCK_NB) != 0;
  close(ready);
  if (!held) return "";
  const int fd = OpenRegular(ClaimPath(dir, rank), O_RDONLY);
  if (fd < 0) return "";
  std::string text = ReadFd(fd);
  close(fd);
  const size_t nl = text.find('\n');
  return nl == std::string::npos ? "" : text.substr(0, nl);
}

RendezvousSpec ParseRendezvous(std::string_view text) {
  RendezvousSpec s;
  s.text = std::string(text);
  auto fail = [&](const std::string& why) -> RendezvousSpec {
    throw InputError("", 0, "--rendezvous",
                     "'" + s.text + "': " + why + " (expected file:DIR or tcp:HOST:PORT)");
  };
  if (text.starts_with("file:")) {
    s.kind = RendezvousSpec::Kind::kFile;
    s.path = std::string(text.substr(5));
    if (s.path.empty()) return fail("empty directory");
    return s;
  }
  if (text.starts_with("tcp:")) {
    s.kind = RendezvousSpec::Kind::kTcp;
    const std::string_view rest = text.substr(4);
    const size_t colon = rest.rfind(':');
    if (colon == std::string_view::npos || colon == 0) return fail("missing HOST:PORT");
    s.host = std::string(rest.substr(0, colon));
    const std::string port(rest.substr(colon + 1));
    if (port.empty() || port.size() > 5 ||
        port.find_first_not_of("0123456789") != std::string::npos)
      return fail("port '" + port + "' is not a number");
    s.port = std::stoi(port);
    if (s.port < 1 || s.port > 65535) return fail("port out of range 1..65535");
    return s;
  }
  return fail("unknown kind");
}

RendezvousSpec DefaultRendezvous(const GetEnvFn& getenv) {
  if (const char* r = getenv("KVLANES_RENDEZVOUS")) return ParseRendezvous(r);
  const char* addr = getenv("MASTER_ADDR");
  const char* port = getenv("MASTER_PORT");
  if (addr && port) return ParseRendezvous(std::string("tcp:") + addr + ":" + port);
  throw InputError(
      "", 0, "--rendezvous",
      "--launch env needs a rendezvous: --rendezvous file:DIR|tcp:HOST:PORT, KVLANES_RENDEZVOUS, "
      "or MASTER_ADDR and MASTER_PORT");
}

std::unique_ptr<Rendezvous> OpenRendezvous(const RendezvousSpec& spec, int rank, int ranks,
                                           double timeout_s) {
  if (spec.kind == RendezvousSpec::Kind::kFile)
    return std::make_unique<FileRendezvous>(spec.path, rank, ranks, timeout_s);
  return std::make_unique<TcpRendezvous>(spec, rank, ranks, timeout_s);
}

}  // namespace kvlanes::exec
