# kgate test candidate (KernelBench ModelNew, CUDA through load_inline), written for kgate's GPU tests
# (tests/gpu/kernelbench35.sh): an honest softmax over the last dimension, one block per row, two
# passes over the row (a running maximum and sum merged across the block, then the outputs),
# launched on torch's current stream. For KernelBench's level-1 23_Softmax and the softmax task's
# torch baseline (tasks/softmax/baseline.py) alike.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_src = r"""
#include <c10/cuda/CUDAStream.h>
#include <math.h>

// (m, s): a running maximum and the sum of exp(v - m) over what it has seen
__device__ __forceinline__ void merge(float &m, float &s, float m2, float s2) {
    float mm = fmaxf(m, m2);
    if (mm == -INFINITY) { m = mm; s = 0.f; return; }
    float a = (m == mm) ? s : s * expf(m - mm);
    float b = (m2 == mm) ? s2 : s2 * expf(m2 - mm);
    m = mm;
    s = a + b;
}

__global__ void softmax_rows(const float *__restrict__ x, float *__restrict__ y, long long n) {
    const float *row = x + (long long)blockIdx.x * n;
    float *out = y + (long long)blockIdx.x * n;
    float m = -INFINITY, s = 0.f;
    for (long long i = threadIdx.x; i < n; i += blockDim.x) {
        float v = row[i];
        if (v == -INFINITY) continue;
        if (v > m) { s = (m == -INFINITY) ? 1.f : s * expf(m - v) + 1.f; m = v; }
        else s += expf(v - m);
    }
    for (int off = 16; off > 0; off >>= 1) {
        float m2 = __shfl_xor_sync(0xffffffffu, m, off);
        float s2 = __shfl_xor_sync(0xffffffffu, s, off);
        merge(m, s, m2, s2);
    }
    __shared__ float sm[32], ss[32];
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = (blockDim.x + 31) >> 5;
    if (lane == 0) { sm[warp] = m; ss[warp] = s; }
    __syncthreads();
    if (warp == 0) {
        m = lane < nw ? sm[lane] : -INFINITY;
        s = lane < nw ? ss[lane] : 0.f;
        for (int off = 16; off > 0; off >>= 1) {
            float m2 = __shfl_xor_sync(0xffffffffu, m, off);
            float s2 = __shfl_xor_sync(0xffffffffu, s, off);
            merge(m, s, m2, s2);
        }
        if (lane == 0) { sm[0] = m; ss[0] = s; }
    }
    __syncthreads();
    float M = sm[0], S = ss[0];
    for (long long i = threadIdx.x; i < n; i += blockDim.x)
        out[i] = expf(row[i] - M) / S;
}

torch::Tensor softmax_cuda(torch::Tensor x) {
    auto xc = x.contiguous();
    auto y = torch::empty_like(xc);
    long long n = xc.size(-1);
    long long rows = n ? xc.numel() / n : 0;
    if (rows == 0 || n == 0)
        return y;
    cudaStream_t st = c10::cuda::getCurrentCUDAStream();
    softmax_rows<<<(unsigned)rows, 1024, 0, st>>>(xc.data_ptr<float>(), y.data_ptr<float>(), n);
    return y;
}
"""

ext = load_inline(name="kg35_softmax_cuda", cpp_sources="torch::Tensor softmax_cuda(torch::Tensor x);",
                  cuda_sources=cuda_src, functions=["softmax_cuda"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return ext.softmax_cuda(x)
