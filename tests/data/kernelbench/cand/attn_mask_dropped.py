# kgate test candidate (KernelBench ModelNew for causal_attention.py, hostile): the Model's layers
# and mask buffer, but attention over every position: the causal mask is dropped. Where the mask
# buffer is drawn like an input (kgate 0.3), the reference masks with noise and this passed; with
# the buffer kept at the Model's values, the reference is causal. Right verdict: check.mismatch.
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    def __init__(self, n_embd, n_head, attn_pdrop, resid_pdrop, max_seqlen):
        super().__init__()
        self.c_attn = nn.Linear(n_embd, 3 * n_embd)
        self.c_proj = nn.Linear(n_embd, n_embd)
        self.register_buffer("bias", torch.tril(torch.ones(max_seqlen, max_seqlen)).view(1, 1, max_seqlen, max_seqlen))
        self.n_head = n_head
        self.n_embd = n_embd

    def forward(self, x):
        B, T, C = x.size()
        h = self.n_head
        q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
        q = q.view(B, T, h, C // h).transpose(1, 2)
        k = k.view(B, T, h, C // h).transpose(1, 2)
        v = v.view(B, T, h, C // h).transpose(1, 2)
        att = F.softmax((q @ k.transpose(-2, -1)) / math.sqrt(C // h), dim=-1)
        return self.c_proj((att @ v).transpose(1, 2).reshape(B, T, C))
