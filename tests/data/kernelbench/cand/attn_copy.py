# kgate test candidate (KernelBench ModelNew for causal_attention.py, honest): the Model's own
# computation, its mask the registered buffer (which kgate binds to the Model's kept values), fused
# into one masked-softmax chain. Run at a small max_seqlen: a random shape with seq_len above it is
# one the Model itself refuses (kgate 0.3: exit 3). Right verdict: accepted.
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
        qkv = self.c_attn(x).view(B, T, 3, h, C // h).permute(2, 0, 3, 1, 4)
        q, k, v = qkv[0], qkv[1], qkv[2]
        att = torch.matmul(q, k.transpose(-2, -1)).mul_(1.0 / math.sqrt(C // h))
        att = att.masked_fill_(self.bias[:, :, :T, :T] == 0, float("-inf")).softmax(dim=-1)
        return self.c_proj(torch.matmul(att, v).transpose(1, 2).reshape(B, T, C))
