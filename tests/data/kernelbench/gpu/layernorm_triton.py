# kgate test candidate (KernelBench ModelNew with Triton kernels), written for kgate's GPU tests
# (tests/gpu/kernelbench35.sh): an honest layer normalisation for the layernorm task's torch baseline
# (tasks/layernorm/baseline.py: weight and bias are forward's inputs). Per row and chunk of it, a
# program takes the chunk's sum, then its sum of squared deviations from the row's mean (two passes:
# a one-pass E[x^2] - E[x]^2 fails kgate's large-mean inputs), then the outputs. Compiled in kgate's
# warm-up ahead of the run.
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _chunk_sum(x_ptr, out_ptr, L, CHUNK: tl.constexpr, BLOCK: tl.constexpr):
    row = tl.program_id(1).to(tl.int64)
    c = tl.program_id(0).to(tl.int64)
    base = x_ptr + row * L
    offs = tl.arange(0, BLOCK)
    acc = tl.zeros([BLOCK], tl.float32)
    for s in range(0, CHUNK, BLOCK):
        i = c * CHUNK + s + offs
        acc += tl.load(base + i, mask=i < L, other=0.0)
    tl.store(out_ptr + row * tl.num_programs(0) + c, tl.sum(acc, axis=0))


@triton.jit
def _chunk_dev(x_ptr, mean_ptr, out_ptr, L, CHUNK: tl.constexpr, BLOCK: tl.constexpr):
    row = tl.program_id(1).to(tl.int64)
    c = tl.program_id(0).to(tl.int64)
    base = x_ptr + row * L
    mean = tl.load(mean_ptr + row)
    offs = tl.arange(0, BLOCK)
    acc = tl.zeros([BLOCK], tl.float32)
    for s in range(0, CHUNK, BLOCK):
        i = c * CHUNK + s + offs
        d = tl.where(i < L, tl.load(base + i, mask=i < L, other=0.0) - mean, 0.0)
        acc += d * d
    tl.store(out_ptr + row * tl.num_programs(0) + c, tl.sum(acc, axis=0))


@triton.jit
def _apply(x_ptr, w_ptr, b_ptr, mean_ptr, rstd_ptr, y_ptr, L, CHUNK: tl.constexpr, BLOCK: tl.constexpr):
    row = tl.program_id(1).to(tl.int64)
    c = tl.program_id(0).to(tl.int64)
    mean = tl.load(mean_ptr + row)
    rstd = tl.load(rstd_ptr + row)
    offs = tl.arange(0, BLOCK)
    for s in range(0, CHUNK, BLOCK):
        i = c * CHUNK + s + offs
        m = i < L
        x = tl.load(x_ptr + row * L + i, mask=m, other=0.0)
        w = tl.load(w_ptr + i, mask=m, other=0.0)
        b = tl.load(b_ptr + i, mask=m, other=0.0)
        tl.store(y_ptr + row * L + i, (x - mean) * rstd * w + b, mask=m)


CHUNK = 16384
BLOCK = 1024


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x, weight, bias):
        x = x.contiguous()
        weight = weight.contiguous()
        bias = bias.contiguous()
        y = torch.empty_like(x)
        L = weight.numel()
        rows = x.numel() // L if L else 0
        if not rows:
            return y
        nchunks = triton.cdiv(L, CHUNK)
        part = torch.empty((rows, nchunks), device=x.device, dtype=torch.float32)
        grid = (nchunks, rows)
        _chunk_sum[grid](x, part, L, CHUNK=CHUNK, BLOCK=BLOCK, num_warps=4)
        mean = part.sum(dim=1) / L
        _chunk_dev[grid](x, mean, part, L, CHUNK=CHUNK, BLOCK=BLOCK, num_warps=4)
        rstd = torch.rsqrt(part.sum(dim=1) / L + 1e-5)
        _apply[grid](x, weight, bias, mean, rstd, y, L, CHUNK=CHUNK, BLOCK=BLOCK, num_warps=4)
        return y
