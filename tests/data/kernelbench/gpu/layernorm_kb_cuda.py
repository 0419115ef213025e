# kgate test candidate (KernelBench ModelNew, CUDA through load_inline), written for kgate's GPU tests
# (tests/gpu/kernelbench35.sh): an honest layer normalisation for KernelBench's level-1 40_LayerNorm
# (nn.LayerNorm over the last dims; its weight and bias as the Model's, bound by name): Welford
# partials per chunk of each row, merged per row, then the outputs, in three kernels on torch's
# current stream. kgate's large-mean inputs find a one-pass variance; this one is stable.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_src = r"""
#include <c10/cuda/CUDAStream.h>

// Welford's (count, mean, M2), merged as Chan et al. do: stable at any mean (a one-pass
// E[x^2] - E[x]^2 is not, and kgate's large-mean inputs find it)
struct W { float n, mean, m2; };

__device__ __forceinline__ W wmerge(W a, W b) {
    if (b.n == 0.f) return a;
    if (a.n == 0.f) return b;
    float n = a.n + b.n, d = b.mean - a.mean;
    W r;
    r.n = n;
    r.mean = a.mean + d * (b.n / n);
    r.m2 = a.m2 + b.m2 + d * d * (a.n * b.n / n);
    return r;
}

// block (chunk, row): the chunk's Welford triple into part[row][chunk]
__global__ void ln_partial(const float *__restrict__ x, float *__restrict__ part, long long L, long long chunk,
                           int nchunks) {
    long long row = blockIdx.y, c0 = (long long)blockIdx.x * chunk;
    long long c1 = c0 + chunk < L ? c0 + chunk : L;
    const float *xr = x + row * L;
    W w = {0.f, 0.f, 0.f};
    for (long long i = c0 + threadIdx.x; i < c1; i += blockDim.x) {
        float v = xr[i];
        w.n += 1.f;
        float d = v - w.mean;
        w.mean += d / w.n;
        w.m2 += d * (v - w.mean);
    }
    __shared__ float sn[256], smean[256], sm2[256];
    sn[threadIdx.x] = w.n;
    smean[threadIdx.x] = w.mean;
    sm2[threadIdx.x] = w.m2;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) {
            W a = {sn[threadIdx.x], smean[threadIdx.x], sm2[threadIdx.x]};
            W b = {sn[threadIdx.x + s], smean[threadIdx.x + s], sm2[threadIdx.x + s]};
            W r = wmerge(a, b);
            sn[threadIdx.x] = r.n;
            smean[threadIdx.x] = r.mean;
            sm2[threadIdx.x] = r.m2;
        }
        __syncthreads();
    }
    if (threadIdx.x == 0) {
        float *p = part + (row * nchunks + blockIdx.x) * 3;
        p[0] = sn[0];
        p[1] = smean[0];
        p[2] = sm2[0];
    }
}

// one block per row: its chunks merged into (mean, 1/sqrt(var + eps)), the biased variance as torch's
__global__ void ln_final(const float *__restrict__ part, float *__restrict__ stats, int nchunks, float eps) {
    long long row = blockIdx.x;
    W w = {0.f, 0.f, 0.f};
    for (int i = threadIdx.x; i < nchunks; i += blockDim.x) {
        const float *p = part + (row * nchunks + i) * 3;
        W b = {p[0], p[1], p[2]};
        w = wmerge(w, b);
    }
    __shared__ float sn[256], smean[256], sm2[256];
    sn[threadIdx.x] = w.n;
    smean[threadIdx.x] = w.mean;
    sm2[threadIdx.x] = w.m2;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) {
            W a = {sn[threadIdx.x], smean[threadIdx.x], sm2[threadIdx.x]};
            W b = {sn[threadIdx.x + s], smean[threadIdx.x + s], sm2[threadIdx.x + s]};
            W r = wmerge(a, b);
            sn[threadIdx.x] = r.n;
            smean[threadIdx.x] = r.mean;
            sm2[threadIdx.x] = r.m2;
        }
        __syncthreads();
    }
    if (threadIdx.x == 0) {
        float var = sn[0] > 0.f ? sm2[0] / sn[0] : 0.f;
        stats[row * 2] = smean[0];
        stats[row * 2 + 1] = rsqrtf(var + eps);
    }
}

__global__ void ln_apply(const float *__restrict__ x, const float *__restrict__ w, const float *__restrict__ b,
                         const float *__restrict__ stats, float *__restrict__ y, long long L, long long total) {
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < total;
         i += (long long)gridDim.x * blockDim.x) {
        long long row = i / L, j = i - row * L;
        y[i] = (x[i] - stats[row * 2]) * stats[row * 2 + 1] * w[j] + b[j];
    }
}

torch::Tensor layernorm_cuda(torch::Tensor x, torch::Tensor weight, torch::Tensor bias, double eps) {
    auto xc = x.contiguous(), wc = weight.contiguous(), bc = bias.contiguous();
    auto y = torch::empty_like(xc);
    long long L = wc.numel(), total = xc.numel();
    if (L == 0 || total == 0)
        return y;
    long long rows = total / L, chunk = 16384;
    int nchunks = (int)((L + chunk - 1) / chunk);
    auto part = torch::empty({rows * nchunks * 3}, xc.options());
    auto stats = torch::empty({rows * 2}, xc.options());
    cudaStream_t st = c10::cuda::getCurrentCUDAStream();
    ln_partial<<<dim3(nchunks, (unsigned)rows), 256, 0, st>>>(xc.data_ptr<float>(), part.data_ptr<float>(), L, chunk,
                                                             nchunks);
    ln_final<<<(unsigned)rows, 256, 0, st>>>(part.data_ptr<float>(), stats.data_ptr<float>(), nchunks, (float)eps);
    long long blocks = (total + 255) / 256;
    ln_apply<<<(unsigned)(blocks < 65536 ? blocks : 65536), 256, 0, st>>>(
        xc.data_ptr<float>(), wc.data_ptr<float>(), bc.data_ptr<float>(), stats.data_ptr<float>(), y.data_ptr<float>(),
        L, total);
    return y;
}
"""

ext = load_inline(name="kg35_ln_cuda",
                  cpp_sources="torch::Tensor layernorm_cuda(torch::Tensor x, torch::Tensor weight, torch::Tensor bias, double eps);",
                  cuda_sources=cuda_src, functions=["layernorm_cuda"])


class ModelNew(nn.Module):
    def __init__(self, normalized_shape):
        super().__init__()
        self.ln = nn.LayerNorm(normalized_shape=normalized_shape)

    def forward(self, x):
        return ext.layernorm_cuda(x, self.ln.weight, self.ln.bias, self.ln.eps)
