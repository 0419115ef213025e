# kgate test candidate (KernelBench ModelNew, CUDA through load_inline), written for kgate's GPU tests
# (tests/gpu/kernelbench35.sh): an honest conv2d (valid, stride 1) + bias + ReLU + 2x2 max-pool
# (floor), fused: one thread per pooled output computes its four convolution outputs directly. For the
# conv_relu_pool task's torch baseline (tasks/conv_relu_pool/baseline.py: weight and bias are
# forward's inputs).
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_src = r"""
#include <c10/cuda/CUDAStream.h>
#include <math.h>

__global__ void conv_relu_pool(const float *__restrict__ x, const float *__restrict__ w, const float *__restrict__ b,
                               float *__restrict__ y, int N, int C, int H, int W, int K, int R, int S, int PH, int PW) {
    long long total = (long long)N * K * PH * PW;
    for (long long o = (long long)blockIdx.x * blockDim.x + threadIdx.x; o < total;
         o += (long long)gridDim.x * blockDim.x) {
        int pw = o % PW, ph = (o / PW) % PH, k = (o / ((long long)PW * PH)) % K, n = o / ((long long)PW * PH * K);
        float best = -INFINITY;
        for (int dy = 0; dy < 2; dy++)
            for (int dx = 0; dx < 2; dx++) {
                int oy = 2 * ph + dy, ox = 2 * pw + dx;
                float acc = b[k];
                for (int c = 0; c < C; c++)
                    for (int r = 0; r < R; r++)
                        for (int s = 0; s < S; s++)
                            acc = fmaf(x[(((long long)n * C + c) * H + oy + r) * W + ox + s],
                                       w[(((long long)k * C + c) * R + r) * S + s], acc);
                best = fmaxf(best, fmaxf(acc, 0.f));
            }
        y[o] = best;
    }
}

torch::Tensor conv_relu_pool_cuda(torch::Tensor x, torch::Tensor w, torch::Tensor b) {
    auto xc = x.contiguous(), wc = w.contiguous(), bc = b.contiguous();
    int N = xc.size(0), C = xc.size(1), H = xc.size(2), W = xc.size(3);
    int K = wc.size(0), R = wc.size(2), S = wc.size(3);
    int PH = (H - R + 1) / 2, PW = (W - S + 1) / 2;
    auto y = torch::empty({N, K, PH, PW}, xc.options());
    long long total = (long long)N * K * PH * PW;
    if (total == 0)
        return y;
    long long blocks = (total + 255) / 256;
    cudaStream_t st = c10::cuda::getCurrentCUDAStream();
    conv_relu_pool<<<(unsigned)(blocks < 65536 ? blocks : 65536), 256, 0, st>>>(
        xc.data_ptr<float>(), wc.data_ptr<float>(), bc.data_ptr<float>(), y.data_ptr<float>(), N, C, H, W, K, R, S, PH, PW);
    return y;
}
"""

ext = load_inline(name="kg35_conv_cuda",
                  cpp_sources="torch::Tensor conv_relu_pool_cuda(torch::Tensor x, torch::Tensor w, torch::Tensor b);",
                  cuda_sources=cuda_src, functions=["conv_relu_pool_cuda"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x, weight, bias):
        return ext.conv_relu_pool_cuda(x, weight, bias)
