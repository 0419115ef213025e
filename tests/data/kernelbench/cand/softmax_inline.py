# kgate test candidate (KernelBench ModelNew with C++ through load_inline, for the CPU): a row
# softmax in one pass for the maximum and one for the sums. kgate builds the extension in its
# compile sandbox; the run loads that build.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_source = r"""
#include <cmath>
torch::Tensor softmax_rows(torch::Tensor x) {
    TORCH_CHECK(x.dim() == 2 && x.scalar_type() == torch::kFloat32, "2-d float32 input");
    auto xc = x.contiguous();
    auto y = torch::empty_like(xc);
    const int64_t R = xc.size(0), C = xc.size(1);
    const float *in = xc.data_ptr<float>();
    float *out = y.data_ptr<float>();
    for (int64_t r = 0; r < R; r++) {
        const float *row = in + r * C;
        float *o = out + r * C;
        float m = -INFINITY;
        for (int64_t c = 0; c < C; c++) m = std::fmax(m, row[c]);
        double s = 0;
        for (int64_t c = 0; c < C; c++) { o[c] = std::exp(row[c] - m); s += o[c]; }
        const float inv = (float)(1.0 / s);
        for (int64_t c = 0; c < C; c++) o[c] *= inv;
    }
    return y;
}
"""

softmax_ext = load_inline(
    name="kg_softmax_rows",
    cpp_sources=cpp_source,
    functions=["softmax_rows"],
    extra_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.ext = softmax_ext

    def forward(self, x):
        return self.ext.softmax_rows(x)
