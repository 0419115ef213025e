# kgate test candidate (KernelBench ModelNew with a Triton kernel), written for kgate's GPU tests
# (tests/gpu/kernelbench35.sh): an honest conv2d (valid, stride 1) + bias + ReLU + 2x2 max-pool
# (floor), fused, a block of pooled outputs per program, each computing its four convolution outputs
# directly. For the conv_relu_pool task's torch baseline (tasks/conv_relu_pool/baseline.py).
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _conv_relu_pool(x_ptr, w_ptr, b_ptr, y_ptr, total, C, H, W, K, R, S, PH, PW, BLOCK: tl.constexpr):
    o = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    live = o < total
    pw = o % PW
    ph = (o // PW) % PH
    k = (o // (PW * PH)) % K
    n = o // (PW * PH * K)
    bias = tl.load(b_ptr + k, mask=live, other=0.0)
    a00 = bias
    a01 = bias
    a10 = bias
    a11 = bias
    for c in range(0, C):
        for r in range(0, R):
            for s in range(0, S):
                wv = tl.load(w_ptr + ((k * C + c) * R + r) * S + s, mask=live, other=0.0)
                row = ((n * C + c) * H + 2 * ph + r) * W + 2 * pw + s
                a00 += wv * tl.load(x_ptr + row, mask=live, other=0.0)
                a01 += wv * tl.load(x_ptr + row + 1, mask=live, other=0.0)
                a10 += wv * tl.load(x_ptr + row + W, mask=live, other=0.0)
                a11 += wv * tl.load(x_ptr + row + W + 1, mask=live, other=0.0)
    best = tl.maximum(tl.maximum(a00, a01), tl.maximum(a10, a11))
    tl.store(y_ptr + o, tl.maximum(best, 0.0), mask=live)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x, weight, bias):
        x = x.contiguous()
        weight = weight.contiguous()
        bias = bias.contiguous()
        N, C, H, W = x.shape
        K, _, R, S = weight.shape
        PH, PW = (H - R + 1) // 2, (W - S + 1) // 2
        y = torch.empty((N, K, PH, PW), device=x.device, dtype=x.dtype)
        total = y.numel()
        if total:
            _conv_relu_pool[(triton.cdiv(total, 256),)](x, weight, bias, y, total, C, H, W, K, R, S, PH, PW,
                                                        BLOCK=256, num_warps=4)
        return y
