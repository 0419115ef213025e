# kgate red-team candidate (honest): imports torch.utils.cpp_extension as KernelBench answers do
# (the module, and CUDA_HOME and load_inline from it), and decides from CUDA_HOME and the device
# whether to build a CUDA extension; on the CPU it stays plain PyTorch. Right verdict: accepted.
import torch
import torch.nn as nn
import torch.utils.cpp_extension
from torch.utils.cpp_extension import CUDA_HOME, load_inline  # noqa: F401

USE_CUDA = torch.cuda.is_available() and CUDA_HOME is not None
_ = torch.utils.cpp_extension.include_paths()


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.softmax(x, dim=1)
