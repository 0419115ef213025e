# kgate test candidate (KernelBench ModelNew for causal_attention.py, honest): no mask buffer at all;
# the causal mask is made in forward, at the sequence's length. Where the Model's buffer was drawn
# like an input (kgate 0.3) the reference was not causal and this was rejected. Right verdict:
# accepted (the Model's buffer is kept, and a ModelNew need not hold it).
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    def __init__(self, n_embd, n_head, attn_pdrop, resid_pdrop, max_seqlen):
        super().__init__()
        self.c_attn = nn.Linear(n_embd, 3 * n_embd)
        self.c_proj = nn.Linear(n_embd, n_embd)
        self.n_head = n_head
        self.n_embd = n_embd

    def forward(self, x):
        B, T, C = x.size()
        h = self.n_head
        q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
        q = q.view(B, T, h, C // h).transpose(1, 2)
        k = k.view(B, T, h, C // h).transpose(1, 2)
        v = v.view(B, T, h, C // h).transpose(1, 2)
        causal = torch.ones(T, T, dtype=torch.bool).tril()
        # scaled as the Model scales (times the reciprocal): where the logits are large the softmax
        # is nearly one-hot, and dividing instead moved 10 of 6720 outputs past the bound at one
        # random shape in one run (a difference of rounding, not of the mask this candidate is for)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(C // h))
        att = F.softmax(att.masked_fill(~causal, float("-inf")), dim=-1)
        return self.c_proj((att @ v).transpose(1, 2).reshape(B, T, C))
