// gpuws benchmark kernels for hosts with the CUDA toolkit (nvcc) but neither PyTorch nor CuPy.
//
// Built by bench_runner.py:  nvcc -O3 -std=c++17 -o gpuws_bench_kernels bench_kernels.cu -lcublas
// Usage: gpuws_bench_kernels WHAT DEVICE SIZE REPEATS
//   WHAT: gemm_fp32 | gemm_tf32 | gemm_fp16 | gemm_bf16 (SIZE = n), mem_copy | mem_triad | h2d | d2h
//         (SIZE = bytes per buffer), stress (SIZE = n, REPEATS = seconds)
// Prints one JSON line: {"seconds": [...]} with the time of each timed repeat (CUDA events, after
// warmup); stress adds "iterations" and "mismatches". Errors: {"error": "..."} and exit status 1.
// Medians and figures are computed by the Python harness, the same way for every backend.

#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

static void fail(const std::string& what) {
  std::printf("{\"error\": \"%s\"}\n", what.c_str());
  std::exit(1);
}

#define CUDA_OK(call)                                                              \
  do {                                                                             \
    cudaError_t err_ = (call);                                                     \
    if (err_ != cudaSuccess) fail(std::string(#call) + ": " + cudaGetErrorString(err_)); \
  } while (0)
#define CUBLAS_OK(call)                                                            \
  do {                                                                             \
    cublasStatus_t st_ = (call);                                                   \
    if (st_ != CUBLAS_STATUS_SUCCESS) fail(std::string(#call) + ": cuBLAS status " + std::to_string(st_)); \
  } while (0)

__global__ void fill(float* x, size_t n, unsigned seed) {
  size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
  for (; i < n; i += (size_t)gridDim.x * blockDim.x) {
    unsigned h = (unsigned)i * 2654435761u ^ seed;
    x[i] = ((h >> 8) & 0xffff) / 32768.0f - 1.0f;
  }
}

__global__ void to_half(const float* x, __half* y, size_t n) {
  size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
  for (; i < n; i += (size_t)gridDim.x * blockDim.x) y[i] = __float2half(x[i]);
}

__global__ void to_bf16(const float* x, __nv_bfloat16* y, size_t n) {
  size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
  for (; i < n; i += (size_t)gridDim.x * blockDim.x) y[i] = __float2bfloat16(x[i]);
}

__global__ void copy_kernel(const float4* __restrict__ src, float4* __restrict__ dst, size_t n) {
  size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
  for (; i < n; i += (size_t)gridDim.x * blockDim.x) dst[i] = src[i];
}

__global__ void triad_kernel(float4* __restrict__ a, const float4* __restrict__ b, const float4* __restrict__ c,
                             float s, size_t n) {
  size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
  for (; i < n; i += (size_t)gridDim.x * blockDim.x) {
    float4 x = b[i], y = c[i];
    a[i] = make_float4(x.x + s * y.x, x.y + s * y.y, x.z + s * y.z, x.w + s * y.w);
  }
}

__global__ void count_mismatches(const float* c, const float* ref, size_t n, float tol,
                                 unsigned long long* bad) {
  size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
  unsigned long long mine = 0;
  for (; i < n; i += (size_t)gridDim.x * blockDim.x) mine += fabsf(c[i] - ref[i]) > tol;
  if (mine) atomicAdd(bad, mine);
}

struct Timer {
  cudaEvent_t start, stop;
  Timer() { CUDA_OK(cudaEventCreate(&start)); CUDA_OK(cudaEventCreate(&stop)); }
  ~Timer() { cudaEventDestroy(start); cudaEventDestroy(stop); }
};

template <typename F>
static std::vector<double> time_repeats(F&& op, int warmup, int repeats) {
  for (int i = 0; i < warmup; ++i) op();
  CUDA_OK(cudaDeviceSynchronize());
  Timer t;
  std::vector<double> seconds;
  for (int i = 0; i < repeats; ++i) {
    CUDA_OK(cudaEventRecord(t.start));
    op();
    CUDA_OK(cudaEventRecord(t.stop));
    CUDA_OK(cudaEventSynchronize(t.stop));
    float ms = 0;
    CUDA_OK(cudaEventElapsedTime(&ms, t.start, t.stop));
    seconds.push_back(ms / 1000.0);
  }
  return seconds;
}

static void print_seconds(const std::vector<double>& s, const char* extra = "") {
  std::printf("{\"seconds\": [");
  for (size_t i = 0; i < s.size(); ++i) std::printf("%s%.9g", i ? ", " : "", s[i]);
  std::printf("]%s}\n", extra);
}

static float* random_matrix(size_t count, unsigned seed) {
  float* p = nullptr;
  CUDA_OK(cudaMalloc(&p, count * sizeof(float)));
  fill<<<1024, 256>>>(p, count, seed);
  CUDA_OK(cudaGetLastError());
  return p;
}

static std::vector<double> gemm(const std::string& what, int n, int repeats) {
  cublasHandle_t h;
  CUBLAS_OK(cublasCreate(&h));
  size_t count = (size_t)n * n;
  float* a32 = random_matrix(count, 1);
  float* b32 = random_matrix(count, 2);
  void *a = a32, *b = b32, *c = nullptr;
  cudaDataType_t type = CUDA_R_32F;
  cublasComputeType_t compute = CUBLAS_COMPUTE_32F;
  if (what == "gemm_tf32") compute = CUBLAS_COMPUTE_32F_FAST_TF32;
  if (what == "gemm_fp16" || what == "gemm_bf16") {
    size_t bytes = count * 2;
    CUDA_OK(cudaMalloc(&a, bytes));
    CUDA_OK(cudaMalloc(&b, bytes));
    if (what == "gemm_fp16") {
      type = CUDA_R_16F;
      to_half<<<1024, 256>>>(a32, (__half*)a, count);
      to_half<<<1024, 256>>>(b32, (__half*)b, count);
    } else {
      type = CUDA_R_16BF;
      to_bf16<<<1024, 256>>>(a32, (__nv_bfloat16*)a, count);
      to_bf16<<<1024, 256>>>(b32, (__nv_bfloat16*)b, count);
    }
    CUDA_OK(cudaGetLastError());
  }
  CUDA_OK(cudaMalloc(&c, count * (type == CUDA_R_32F ? 4 : 2)));
  const float one = 1.0f, zero = 0.0f;  // FP32 accumulate for every input type
  auto op = [&] {
    CUBLAS_OK(cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one, a, type, n, b, type, n, &zero, c, type, n,
                           compute, CUBLAS_GEMM_DEFAULT));
  };
  auto seconds = time_repeats(op, 3, repeats);
  cublasDestroy(h);
  return seconds;
}

static std::vector<double> memory(const std::string& what, size_t bytes, int repeats) {
  size_t n4 = bytes / sizeof(float4);
  if (what == "h2d" || what == "d2h") {
    void *host = nullptr, *dev = nullptr;
    CUDA_OK(cudaMallocHost(&host, bytes));  // pinned
    CUDA_OK(cudaMalloc(&dev, bytes));
    std::memset(host, 1, bytes);
    auto op = [&] {
      if (what == "h2d") CUDA_OK(cudaMemcpyAsync(dev, host, bytes, cudaMemcpyHostToDevice));
      else CUDA_OK(cudaMemcpyAsync(host, dev, bytes, cudaMemcpyDeviceToHost));
    };
    return time_repeats(op, 2, repeats);
  }
  float4 *a = nullptr, *b = nullptr, *c = nullptr;
  CUDA_OK(cudaMalloc(&a, n4 * sizeof(float4)));
  CUDA_OK(cudaMalloc(&b, n4 * sizeof(float4)));
  CUDA_OK(cudaMalloc(&c, n4 * sizeof(float4)));
  CUDA_OK(cudaMemset(b, 0, n4 * sizeof(float4)));
  CUDA_OK(cudaMemset(c, 0, n4 * sizeof(float4)));
  CUDA_OK(cudaMemset(a, 0, n4 * sizeof(float4)));
  int sms = 0, device = 0;
  CUDA_OK(cudaGetDevice(&device));
  CUDA_OK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  auto op = [&] {
    if (what == "mem_copy") copy_kernel<<<sms * 8, 256>>>(b, a, n4);
    else triad_kernel<<<sms * 8, 256>>>(a, b, c, 3.0f, n4);
  };
  return time_repeats(op, 2, repeats);
}

static void stress(int n, double seconds_wanted) {
  cublasHandle_t h;
  CUBLAS_OK(cublasCreate(&h));
  CUBLAS_OK(cublasSetMathMode(h, CUBLAS_PEDANTIC_MATH));  // exact FP32: repeats must agree
  size_t count = (size_t)n * n;
  float* a = random_matrix(count, 3);
  float* b = random_matrix(count, 4);
  float *ref = nullptr, *c = nullptr;
  unsigned long long* bad = nullptr;
  CUDA_OK(cudaMalloc(&ref, count * 4));
  CUDA_OK(cudaMalloc(&c, count * 4));
  CUDA_OK(cudaMalloc(&bad, sizeof(*bad)));
  CUDA_OK(cudaMemset(bad, 0, sizeof(*bad)));
  const float one = 1.0f, zero = 0.0f;
  CUBLAS_OK(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one, a, n, b, n, &zero, ref, n));
  // Pedantic FP32 repeats are bitwise identical; the tolerance only absorbs nothing-but-rounding.
  const float tol = 1e-5f * (float)n;
  auto t0 = std::chrono::steady_clock::now();
  long iterations = 0;
  std::vector<double> per_second;
  while (std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() < seconds_wanted) {
    CUBLAS_OK(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one, a, n, b, n, &zero, c, n));
    count_mismatches<<<1024, 256>>>(c, ref, count, tol, bad);
    if (++iterations % 8 == 0) CUDA_OK(cudaDeviceSynchronize());
  }
  CUDA_OK(cudaDeviceSynchronize());
  double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  unsigned long long mismatches = 0;
  CUDA_OK(cudaMemcpy(&mismatches, bad, sizeof(mismatches), cudaMemcpyDeviceToHost));
  char extra[128];
  std::snprintf(extra, sizeof(extra), ", \"iterations\": %ld, \"mismatches\": %llu", iterations, mismatches);
  print_seconds({elapsed}, extra);
  cublasDestroy(h);
}

int main(int argc, char** argv) {
  if (argc != 5) fail("usage: gpuws_bench_kernels WHAT DEVICE SIZE REPEATS");
  std::string what = argv[1];
  int device = std::atoi(argv[2]);
  long long size = std::atoll(argv[3]);
  int repeats = std::atoi(argv[4]);
  if (size <= 0 || repeats <= 0) fail("SIZE and REPEATS must be positive");
  CUDA_OK(cudaSetDevice(device));
  if (what.rfind("gemm_", 0) == 0) print_seconds(gemm(what, (int)size, repeats));
  else if (what == "mem_copy" || what == "mem_triad" || what == "h2d" || what == "d2h")
    print_seconds(memory(what, (size_t)size, repeats));
  else if (what == "stress") stress((int)size, repeats);
  else fail("unknown measurement " + what);
  return 0;
}
