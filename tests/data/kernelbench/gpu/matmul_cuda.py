# kgate test candidate (KernelBench ModelNew, CUDA through load_inline), written for kgate's GPU tests
# (tests/gpu/kernelbench35.sh): an honest fp32 matrix product C = A @ B, 64x64 tiles of C per block
# of 256 threads (4x4 each), A and B staged through shared memory 16 deep, fp32 throughout (no
# TF32), any M, N, K. For KernelBench's level-1 1_Square_matrix_multiplication_ and the matmul
# task's torch baseline (tasks/matmul/baseline.py).
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_src = r"""
#include <c10/cuda/CUDAStream.h>

#define TM 64
#define TN 64
#define TK 16

__global__ void __launch_bounds__(256) sgemm(const float *__restrict__ A, const float *__restrict__ B,
                                             float *__restrict__ C, int M, int N, int K) {
    __shared__ float As[TK][TM + 4];
    __shared__ float Bs[TK][TN + 4];
    int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
    int row0 = blockIdx.y * TM, col0 = blockIdx.x * TN;
    float acc[4][4];
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 4; j++)
            acc[i][j] = 0.f;
    for (int k0 = 0; k0 < K; k0 += TK) {
        for (int i = threadIdx.x; i < TM * TK; i += 256) {
            int m = i / TK, k = i % TK;
            int gr = row0 + m, gk = k0 + k;
            As[k][m] = (gr < M && gk < K) ? A[(long long)gr * K + gk] : 0.f;
        }
        for (int i = threadIdx.x; i < TK * TN; i += 256) {
            int k = i / TN, n = i % TN;
            int gk = k0 + k, gc = col0 + n;
            Bs[k][n] = (gk < K && gc < N) ? B[(long long)gk * N + gc] : 0.f;
        }
        __syncthreads();
#pragma unroll
        for (int k = 0; k < TK; k++) {
            float a[4], b[4];
#pragma unroll
            for (int i = 0; i < 4; i++)
                a[i] = As[k][ty * 4 + i];
#pragma unroll
            for (int j = 0; j < 4; j++)
                b[j] = Bs[k][tx * 4 + j];
#pragma unroll
            for (int i = 0; i < 4; i++)
#pragma unroll
                for (int j = 0; j < 4; j++)
                    acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
        }
        __syncthreads();
    }
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 4; j++) {
            int r = row0 + ty * 4 + i, c = col0 + tx * 4 + j;
            if (r < M && c < N)
                C[(long long)r * N + c] = acc[i][j];
        }
}

torch::Tensor matmul_cuda(torch::Tensor a, torch::Tensor b) {
    auto A = a.contiguous(), B = b.contiguous();
    int M = A.size(0), K = A.size(1), N = B.size(1);
    auto C = torch::empty({M, N}, A.options());
    if (M == 0 || N == 0)
        return C;
    dim3 grid((N + TN - 1) / TN, (M + TM - 1) / TM);
    cudaStream_t st = c10::cuda::getCurrentCUDAStream();
    sgemm<<<grid, 256, 0, st>>>(A.data_ptr<float>(), B.data_ptr<float>(), C.data_ptr<float>(), M, N, K);
    return C;
}
"""

ext = load_inline(name="kg35_matmul_cuda", cpp_sources="torch::Tensor matmul_cuda(torch::Tensor a, torch::Tensor b);",
                  cuda_sources=cuda_src, functions=["matmul_cuda"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A, B):
        return ext.matmul_cuda(A, B)
