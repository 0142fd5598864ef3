// gpuws benchmark kernels for hosts with the CUDA toolkit (nvcc) but neither PyTorch nor CuPy.
//
// Built by the runner (backends.NvccBackend.build):  nvcc -O3 -std=c++17 -gencode arch=compute_XY,code=[sm_XY,compute_XY]
//                              -o gpuws_bench_kernels bench_kernels.cu -lcublas
// Usage: gpuws_bench_kernels WHAT DEVICE SIZE REPEATS [WINDOW_MS [EXTRA]]
//   WHAT: gemm_fp32 | gemm_tf32 | gemm_fp16 | gemm_bf16 (SIZE = n; REPEATS timed windows of about
//         WINDOW_MS each; EXTRA = the answer tolerance), mem_copy | mem_triad | h2d | d2h (SIZE = bytes per buffer),
//         p2p (SIZE = bytes, EXTRA = destination device), stress (SIZE = n, REPEATS = seconds,
//         EXTRA = fp32 | fp16 | bf16).
// Prints one JSON line: {"seconds": [...], "per_window": k} with the time of each timed window
// (CUDA events, after warmup). Copies add "verify": {"checked_bytes", "bad_bytes"} (the
// destination compared with what was sent); stress adds "iterations", "mismatches" (elements
// differing bit for bit from the first product, plus every non-finite element) and
// "tflops_windows". GEMMs and the stress reference add "answers": the product against float64 on a
// grid of sampled rows and columns over every output tile (verify.answer_check's fields),
// and "checksum": every element by banded Huang-Abraham checksums in float64 (checksum_check's fields).
// `devices` prints {"devices": [{"ordinal", "uuid", "pci_bus_id"}]}: CUDA's numbering, matched to
// nvidia-smi's by UUID. Errors: a message on stderr, {"error": "..."} on stdout, exit status 1.
// Every kernel launch and every CUDA and cuBLAS call is checked: an error is never a figure.
// Medians and figures are computed by the Python harness, the same way for every backend.

#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

[[noreturn]] static void fail(const std::string& what) {
  // stderr is what the runner reports when the exit status is not 0; stdout keeps the JSON form.
  std::fprintf(stderr, "%s\n", what.c_str());
  std::string safe;
  for (char ch : what) safe += (ch == '"' || ch == '\\' || (unsigned char)ch < 0x20) ? ' ' : ch;
  std::printf("{\"error\": \"%s\"}\n", safe.c_str());
  std::fflush(stdout);
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
// After every <<<...>>> launch: a launch that failed must not read as "0 mismatches".
#define KERNEL_OK(what) CUDA_OK(cudaGetLastError())

__global__ void fill(float* x, size_t n, unsigned seed) {
  size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
  for (; i < n; i += (size_t)gridDim.x * blockDim.x) {
    unsigned h = (unsigned)i * 2654435761u ^ seed;
    x[i] = ((h >> 8) & 0xffff) / 32768.0f - 1.0f;
  }
}

__global__ void fill_value(float* x, size_t n, float v) {
  size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
  for (; i < n; i += (size_t)gridDim.x * blockDim.x) x[i] = v;
}

// The byte pattern every copy carries: byte i is i % 251 (no stale buffer holds it by chance).
__global__ void fill_pattern(unsigned char* x, size_t n) {
  size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
  for (; i < n; i += (size_t)gridDim.x * blockDim.x) x[i] = (unsigned char)(i % 251);
}

__global__ void count_pattern_errors(const unsigned char* x, size_t n, unsigned long long* bad) {
  size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
  unsigned long long mine = 0;
  for (; i < n; i += (size_t)gridDim.x * blockDim.x) mine += x[i] != (unsigned char)(i % 251);
  if (mine) atomicAdd(bad, mine);
}

__global__ void count_value_errors(const float* x, size_t n, float v, unsigned long long* bad) {
  size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
  unsigned long long mine = 0;
  for (; i < n; i += (size_t)gridDim.x * blockDim.x) mine += !(x[i] == v);  // NaN counts
  if (mine) atomicAdd(bad, mine);
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

// Elements of `c` that differ bit for bit from `ref`, plus every non-finite element of `c`
// (exponent all ones): a NaN is never a match, not even with a NaN at the same place.
template <typename W>
__global__ void count_mismatches(const W* c, const W* ref, size_t n, W exp_mask, unsigned long long* bad) {
  size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
  unsigned long long mine = 0;
  for (; i < n; i += (size_t)gridDim.x * blockDim.x) {
    mine += c[i] != ref[i];
    mine += (c[i] & exp_mask) == exp_mask;
  }
  if (mine) atomicAdd(bad, mine);
}

template <typename W>
__global__ void count_nonfinite(const W* c, size_t n, W exp_mask, unsigned long long* bad) {
  size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
  unsigned long long mine = 0;
  for (; i < n; i += (size_t)gridDim.x * blockDim.x) mine += (c[i] & exp_mask) == exp_mask;
  if (mine) atomicAdd(bad, mine);
}

// The rows (or columns) checked: 2 in every 128-wide band, as verify.gemm_samples picks them.
static std::vector<int> samples(int n) {
  std::vector<int> picks;
  const int tile = 128, per = 2;
  for (int start = 0; start < n; start += tile) {
    int width = std::min(tile, n - start);
    for (int k = 0; k < per; ++k) {
      int v = start + (start / tile * 37 + k * (width / per + 13)) % width;
      if (std::find(picks.begin(), picks.end(), v) == picks.end()) picks.push_back(v);
    }
  }
  return picks;
}

__device__ inline double wide(float x) { return x; }
__device__ inline double wide(__half x) { return __half2float(x); }
__device__ inline double wide(__nv_bfloat16 x) { return __bfloat162float(x); }

// Column-major n x n (cuBLAS): element (i, j) at i + j * n. One thread per sampled element.
template <typename T>
__global__ void sampled_product(const T* a, const T* b, const T* c, int n, const int* rows, const int* cols,
                                int nr, int nc, double* ref, double* got) {
  int idx = blockIdx.x * blockDim.x + threadIdx.x;
  if (idx >= nr * nc) return;
  int i = rows[idx / nc], j = cols[idx % nc];
  double s = 0.0;
  for (int k = 0; k < n; ++k) s += wide(a[i + (size_t)k * n]) * wide(b[k + (size_t)j * n]);
  ref[idx] = s;
  got[idx] = wide(c[i + (size_t)j * n]);
}

// ", \"answers\": {...}": c = a * b checked on the sampled grid; an element is wrong when it is off by
// more than `tol` times the largest reference element of its row, or not finite.
template <typename T>
static std::string answers_json(const void* a, const void* b, const void* c, int n, double tol) {
  std::vector<int> rows = samples(n), cols = samples(n);
  int nr = (int)rows.size(), nc = (int)cols.size();
  int *drows = nullptr, *dcols = nullptr;
  double *dref = nullptr, *dgot = nullptr;
  CUDA_OK(cudaMalloc(&drows, nr * sizeof(int)));
  CUDA_OK(cudaMalloc(&dcols, nc * sizeof(int)));
  CUDA_OK(cudaMalloc(&dref, (size_t)nr * nc * sizeof(double)));
  CUDA_OK(cudaMalloc(&dgot, (size_t)nr * nc * sizeof(double)));
  CUDA_OK(cudaMemcpy(drows, rows.data(), nr * sizeof(int), cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemcpy(dcols, cols.data(), nc * sizeof(int), cudaMemcpyHostToDevice));
  sampled_product<T><<<(nr * nc + 255) / 256, 256>>>((const T*)a, (const T*)b, (const T*)c, n, drows, dcols, nr, nc,
                                                     dref, dgot);
  KERNEL_OK("sampled_product");
  std::vector<double> ref((size_t)nr * nc), got((size_t)nr * nc);
  CUDA_OK(cudaMemcpy(ref.data(), dref, ref.size() * sizeof(double), cudaMemcpyDeviceToHost));
  CUDA_OK(cudaMemcpy(got.data(), dgot, got.size() * sizeof(double), cudaMemcpyDeviceToHost));
  CUDA_OK(cudaFree(drows));
  CUDA_OK(cudaFree(dcols));
  CUDA_OK(cudaFree(dref));
  CUDA_OK(cudaFree(dgot));
  long wrong = 0, nonfinite = 0;
  double worst = 0.0;
  int first_r = -1, first_c = -1;
  for (int r = 0; r < nr; ++r) {
    double scale = 0.0;
    for (int k = 0; k < nc; ++k) scale = std::max(scale, std::fabs(ref[(size_t)r * nc + k]));
    if (scale == 0.0) scale = 1.0;
    for (int k = 0; k < nc; ++k) {
      double have = got[(size_t)r * nc + k], rel;
      bool bad;
      if (!std::isfinite(have)) {
        ++nonfinite;
        bad = true;
        rel = 1e308;
      } else {
        rel = std::fabs(have - ref[(size_t)r * nc + k]) / scale;
        bad = !(rel <= tol);
      }
      worst = std::max(worst, rel);
      if (bad) {
        ++wrong;
        if (first_r < 0) first_r = rows[r], first_c = cols[k];
      }
    }
  }
  char buf[512];
  std::snprintf(buf, sizeof(buf), ", \"answers\": {\"checked\": %ld, \"wrong\": %ld, \"nonfinite\": %ld, "
                "\"max_rel_error\": %.6g, \"tolerance\": %.6g, \"rows\": %d, \"cols\": %d, \"first_wrong\": ",
                (long)nr * nc, wrong, nonfinite, worst, tol, nr, nc);
  std::string out = buf;
  if (first_r < 0) {
    out += "null}";
  } else {
    std::snprintf(buf, sizeof(buf), "[%d, %d]}", first_r, first_c);
    out += buf;
  }
  return out;
}

// Every element of c = a * b by banded Huang-Abraham checksums in float64 (verify.py's
// checksum_check, the same bands, tolerance and fields): per CHECKSUM_BAND-row band and column, the
// band's sum of c against (e_band^T a) b; per row and CHECKSUM_BAND-column band, c's sum against
// a (b e_band), with cuBLAS in double precision.
static const int CHECKSUM_BAND = 32;
static const double CHECKSUM_LAMBDA = 8.0;

template <typename T>
__global__ void widen_and_square(const T* x, double* wide_x, double* square_x, size_t n) {
  size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
  for (; i < n; i += (size_t)gridDim.x * blockDim.x) {
    double v = wide(x[i]);
    wide_x[i] = v;
    square_x[i] = v * v;
  }
}

// n x bands, column-major: column b sums band b.
__global__ void band_matrix(double* e, int n, int bands) {
  size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
  for (; i < (size_t)n * bands; i += (size_t)gridDim.x * blockDim.x) {
    int row = (int)(i % n), col = (int)(i / n);
    e[i] = row / CHECKSUM_BAND == col ? 1.0 : 0.0;
  }
}

// One side's sums (`rows` x `cols`, column-major): count the wrong ones, the worst share of its
// tolerance (as the bits of a non-negative double, which order as the doubles do) and the first
// wrong one as a row-major key (row * cols + col), as the Python side orders them.
__global__ void compare_sums(const double* got, const double* want, const double* out2, const double* terms2,
                             int rows, int cols, double u_out, double rho2, unsigned long long* wrong,
                             unsigned long long* worst, unsigned long long* first) {
  size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
  for (; i < (size_t)rows * cols; i += (size_t)gridDim.x * blockDim.x) {
    double tol = CHECKSUM_LAMBDA * sqrt(u_out * u_out * out2[i] + rho2 * terms2[i]);
    double err = fabs(got[i] - want[i]);
    double share = err / (tol + 1e-300);
    if (isfinite(share)) atomicMax(worst, (unsigned long long)__double_as_longlong(share));
    if (!(err <= tol)) {  // a NaN or infinity is never within tolerance
      atomicAdd(wrong, 1ULL);
      unsigned long long key = (unsigned long long)(i % rows) * cols + i / rows;
      atomicMin(first, key);
    }
  }
}

__global__ void count_nonfinite_wide(const double* x, size_t n, unsigned long long* bad) {
  size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
  unsigned long long mine = 0;
  for (; i < n; i += (size_t)gridDim.x * blockDim.x) mine += !isfinite(x[i]);
  if (mine) atomicAdd(bad, mine);
}

// ", \"checksum\": {...}" for c = a * b (n x n, column-major) in format `fmt` (CHECKSUM_ROUNDOFF).
template <typename T>
static std::string checksum_json(cublasHandle_t h, const void* a, const void* b, const void* c, int n,
                                 const std::string& fmt) {
  double u_in = 0.0, u_acc = std::ldexp(1.0, -24), u_out = std::ldexp(1.0, -24);
  if (fmt == "tf32") u_in = std::ldexp(1.0, -8);
  if (fmt == "fp16") u_out = std::ldexp(1.0, -11);
  if (fmt == "bf16") u_out = std::ldexp(1.0, -8);
  double g64 = (n + CHECKSUM_BAND) * std::ldexp(1.0, -53) * std::sqrt((double)CHECKSUM_BAND * n);
  double rho2 = n * u_acc * u_acc + 4.0 * u_in * u_in + u_out * u_out + g64 * g64;
  size_t count = (size_t)n * n;
  int bands = (n + CHECKSUM_BAND - 1) / CHECKSUM_BAND;
  size_t side = (size_t)n * bands;
  double* m[6];  // a, b, c and their squares, in float64
  for (double*& p : m) CUDA_OK(cudaMalloc(&p, count * sizeof(double)));
  double *e = nullptr, *work = nullptr;
  CUDA_OK(cudaMalloc(&e, side * sizeof(double)));
  CUDA_OK(cudaMalloc(&work, 6 * side * sizeof(double)));
  widen_and_square<T><<<1024, 256>>>((const T*)a, m[0], m[3], count);
  KERNEL_OK("widen_and_square");
  widen_and_square<T><<<1024, 256>>>((const T*)b, m[1], m[4], count);
  KERNEL_OK("widen_and_square");
  widen_and_square<T><<<1024, 256>>>((const T*)c, m[2], m[5], count);
  KERNEL_OK("widen_and_square");
  band_matrix<<<1024, 256>>>(e, n, bands);
  KERNEL_OK("band_matrix");
  unsigned long long* counters = nullptr;  // wrong, worst, first, non-finite
  CUDA_OK(cudaMalloc(&counters, 4 * sizeof(unsigned long long)));
  unsigned long long init[4] = {0, 0, ~0ULL, 0};
  CUDA_OK(cudaMemcpy(counters, init, sizeof(init), cudaMemcpyHostToDevice));
  count_nonfinite_wide<<<1024, 256>>>(m[2], count, counters + 3);
  KERNEL_OK("count_nonfinite_wide");
  const double one = 1.0, zero = 0.0;
  double *got = work, *want = work + side, *out2 = work + 2 * side, *terms2 = work + 3 * side,
         *tmp = work + 4 * side, *tmp2 = work + 5 * side;
  long long first_key[2] = {-1, -1};
  unsigned long long total_wrong = 0;
  for (int s = 0; s < 2; ++s) {
    if (s == 0) {  // column sums per band of rows: bands x n
      CUBLAS_OK(cublasDgemm(h, CUBLAS_OP_T, CUBLAS_OP_N, bands, n, n, &one, e, n, m[2], n, &zero, got, bands));
      CUBLAS_OK(cublasDgemm(h, CUBLAS_OP_T, CUBLAS_OP_N, bands, n, n, &one, e, n, m[0], n, &zero, tmp, bands));
      CUBLAS_OK(cublasDgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, bands, n, n, &one, tmp, bands, m[1], n, &zero, want, bands));
      CUBLAS_OK(cublasDgemm(h, CUBLAS_OP_T, CUBLAS_OP_N, bands, n, n, &one, e, n, m[5], n, &zero, out2, bands));
      CUBLAS_OK(cublasDgemm(h, CUBLAS_OP_T, CUBLAS_OP_N, bands, n, n, &one, e, n, m[3], n, &zero, tmp2, bands));
      CUBLAS_OK(cublasDgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, bands, n, n, &one, tmp2, bands, m[4], n, &zero, terms2,
                            bands));
    } else {  // row sums per band of columns: n x bands
      CUBLAS_OK(cublasDgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, n, bands, n, &one, m[2], n, e, n, &zero, got, n));
      CUBLAS_OK(cublasDgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, n, bands, n, &one, m[1], n, e, n, &zero, tmp, n));
      CUBLAS_OK(cublasDgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, n, bands, n, &one, m[0], n, tmp, n, &zero, want, n));
      CUBLAS_OK(cublasDgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, n, bands, n, &one, m[5], n, e, n, &zero, out2, n));
      CUBLAS_OK(cublasDgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, n, bands, n, &one, m[4], n, e, n, &zero, tmp2, n));
      CUBLAS_OK(cublasDgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, n, bands, n, &one, m[3], n, tmp2, n, &zero, terms2, n));
    }
    int rows = s == 0 ? bands : n, cols = s == 0 ? n : bands;
    unsigned long long reset[2] = {0, ~0ULL};  // wrong and first, per side
    CUDA_OK(cudaMemcpy(counters, reset, sizeof(unsigned long long), cudaMemcpyHostToDevice));
    CUDA_OK(cudaMemcpy(counters + 2, reset + 1, sizeof(unsigned long long), cudaMemcpyHostToDevice));
    compare_sums<<<1024, 256>>>(got, want, out2, terms2, rows, cols, u_out, rho2, counters, counters + 1,
                                counters + 2);
    KERNEL_OK("compare_sums");
    unsigned long long seen[4];
    CUDA_OK(cudaMemcpy(seen, counters, sizeof(seen), cudaMemcpyDeviceToHost));
    total_wrong += seen[0];
    if (seen[0]) {
      // Column sums name the column, row sums the row; the band's first row (column) otherwise.
      long long r = (long long)(seen[2] / cols), k = (long long)(seen[2] % cols);
      if (s == 0) {
        first_key[1] = k;
        if (first_key[0] < 0) first_key[0] = r * CHECKSUM_BAND;
      } else {
        first_key[0] = r;
        if (first_key[1] < 0) first_key[1] = k * CHECKSUM_BAND;
      }
    }
  }
  unsigned long long seen[4];
  CUDA_OK(cudaMemcpy(seen, counters, sizeof(seen), cudaMemcpyDeviceToHost));
  double worst = 0.0;
  std::memcpy(&worst, &seen[1], sizeof(worst));
  for (double* p : m) CUDA_OK(cudaFree(p));
  CUDA_OK(cudaFree(e));
  CUDA_OK(cudaFree(work));
  CUDA_OK(cudaFree(counters));
  char buf[768];
  std::snprintf(buf, sizeof(buf),
                ", \"checksum\": {\"method\": \"huang-abraham\", \"band\": %d, \"elements\": %zu, \"sums\": %zu, "
                "\"wrong\": %llu, \"nonfinite\": %llu, \"max_share_of_tolerance\": %.6g, \"lambda\": %g, "
                "\"unit_roundoff\": {\"in\": %.9g, \"accumulate\": %.9g, \"out\": %.9g}, \"first_wrong\": ",
                CHECKSUM_BAND, count, 2 * side, total_wrong, seen[3], worst, CHECKSUM_LAMBDA, u_in, u_acc, u_out);
  std::string out = buf;
  if (total_wrong || seen[3]) {
    std::snprintf(buf, sizeof(buf), "[%lld, %lld]}", first_key[0], first_key[1]);
    out += buf;
  } else {
    out += "null}";
  }
  return out;
}

static void devices() {
  int count = 0;
  cudaError_t found = cudaGetDeviceCount(&count);
  if (found == cudaErrorNoDevice) {
    count = 0;  // CUDA sees none of the GPUs nvidia-smi lists: an empty list, not an error
    (void)cudaGetLastError();
  } else {
    CUDA_OK(found);
  }
  std::string out = "{\"seconds\": [0], \"devices\": [";
  for (int d = 0; d < count; ++d) {
    cudaDeviceProp p;
    CUDA_OK(cudaGetDeviceProperties(&p, d));
    char uuid[40], bus[32];
    const unsigned char* u = (const unsigned char*)p.uuid.bytes;
    std::snprintf(uuid, sizeof(uuid), "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", u[0],
                  u[1], u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13], u[14], u[15]);
    std::snprintf(bus, sizeof(bus), "%08x:%02x:%02x.0", p.pciDomainID, p.pciBusID, p.pciDeviceID);
    out += std::string(d ? ", " : "") + "{\"ordinal\": " + std::to_string(d) + ", \"uuid\": \"" + uuid +
           "\", \"pci_bus_id\": \"" + bus + "\", \"compute_capability\": \"" + std::to_string(p.major) + "." +
           std::to_string(p.minor) + "\"}";
  }
  std::printf("%s]}\n", out.c_str());
}

struct Timer {
  cudaEvent_t start, stop;
  Timer() { CUDA_OK(cudaEventCreate(&start)); CUDA_OK(cudaEventCreate(&stop)); }
  ~Timer() { cudaEventDestroy(start); cudaEventDestroy(stop); }
};

static int g_per_window = 1;

// Warm-up of at least `warmup` calls and 200 ms, then `repeats` timed windows of `per` calls each;
// `per` sized from one timed call so that a window lasts about `window_ms`, at least 10 ms
// (timing.MIN_WARMUP_S and MIN_WINDOW_S).
template <typename F>
static std::vector<double> time_windows(F&& op, int warmup, int repeats, int window_ms) {
  auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < warmup || std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() < 0.2;
       ++i) {
    op();
    CUDA_OK(cudaDeviceSynchronize());
  }
  if (window_ms < 10) window_ms = 10;
  Timer t;
  int per = 1;
  {
    CUDA_OK(cudaEventRecord(t.start));
    op();
    CUDA_OK(cudaEventRecord(t.stop));
    CUDA_OK(cudaEventSynchronize(t.stop));
    float ms = 0;
    CUDA_OK(cudaEventElapsedTime(&ms, t.start, t.stop));
    per = ms > 0 ? (int)std::ceil(window_ms / ms) : 1;
    per = per < 1 ? 1 : per > 1000 ? 1000 : per;
  }
  g_per_window = per;
  std::vector<double> seconds;
  for (int i = 0; i < repeats; ++i) {
    CUDA_OK(cudaEventRecord(t.start));
    for (int k = 0; k < per; ++k) op();
    CUDA_OK(cudaEventRecord(t.stop));
    CUDA_OK(cudaEventSynchronize(t.stop));
    float ms = 0;
    CUDA_OK(cudaEventElapsedTime(&ms, t.start, t.stop));
    seconds.push_back(ms / 1000.0);
  }
  return seconds;
}

static void print_seconds(const std::vector<double>& s, const std::string& extra = "") {
  std::printf("{\"seconds\": [");
  for (size_t i = 0; i < s.size(); ++i) std::printf("%s%.9g", i ? ", " : "", s[i]);
  std::printf("], \"per_window\": %d%s}\n", g_per_window, extra.c_str());
}

static std::string verify_json(size_t checked, unsigned long long bad) {
  char text[160];
  std::snprintf(text, sizeof(text), ", \"verify\": {\"checked_bytes\": %zu, \"bad_bytes\": %llu}", checked, bad);
  return text;
}

static unsigned long long* device_counter() {
  unsigned long long* bad = nullptr;
  CUDA_OK(cudaMalloc(&bad, sizeof(*bad)));
  CUDA_OK(cudaMemset(bad, 0, sizeof(*bad)));
  return bad;
}

static unsigned long long read_counter(unsigned long long* bad) {
  unsigned long long value = 0;
  CUDA_OK(cudaDeviceSynchronize());
  CUDA_OK(cudaMemcpy(&value, bad, sizeof(value), cudaMemcpyDeviceToHost));
  CUDA_OK(cudaFree(bad));
  return value;
}

static float* random_matrix(size_t count, unsigned seed) {
  float* p = nullptr;
  CUDA_OK(cudaMalloc(&p, count * sizeof(float)));
  fill<<<1024, 256>>>(p, count, seed);
  KERNEL_OK("fill");
  return p;
}

// FP32 inputs converted to the asked type; returns the element type.
static cudaDataType_t matrices(const std::string& dtype, size_t count, void** a, void** b) {
  float* a32 = random_matrix(count, 1);
  float* b32 = random_matrix(count, 2);
  if (dtype == "fp32") {
    *a = a32;
    *b = b32;
    return CUDA_R_32F;
  }
  CUDA_OK(cudaMalloc(a, count * 2));
  CUDA_OK(cudaMalloc(b, count * 2));
  if (dtype == "fp16") {
    to_half<<<1024, 256>>>(a32, (__half*)*a, count);
    KERNEL_OK("to_half");
    to_half<<<1024, 256>>>(b32, (__half*)*b, count);
    KERNEL_OK("to_half");
  } else {
    to_bf16<<<1024, 256>>>(a32, (__nv_bfloat16*)*a, count);
    KERNEL_OK("to_bf16");
    to_bf16<<<1024, 256>>>(b32, (__nv_bfloat16*)*b, count);
    KERNEL_OK("to_bf16");
  }
  CUDA_OK(cudaDeviceSynchronize());
  CUDA_OK(cudaFree(a32));
  CUDA_OK(cudaFree(b32));
  return dtype == "fp16" ? CUDA_R_16F : CUDA_R_16BF;
}

static void gemm(const std::string& what, int n, int repeats, int window_ms, double tol) {
  cublasHandle_t h;
  CUBLAS_OK(cublasCreate(&h));
  // FP32 stays FP32: no TF32 or reduced-precision shortcuts behind the fp32 figure.
  if (what == "gemm_fp32") CUBLAS_OK(cublasSetMathMode(h, CUBLAS_PEDANTIC_MATH));
  size_t count = (size_t)n * n;
  std::string dtype = what == "gemm_fp16" ? "fp16" : what == "gemm_bf16" ? "bf16" : "fp32";
  void *a = nullptr, *b = nullptr, *c = nullptr;
  cudaDataType_t type = matrices(dtype, count, &a, &b);
  cublasComputeType_t compute = what == "gemm_tf32" ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
  CUDA_OK(cudaMalloc(&c, count * (type == CUDA_R_32F ? 4 : 2)));
  const float one = 1.0f, zero = 0.0f;  // FP32 accumulate for every input type
  auto op = [&] {
    CUBLAS_OK(cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one, a, type, n, b, type, n, &zero, c, type, n,
                           compute, CUBLAS_GEMM_DEFAULT));
  };
  auto seconds = time_windows(op, 3, repeats, window_ms);
  CUDA_OK(cudaDeviceSynchronize());
  std::string answers = dtype == "fp32"   ? answers_json<float>(a, b, c, n, tol)
                        : dtype == "fp16" ? answers_json<__half>(a, b, c, n, tol)
                                          : answers_json<__nv_bfloat16>(a, b, c, n, tol);
  std::string fmt = what.substr(5);  // gemm_tf32 -> tf32: its inputs' rounding is TF32's
  answers += dtype == "fp32"   ? checksum_json<float>(h, a, b, c, n, fmt)
             : dtype == "fp16" ? checksum_json<__half>(h, a, b, c, n, fmt)
                               : checksum_json<__nv_bfloat16>(h, a, b, c, n, fmt);
  CUBLAS_OK(cublasDestroy(h));
  print_seconds(seconds, answers);
}

static void memory(const std::string& what, size_t bytes, int repeats) {
  unsigned long long* bad = device_counter();
  if (what == "h2d" || what == "d2h") {
    unsigned char *host = nullptr, *dev = nullptr;
    CUDA_OK(cudaMallocHost(&host, bytes));  // pinned
    CUDA_OK(cudaMalloc(&dev, bytes));
    if (what == "h2d") {
      for (size_t i = 0; i < bytes; ++i) host[i] = (unsigned char)(i % 251);
      CUDA_OK(cudaMemset(dev, 0, bytes));
    } else {
      std::memset(host, 0, bytes);
      fill_pattern<<<1024, 256>>>(dev, bytes);
      KERNEL_OK("fill_pattern");
    }
    auto op = [&] {
      if (what == "h2d") CUDA_OK(cudaMemcpyAsync(dev, host, bytes, cudaMemcpyHostToDevice));
      else CUDA_OK(cudaMemcpyAsync(host, dev, bytes, cudaMemcpyDeviceToHost));
    };
    auto seconds = time_windows(op, 2, repeats, 0);
    CUDA_OK(cudaDeviceSynchronize());
    unsigned long long wrong = 0;
    if (what == "h2d") {
      count_pattern_errors<<<1024, 256>>>(dev, bytes, bad);
      KERNEL_OK("count_pattern_errors");
      wrong = read_counter(bad);
    } else {
      for (size_t i = 0; i < bytes; ++i) wrong += host[i] != (unsigned char)(i % 251);
      CUDA_OK(cudaFree(bad));
    }
    print_seconds(seconds, verify_json(bytes, wrong));
    return;
  }
  size_t n4 = bytes / sizeof(float4);
  float4 *a = nullptr, *b = nullptr, *c = nullptr;
  CUDA_OK(cudaMalloc(&a, n4 * sizeof(float4)));
  CUDA_OK(cudaMalloc(&b, n4 * sizeof(float4)));
  CUDA_OK(cudaMalloc(&c, n4 * sizeof(float4)));
  CUDA_OK(cudaMemset(a, 0, n4 * sizeof(float4)));
  if (what == "mem_copy") {
    fill_pattern<<<1024, 256>>>((unsigned char*)b, n4 * sizeof(float4));
    KERNEL_OK("fill_pattern");
  } else {
    fill_value<<<1024, 256>>>((float*)b, n4 * 4, 1.0f);
    KERNEL_OK("fill_value");
    fill_value<<<1024, 256>>>((float*)c, n4 * 4, 1.0f);
    KERNEL_OK("fill_value");
  }
  int sms = 0, device = 0;
  CUDA_OK(cudaGetDevice(&device));
  CUDA_OK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  auto op = [&] {
    if (what == "mem_copy") copy_kernel<<<sms * 8, 256>>>(b, a, n4);
    else triad_kernel<<<sms * 8, 256>>>(a, b, c, 3.0f, n4);
    KERNEL_OK(what);
  };
  auto seconds = time_windows(op, 2, repeats, 0);
  if (what == "mem_copy") count_pattern_errors<<<1024, 256>>>((unsigned char*)a, n4 * sizeof(float4), bad);
  else count_value_errors<<<1024, 256>>>((float*)a, n4 * 4, 4.0f, bad);  // 1 + 3 * 1, exact
  KERNEL_OK("verify");
  unsigned long long wrong = read_counter(bad);
  // The triad counts wrong floats: as bytes, each is four.
  print_seconds(seconds, verify_json(n4 * sizeof(float4), what == "mem_copy" ? wrong : wrong * 4));
}

static void p2p(int src, int dst, size_t bytes, int repeats) {
  int can = 0;
  CUDA_OK(cudaDeviceCanAccessPeer(&can, src, dst));
  unsigned char *a = nullptr, *b = nullptr;
  CUDA_OK(cudaSetDevice(dst));
  CUDA_OK(cudaMalloc(&b, bytes));
  CUDA_OK(cudaMemset(b, 0, bytes));
  CUDA_OK(cudaSetDevice(src));
  if (can) {
    cudaError_t err = cudaDeviceEnablePeerAccess(dst, 0);
    if (err == cudaErrorPeerAccessAlreadyEnabled) (void)cudaGetLastError();  // clear the sticky state
    else CUDA_OK(err);
  }
  CUDA_OK(cudaMalloc(&a, bytes));
  fill_pattern<<<1024, 256>>>(a, bytes);
  KERNEL_OK("fill_pattern");
  // Queued on the source device's stream and timed with its events: no launch overhead counted.
  auto op = [&] { CUDA_OK(cudaMemcpyPeerAsync(b, dst, a, src, bytes, 0)); };
  auto seconds = time_windows(op, 2, repeats, 0);
  CUDA_OK(cudaDeviceSynchronize());
  CUDA_OK(cudaSetDevice(dst));
  unsigned long long* bad = device_counter();
  count_pattern_errors<<<1024, 256>>>(b, bytes, bad);
  KERNEL_OK("count_pattern_errors");
  unsigned long long wrong = read_counter(bad);
  print_seconds(seconds, verify_json(bytes, wrong) + (can ? ", \"peer_access\": true" : ", \"peer_access\": false"));
}

template <typename W, typename T>
static void stress_typed(cublasHandle_t h, const std::string& dtype, int n, double seconds_wanted, W exp_mask) {
  size_t count = (size_t)n * n;
  void *a = nullptr, *b = nullptr;
  cudaDataType_t type = matrices(dtype, count, &a, &b);
  W *ref = nullptr, *c = nullptr;
  CUDA_OK(cudaMalloc(&ref, count * sizeof(W)));
  CUDA_OK(cudaMalloc(&c, count * sizeof(W)));
  unsigned long long* bad = device_counter();
  const float one = 1.0f, zero = 0.0f;
  // Tensor cores at the card's best format, FP32 accumulate: power reaches the limit. The same
  // product on the same card with the same algorithm is deterministic, so every repeat must
  // equal the first bit for bit.
  auto gemm_into = [&](W* out) {
    CUBLAS_OK(cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one, a, type, n, b, type, n, &zero, out, type, n,
                           CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
  };
  gemm_into(ref);
  count_nonfinite<W><<<1024, 256>>>(ref, count, exp_mask, bad);
  KERNEL_OK("count_nonfinite");
  CUDA_OK(cudaDeviceSynchronize());
  // The first product against float64: a unit wrong the same way every time matches itself below.
  std::string answers = answers_json<T>(a, b, ref, n, dtype == "fp32" ? 2e-5 : 1e-2);  // STRESS_TOLERANCE
  // Every element of the first product too: an element wrong the same way in every product
  // matches itself bit for bit below.
  answers += checksum_json<T>(h, a, b, ref, n, dtype);
  Timer t;
  auto t0 = std::chrono::steady_clock::now();
  long iterations = 0;
  int per = 2;
  std::vector<double> tflops;
  while (std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() < seconds_wanted) {
    CUDA_OK(cudaEventRecord(t.start));
    for (int k = 0; k < per; ++k) {
      gemm_into(c);
      count_mismatches<W><<<1024, 256>>>(c, ref, count, exp_mask, bad);
      KERNEL_OK("count_mismatches");
    }
    CUDA_OK(cudaEventRecord(t.stop));
    CUDA_OK(cudaEventSynchronize(t.stop));
    float ms = 0;
    CUDA_OK(cudaEventElapsedTime(&ms, t.start, t.stop));
    iterations += per;
    if (ms > 0) {
      tflops.push_back(per * 2.0 * n * (double)n * n / (ms / 1000.0) / 1e12);
      int next = (int)std::lround(per * 500.0 / ms);  // about half a second per window
      per = next < 1 ? 1 : next > 10000 ? 10000 : next;
    }
  }
  CUDA_OK(cudaDeviceSynchronize());
  double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  unsigned long long mismatches = read_counter(bad);
  std::string extra = ", \"iterations\": " + std::to_string(iterations) + ", \"mismatches\": " +
                      std::to_string(mismatches) + ", \"dtype\": \"" + dtype + "\", \"tflops_windows\": [";
  for (size_t i = 0; i < tflops.size(); ++i) {
    char num[32];
    std::snprintf(num, sizeof(num), "%s%.6g", i ? ", " : "", tflops[i]);
    extra += num;
  }
  extra += "]" + answers;
  print_seconds({elapsed}, extra);
}

static void stress(int n, double seconds_wanted, const std::string& dtype) {
  cublasHandle_t h;
  CUBLAS_OK(cublasCreate(&h));
  if (dtype == "fp32") {
    CUBLAS_OK(cublasSetMathMode(h, CUBLAS_PEDANTIC_MATH));  // FP32 stays FP32 (no TF32)
    stress_typed<uint32_t, float>(h, dtype, n, seconds_wanted, 0x7f800000u);
  } else if (dtype == "fp16") {
    stress_typed<uint16_t, __half>(h, dtype, n, seconds_wanted, (uint16_t)0x7c00);
  } else if (dtype == "bf16") {
    stress_typed<uint16_t, __nv_bfloat16>(h, dtype, n, seconds_wanted, (uint16_t)0x7f80);
  } else {
    fail("unknown stress type " + dtype);
  }
  CUBLAS_OK(cublasDestroy(h));
}

int main(int argc, char** argv) {
  if (argc == 2 && std::string(argv[1]) == "devices") {
    devices();
    return 0;
  }
  if (argc < 5 || argc > 7) fail("usage: gpuws_bench_kernels WHAT DEVICE SIZE REPEATS [WINDOW_MS [EXTRA]]");
  std::string what = argv[1];
  int device = std::atoi(argv[2]);
  long long size = std::atoll(argv[3]);
  int repeats = std::atoi(argv[4]);
  int window_ms = argc > 5 ? std::atoi(argv[5]) : 0;
  std::string extra = argc > 6 ? argv[6] : "";
  if (size <= 0 || repeats <= 0 || window_ms < 0) fail("SIZE and REPEATS must be positive");
  CUDA_OK(cudaSetDevice(device));
  if (what.rfind("gemm_", 0) == 0)
    gemm(what, (int)size, repeats, window_ms, extra.empty() ? 1e-2 : std::atof(extra.c_str()));
  else if (what == "mem_copy" || what == "mem_triad" || what == "h2d" || what == "d2h")
    memory(what, (size_t)size, repeats);
  else if (what == "p2p") {
    if (extra.empty()) fail("p2p needs the destination device");
    p2p(device, std::atoi(extra.c_str()), (size_t)size, repeats);
  } else if (what == "stress") stress((int)size, repeats, extra.empty() ? "fp32" : extra);
  else fail("unknown measurement " + what);
  return 0;
}
