// The four cuBLAS entry points the forward-model proxy calls, defined here and forwarded to
// libcublas opened with dlopen on first use. Linking libcublas (and with it libcublasLt) into
// the binary made every process map and relocate both libraries and run their initialisers at
// start: about 200 MB resident and a quarter of a second on the 2-core development machine for
// `kvlanes --version`, more than a whole replay of a small trace. Only `exec --forward model`
// and the forward GPU tests need cuBLAS, so only they load it.
#include <cublas_v2.h>

#include <mutex>
#include <string>

#include "exec/shared_library.h"

namespace kvlanes::exec {
namespace {

struct CublasApi {
  decltype(&::cublasCreate_v2) create = nullptr;
  decltype(&::cublasDestroy_v2) destroy = nullptr;
  decltype(&::cublasSetStream_v2) set_stream = nullptr;
  // cublas_api.h also declares a C++ overload taking a cudaDataType compute type: name the
  // C entry point's type.
  cublasStatus_t(CUBLASWINAPI* gemm_strided_batched_ex)(
      cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int, const void*, const void*,
      cudaDataType, int, long long int, const void*, cudaDataType, int, long long int, const void*,
      void*, cudaDataType, int, long long int, int, cublasComputeType_t,
      cublasGemmAlgo_t) = nullptr;
};

const CublasApi& Api() {
  static CublasApi api;
  static std::once_flag once;
  std::call_once(once, [] {
    const SharedLibrary lib({"libcublas.so.13", "libcublas.so"}, "forward model", "cuBLAS",
                            "--forward model needs libcublas; put its directory on "
                            "LD_LIBRARY_PATH (docs/gpu_runs.md) or run with --forward synthetic",
                            "cuBLAS");
    lib.Bind("cublasCreate_v2", &api.create);
    lib.Bind("cublasDestroy_v2", &api.destroy);
    lib.Bind("cublasSetStream_v2", &api.set_stream);
    lib.Bind("cublasGemmStridedBatchedEx", &api.gemm_strided_batched_ex);
  });
  return api;
}

}  // namespace
}  // namespace kvlanes::exec

// The definitions the proxy links against, with cuBLAS's own declarations (cublas_api.h).
cublasStatus_t CUBLASWINAPI cublasCreate_v2(cublasHandle_t* handle) {
  return kvlanes::exec::Api().create(handle);
}

cublasStatus_t CUBLASWINAPI cublasDestroy_v2(cublasHandle_t handle) {
  return kvlanes::exec::Api().destroy(handle);
}

cublasStatus_t CUBLASWINAPI cublasSetStream_v2(cublasHandle_t handle, cudaStream_t stream) {
  return kvlanes::exec::Api().set_stream(handle, stream);
}

cublasStatus_t CUBLASWINAPI cublasGemmStridedBatchedEx(
    cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m, int n, int k,
    const void* alpha, const void* a, cudaDataType a_type, int lda, long long int stride_a,
    const void* b, cudaDataType b_type, int ldb, long long int stride_b, const void* beta, void* c,
    cudaDataType c_type, int ldc, long long int stride_c, int batch_count,
    cublasComputeType_t compute_type, cublasGemmAlgo_t algo) {
  return kvlanes::exec::Api().gemm_strided_batched_ex(
      handle, transa, transb, m, n, k, alpha, a, a_type, lda, stride_a, b, b_type, ldb, stride_b,
      beta, c, c_type, ldc, stride_c, batch_count, compute_type, algo);
}
