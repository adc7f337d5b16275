"""libquant.torch: quantized Linear modules for PyTorch training, the way
TransformerEngine (``te.Linear``, ``te.autocast``, ``CustomRecipe``) and torchao
(``convert``) users write them.

    import torch, libquant.torch as lqt
    model = torch.nn.Sequential(lqt.Linear(256, 1024), torch.nn.GELU(), lqt.Linear(1024, 256))
    with lqt.autocast(recipe=lqt.MXFP8BlockScaling()):
        loss = model(x).square().mean()
    loss.backward()

Forward and backward run through the library's linear ops (quant_linear_forward
/ _backward, the grouped variants), registered as torch custom operators
(``torch.ops.libquant.*``) so that torch.compile traces them.
"""

from ._master import MasterWeights
from ._modules import GroupedLinear, Linear, convert
from ._ops import live_contexts
from ._safetensors import load_safetensors, save_safetensors
from ._recipes import (PRESETS, CustomRecipe, DelayedScaling, Float8BlockScaling, Float8CurrentScaling,
                       HybridQuantizer, IdentityQuantizer, MXFP8BlockScaling, NVFP4BlockScaling, Preset, Recipe,
                       Role, preset)
from ._state import autocast, quantized_model_init

__all__ = ["Linear", "GroupedLinear", "convert", "autocast", "Recipe", "Preset", "preset", "PRESETS",
           "DelayedScaling", "Float8CurrentScaling", "Float8BlockScaling", "MXFP8BlockScaling", "NVFP4BlockScaling",
           "CustomRecipe", "HybridQuantizer", "IdentityQuantizer", "Role", "live_contexts", "quantized_model_init",
           "MasterWeights", "save_safetensors", "load_safetensors"]
