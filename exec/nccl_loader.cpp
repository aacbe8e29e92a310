// The NCCL entry points the CUDA backend calls, defined here and forwarded to libnccl opened with
// dlopen on first use. Linked, libnccl (about 200 MB) was loaded, relocated and initialised by
// every kvlanes process at start, a replay of a trace included, though only the executor's CUDA
// backend (`kvlanes exec`, `bench sweep`) and the GPU tests use it. The first call of any of
// these opens the library: the path CMake found (KVLANES_NCCL_LIBRARY), then the sonames on the
// loader's path; a missing library or symbol is an ExecError naming what was tried.
#include <nccl.h>

#include <mutex>
#include <string>

#include "exec/shared_library.h"

namespace kvlanes::exec {
namespace {

struct NcclApi {
  decltype(&::ncclGetVersion) get_version = nullptr;
  decltype(&::ncclGetUniqueId) get_unique_id = nullptr;
  decltype(&::ncclCommInitRankConfig) comm_init_rank_config = nullptr;
  decltype(&::ncclCommFinalize) comm_finalize = nullptr;
  decltype(&::ncclCommDestroy) comm_destroy = nullptr;
  decltype(&::ncclCommAbort) comm_abort = nullptr;
  decltype(&::ncclCommGetAsyncError) comm_get_async_error = nullptr;
  decltype(&::ncclGetErrorString) get_error_string = nullptr;
  decltype(&::ncclGetLastError) get_last_error = nullptr;
  decltype(&::ncclAllGather) all_gather = nullptr;
  decltype(&::ncclBroadcast) broadcast = nullptr;
  decltype(&::ncclAllReduce) all_reduce = nullptr;
};

const NcclApi& Api() {
  static NcclApi api;
  static std::once_flag once;
  std::call_once(once, [] {
#ifdef KVLANES_NCCL_LIBRARY
    const auto names = {KVLANES_NCCL_LIBRARY, "libnccl.so.2", "libnccl.so"};
#else
    const auto names = {"libnccl.so.2", "libnccl.so"};
#endif
    const SharedLibrary lib(names, "NCCL", "libnccl",
                            "the CUDA backend needs it; put its directory on LD_LIBRARY_PATH "
                            "(docs/gpu_runs.md)",
                            "NCCL");
    lib.Bind("ncclGetVersion", &api.get_version);
    lib.Bind("ncclGetUniqueId", &api.get_unique_id);
    lib.Bind("ncclCommInitRankConfig", &api.comm_init_rank_config);
    lib.Bind("ncclCommFinalize", &api.comm_finalize);
    lib.Bind("ncclCommDestroy", &api.comm_destroy);
    lib.Bind("ncclCommAbort", &api.comm_abort);
    lib.Bind("ncclCommGetAsyncError", &api.comm_get_async_error);
    lib.Bind("ncclGetErrorString", &api.get_error_string);
    lib.Bind("ncclGetLastError", &api.get_last_error);
    lib.Bind("ncclAllGather", &api.all_gather);
    lib.Bind("ncclBroadcast", &api.broadcast);
    lib.Bind("ncclAllReduce", &api.all_reduce);
  });
  return api;
}

}  // namespace
}  // namespace kvlanes::exec

// The definitions the CUDA backend links against, with NCCL's own declarations (nccl.h).
ncclResult_t ncclGetVersion(int* version) { return kvlanes::exec::Api().get_version(version); }

ncclResult_t ncclGetUniqueId(ncclUniqueId* unique_id) {
  return kvlanes::exec::Api().get_unique_id(unique_id);
}

ncclResult_t ncclCommInitRankConfig(ncclComm_t* comm, int nranks, ncclUniqueId comm_id, int rank,
                                    ncclConfig_t* config) {
  return kvlanes::exec::Api().comm_init_rank_config(comm, nranks, comm_id, rank, config);
}

ncclResult_t ncclCommFinalize(ncclComm_t comm) { return kvlanes::exec::Api().comm_finalize(comm); }

ncclResult_t ncclCommDestroy(ncclComm_t comm) { return kvlanes::exec::Api().comm_destroy(comm); }

ncclResult_t ncclCommAbort(ncclComm_t comm) { return kvlanes::exec::Api().comm_abort(comm); }

ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* async_error) {
  return kvlanes::exec::Api().comm_get_async_error(comm, async_error);
}

const char* ncclGetErrorString(ncclResult_t result) {
  return kvlanes::exec::Api().get_error_string(result);
}

const char* ncclGetLastError(ncclComm_t comm) { return kvlanes::exec::Api().get_last_error(comm); }

ncclResult_t ncclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount,
                           ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream) {
  return kvlanes::exec::Api().all_gather(sendbuff, recvbuff, sendcount, datatype, comm, stream);
}

ncclResult_t ncclBroadcast(const void* sendbuff, void* recvbuff, size_t count,
                           ncclDataType_t datatype, int root, ncclComm_t comm,
                           cudaStream_t stream) {
  return kvlanes::exec::Api().broadcast(sendbuff, recvbuff, count, datatype, root, comm, stream);
}

ncclResult_t ncclAllReduce(const void* sendbuff, void* recvbuff, size_t count,
                           ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                           cudaStream_t stream) {
  return kvlanes::exec::Api().all_reduce(sendbuff, recvbuff, count, datatype, op, comm, stream);
}
