// --launch env reads rank and world size from mpirun, Slurm or torchrun variables; rendezvous
// specs parse or are refused with the option named; the file and TCP rendezvous really exchange
// bytes between ranks (threads here, loopback only) and time out naming the missing rank.
#include <doctest/doctest.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <functional>
#include <map>
#include <thread>
#include <vector>

#include "exec/exec_error.h"
#include "exec/launch.h"
#include "exec_cases.h"
#include "io/input_error.h"

namespace kvlanes::exec::testing {
namespace {

GetEnvFn Env(std::map<std::string, std::string> vars) {
  return [vars = std::move(vars)](const char* k) -> const char* {
    auto it = vars.find(k);
    return it == vars.end() ? nullptr : it->second.c_str();
  };
}

TEST_CASE("rank and world size come from mpirun, Slurm or torchrun variables, in that order") {
  RankEnv e = ParseRankEnv(Env({{"OMPI_COMM_WORLD_RANK", "3"},
                                {"OMPI_COMM_WORLD_SIZE", "8"},
                                {"OMPI_COMM_WORLD_LOCAL_RANK", "1"},
                                {"RANK", "0"},
                                {"WORLD_SIZE", "1"}}));
  CHECK(e.rank == 3);
  CHECK(e.ranks == 8);
  CHECK(e.local_rank == 1);
  CHECK(e.source == "OMPI_COMM_WORLD_RANK/OMPI_COMM_WORLD_SIZE");
  e = ParseRankEnv(Env({{"SLURM_PROCID", "5"}, {"SLURM_NTASKS", "6"}}));
  CHECK(e.rank == 5);
  CHECK(e.ranks == 6);
  CHECK(e.local_rank == -1);
  e = ParseRankEnv(Env({{"RANK", "1"}, {"WORLD_SIZE", "2"}, {"LOCAL_RANK", "1"}}));
  CHECK(e.rank == 1);
  CHECK(e.local_rank == 1);
  CHECK_THROWS_WITH_AS(ParseRankEnv(Env({{"SLURM_PROCID", "0"}})),
                       doctest::Contains("SLURM_NTASKS: not set, but SLURM_PROCID is"), InputError);
  CHECK_THROWS_WITH_AS(ParseRankEnv(Env({{"RANK", "two"}, {"WORLD_SIZE", "4"}})),
                       doctest::Contains("RANK: expected a non-negative integer, got 'two'"),
                       InputError);
  CHECK_THROWS_WITH_AS(ParseRankEnv(Env({{"RANK", "4"}, {"WORLD_SIZE", "4"}})),
                       doctest::Contains("is not below WORLD_SIZE=4"), InputError);
  CHECK_THROWS_WITH_AS(ParseRankEnv(Env({})), doctest::Contains("no rank in the environment"),
                       InputError);
}

TEST_CASE(
    "rendezvous specs are file:DIR or tcp:HOST:PORT, with torchrun's variables as a default") {
  RendezvousSpec s = ParseRendezvous("file:/shared/run1");
  CHECK(s.kind == RendezvousSpec::Kind::kFile);
  CHECK(s.path == "/shared/run1");
  s = ParseRendezvous("tcp:node01:29500");
  CHECK(s.kind == RendezvousSpec::Kind::kTcp);
  CHECK(s.host == "node01");
  CHECK(s.port == 29500);
  CHECK_THROWS_WITH_AS(ParseRendezvous("tcp:node01"),
                       doctest::Contains("--rendezvous: 'tcp:node01': missing HOST:PORT"),
                       InputError);
  CHECK_THROWS_WITH_AS(ParseRendezvous("tcp:h:99999"), doctest::Contains("port out of range"),
                       InputError);
  CHECK_THROWS_WITH_AS(ParseRendezvous("udp:h:1"), doctest::Contains("unknown kind"), InputError);
  CHECK_THROWS_WITH_AS(ParseRendezvous("file:"), doctest::Contains("empty directory"), InputError);
  s = DefaultRendezvous(Env({{"MASTER_ADDR", "10.0.0.1"}, {"MASTER_PORT", "29400"}}));
  CHECK(s.host == "10.0.0.1");
  CHECK(s.port == 29400);
  s = DefaultRendezvous(
      Env({{"KVLANES_RENDEZVOUS", "file:/x"}, {"MASTER_ADDR", "a"}, {"MASTER_PORT", "1"}}));
  CHECK(s.path == "/x");
  CHECK_THROWS_WITH_AS(DefaultRendezvous(Env({})),
                       doctest::Contains("--launch env needs a rendezvous"), InputError);
}

// Three ranks as threads exchange two rounds of bytes; every rank sees every rank's bytes.
void ExchangeThreeRanks(const RendezvousSpec& spec) {
  constexpr int N = 3;
  std::vector<std::vector<std::vector<std::string>>> seen(N);
  std::vector<std::string> errors(N);
  std::vector<std::thread> threads;
  for (int r = 0; r < N; ++r)
    threads.emplace_back([&, r] {
      try {
        auto rv = OpenRendezvous(spec, r, N, 10);
        seen[r].push_back(rv->AllGather("round0 from " + std::to_string(r)));
        seen[r].push_back(
            rv->AllGather(std::string(static_cast<size_t>(1000 * r), static_cast<char>('a' + r))));
      } catch (const std::exception& e) {
        errors[r] = e.what();
      }
    });
  for (auto& t : threads) t.join();
  for (int r = 0; r < N; ++r) {
    CAPTURE(r);
    REQUIRE(errors[r].empty());
    REQUIRE(seen[r].size() == 2);
    for (int q = 0; q < N; ++q) {
      CHECK(seen[r][0][q] == "round0 from " + std::to_string(q));
      CHECK(seen[r][1][q] ==
            std::string(static_cast<size_t>(1000 * q), static_cast<char>('a' + q)));
    }
  }
}

TEST_CASE(
    "the file rendezvous exchanges bytes between ranks and names a missing rank after its "
    "timeout") {
  TempDir dir;
  ExchangeThreeRanks(ParseRendezvous("file:" + dir.path()));
  TempDir lonely;
  auto rv = OpenRendezvous(ParseRendezvous("file:" + lonely.path()), 0, 2, 0.2);
  CHECK_THROWS_WITH_AS(rv->AllGather("x"), doctest::Contains("no answer from rank(s) 1"),
                       ExecError);
  CHECK_THROWS_WITH_AS(OpenRendezvous(ParseRendezvous("file:" + dir.File("missing")), 0, 2, 1),
                       doctest::Contains("does not exist"), ExecError);
}

TEST_CASE(
    "a file rendezvous rank claimed by a live run is refused naming it; a released claim is "
    "taken over and the dead run's round files are not read") {
  TempDir dir;
  const RendezvousSpec spec = ParseRendezvous("file:" + dir.path());
  {
    auto holder = OpenRendezvous(spec, 0, 2, 5);
    const std::string held_by =
        "is in use by another run: rank 0 is claimed by pid " + std::to_string(getpid());
    CHECK_THROWS_WITH_AS(OpenRendezvous(spec, 0, 2, 5), doctest::Contains(held_by.c_str()),
                         InputError);
    // The holder leaves a round-0 file behind, then dies (goes out of scope).
    auto peer = std::thread([&] {
      try {
        OpenRendezvous(spec, 1, 2, 0.2)->AllGather("old 1");
      } catch (const ExecError&) {
      }
    });
    try {
      holder->AllGather("old 0");
    } catch (const ExecError&) {
    }
    peer.join();
  }
  // A new run in the same directory: rank 1 of the old run wrote round0.rank1, but its claim is
  // stale, so the new rank 0 waits for the new rank 1 and sees only the new bytes.
  auto r0 = OpenRendezvous(spec, 0, 2, 5);
  std::vector<std::string> got;
  std::thread t([&] { got = r0->AllGather("new 0"); });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  auto r1 = OpenRendezvous(spec, 1, 2, 5);
  CHECK(r1->AllGather("new 1") == std::vector<std::string>{"new 0", "new 1"});
  t.join();
  CHECK(got == std::vector<std::string>{"new 0", "new 1"});
}

// The window in which a new claimant holds the claim lock but has not yet written its token
// over the dead run's: the claim file is locked and still names the dead run. A reader must not
// take that text as the live token (it would accept the dead run's round files as this run's).
TEST_CASE("a claim being taken over is not live until its holder has written its own token") {
  TempDir dir;
  {
    auto dead = RendezvousClaim::Take(dir.path(), 1, 1);
    CHECK(LiveClaimToken(dir.path(), 1) == dead->token());
  }
  CHECK(LiveClaimToken(dir.path(), 1).empty());  // the holder died: stale
  // A claimant between its lock and its write: the lock is held, the text is the dead run's.
  const int fd = open(dir.File("claim.rank1").c_str(), O_RDWR);
  REQUIRE(fd >= 0);
  REQUIRE(flock(fd, LOCK_EX | LOCK_NB) == 0);
  CHECK(LiveClaimToken(dir.path(), 1).empty());
  close(fd);
  // Taken over in full, the new token is live.
  auto live = RendezvousClaim::Take(dir.path(), 1, 1);
  CHECK(live->took_stale());
  CHECK(LiveClaimToken(dir.path(), 1) == live->token());
}

// A round file replaced by a FIFO (whose open would block forever), by a link to /dev/zero
// (which never ends) or by a file past the stated limit is refused at once, naming the file.
TEST_CASE(
    "a file rendezvous refuses a round file that is a FIFO, a device or longer than the limit, "
    "without blocking on it or reading it") {
  const auto refused = [](const std::function<void(const std::string&)>& plant, const char* why) {
    CAPTURE(why);
    TempDir dir;
    const RendezvousSpec spec = ParseRendezvous("file:" + dir.path());
    auto r1 = OpenRendezvous(spec, 1, 2, 5);  // holds rank 1's claim; never writes
    auto r0 = OpenRendezvous(spec, 0, 2, 5);
    plant(dir.File("round0.rank1"));
    const std::string want = dir.File("round0.rank1") + ": --rendezvous: " + why;
    const auto start = std::chrono::steady_clock::now();
    CHECK_THROWS_WITH_AS(r0->AllGather("x"), doctest::Contains(want.c_str()), InputError);
    CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(4));  // not the timeout
  };
  refused([](const std::string& p) { REQUIRE(mkfifo(p.c_str(), 0644) == 0); },
          "rendezvous round file is not a regular file");
  refused([](const std::string& p) { REQUIRE(symlink("/dev/zero", p.c_str()) == 0); },
          "rendezvous round file is not a regular file");
  refused(
      [](const std::string& p) {
        const int fd = open(p.c_str(), O_WRONLY | O_CREAT, 0644);
        REQUIRE(fd >= 0);
        // Sparse: no disk is used and nothing is read (the size is checked first).
        CHECK(ftruncate(fd, static_cast<off_t>(kMaxRendezvousMessageBytes + 4097)) == 0);
        close(fd);
      },
      "rendezvous round file of 4294971393 bytes, more than the limit of 4294971392");
}

TEST_CASE("the TCP rendezvous exchanges bytes over loopback and times out when rank 0 is absent") {
  // A port from the ephemeral range derived from the pid, so parallel test runs rarely collide.
  const int port = 20000 + static_cast<int>(getpid() % 20000);
  ExchangeThreeRanks(ParseRendezvous("tcp:127.0.0.1:" + std::to_string(port)));
  CHECK_THROWS_WITH_AS(
      OpenRendezvous(ParseRendezvous("tcp:127.0.0.1:" + std::to_string(port + 1)), 1, 2, 0.3),
      doctest::Contains("cannot connect to rendezvous"), ExecError);
}

}  // namespace
}  // namespace kvlanes::exec::testing
