// Where a rank process comes from and how the ranks find each other (docs/executor.md).
//   --launch local  `kvlanes exec` forks one process per rank on this node and supervises them.
//   --launch env    an existing launcher (mpirun, srun, torchrun) started the processes; each
//                   reads its rank and the world size from the environment.
// The rendezvous is how the ranks exchange their first bytes (the NCCL unique id, the GPU each
// rank uses, CUDA IPC handles): a shared directory, or a TCP address that rank 0 listens on.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "io/name_table.h"

namespace kvlanes::exec {

// How rank processes start (`kvlanes exec --launch`): local forks one per rank here; env: this
// process is one rank of an external launcher.
enum class LaunchKind { kLocal, kEnv };
inline constexpr NameTable<LaunchKind, 2> kLaunchNames{
    {{{LaunchKind::kLocal, "local"}, {LaunchKind::kEnv, "env"}}}, "launch"};

struct RankEnv {
  int rank = -1;
  int ranks = 0;
  int local_rank = -1;  // -1 when the launcher does not say
  std::string source;   // the variables read, e.g. "OMPI_COMM_WORLD_RANK/OMPI_COMM_WORLD_SIZE"
};

using GetEnvFn = std::function<const char*(const char*)>;

// The first complete pair of OMPI_COMM_WORLD_RANK/_SIZE, SLURM_PROCID/SLURM_NTASKS,
// RANK/WORLD_SIZE (with OMPI_COMM_WORLD_LOCAL_RANK, SLURM_LOCALID or LOCAL_RANK when present).
// Throws InputError naming the variable when a value is malformed, when only half a pair is
// set, or when none is set.
RankEnv ParseRankEnv(const GetEnvFn& getenv);

struct RendezvousSpec {
  enum class Kind { kFile, kTcp };
  Kind kind = Kind::kFile;
  std::string path;  // kFile: a directory every rank can read and write, fresh for each run
  std::string host;  // kTcp: the address rank 0 listens on and the others connect to
  int port = 0;
  std::string text;  // as given
};

// "file:DIR" or "tcp:HOST:PORT". Throws InputError(field "--rendezvous").
RendezvousSpec ParseRendezvous(std::string_view text);
// The rendezvous for --launch env when --rendezvous is not given: KVLANES_RENDEZVOUS, else
// MASTER_ADDR/MASTER_PORT (torchrun's variables) as tcp:MASTER_ADDR:MASTER_PORT. Throws
// InputError when neither is set.
RendezvousSpec DefaultRendezvous(const GetEnvFn& getenv);

// One rank's claim on a `file:` rendezvous directory: DIR/claim.rank<r>, locked (flock) for as
// long as the claiming process lives and holding "pid P on host H (started T)", and
// DIR/ready.rank<r>, locked once that token is written (until then the claim file may still hold
// a dead run's token). A directory whose rank r is claimed by a live process belongs to another
// run and is refused; a claim whose process died (the locks went with it) is stale and is taken
// over.
class RendezvousClaim {
 public:
  // Throws InputError(field "--rendezvous") naming the run that holds the claim when it is
  // still held after `wait_s` seconds (a reader's momentary probe holds it for microseconds).
  static std::unique_ptr<RendezvousClaim> Take(const std::string& dir, int rank, double wait_s);
  ~RendezvousClaim();
  RendezvousClaim(const RendezvousClaim&) = delete;
  RendezvousClaim& operator=(const RendezvousClaim&) = delete;
  const std::string& token() const { return token_; }
  bool took_stale() const { return took_stale_; }  // a dead run's claim was taken over

 private:
  RendezvousClaim(int fd, int ready_fd, std::string token, bool stale)
      : fd_(fd), ready_fd_(ready_fd), token_(std::move(token)), took_stale_(stale) {}
  int fd_, ready_fd_;
  std::string token_;
  bool took_stale_;
};

// The token of the live claim on rank `rank` of `dir`; "" when there is none, or when it is
// stale or still being written (its ready lock not yet taken).
std::string LiveClaimToken(const std::string& dir, int rank);

// The most bytes one rank may exchange in one rendezvous round (4 GiB), over TCP and through a
// `file:` directory alike: a longer message, or a round file longer than it plus its token line,
// is refused. A round file must be a regular file (a FIFO or a device put in its place is refused
// without being opened for a blocking read).
inline constexpr uint64_t kMaxRendezvousMessageBytes = uint64_t{1} << 32;

// A small all-to-all exchange of bytes between the ranks, before any communicator exists.
class Rendezvous {
 public:
  virtual ~Rendezvous() = default;
  // Every rank's `mine`, in rank order. Every rank calls it the same number of times; each call
  // waits at most the timeout given at Open, then throws ExecError naming the missing ranks.
  virtual std::vector<std::string> AllGather(const std::string& mine) = 0;
};

// Throws ExecError when the rendezvous cannot be reached within timeout_s. A file rendezvous
// claims rank `rank` of the directory (RendezvousClaim) and reads only the round files written
// under the live claims of this run, never those a dead run left.
std::unique_ptr<Rendezvous> OpenRendezvous(const RendezvousSpec& spec, int rank, int ranks,
                                           double timeout_s);

}  // namespace kvlanes::exec
