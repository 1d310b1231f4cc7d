#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""fla-core's forward under its Gluon backend, for ncu_summary.py --snippet.

    PYTHONPATH=build/peers-site python3 benchmarks/ncu_summary.py \
        --snippet benchmarks/peers/ncu_fla_forward.py --kernels '(?i)conv' --shape 16384x4096x8

Called as `ncu_fla_forward.py S C DOCS ITERS`: the inputs of ncu_summary's own
snippet (same seed, same document cuts), the forward only, ITERS times.
FLA_GLUON=1 is set before fla is imported; `--kernels` must match fla's kernel
names, not Cake's default `^cake_`.
"""

import os
import sys

os.environ["FLA_GLUON"] = "1"

import torch  # noqa: E402
from fla.modules.causal_conv1d import causal_conv1d  # noqa: E402

S, C, docs, iters = (int(v) for v in sys.argv[1:5])
gen = torch.Generator().manual_seed(0)
cuts = torch.randint(0, S + 1, (docs - 1,), generator=gen).sort().values
cu = torch.cat([torch.tensor([0]), cuts, torch.tensor([S])]).to("cuda", torch.int32)
x = torch.randn(1, S, C, device="cuda").to(torch.bfloat16)
w = torch.randn(C, 4, device="cuda") * 0.5
b = torch.randn(C, device="cuda") * 0.5
with torch.no_grad():
    for _ in range(iters):
        y = causal_conv1d(x=x, weight=w, bias=b, activation="silu", cu_seqlens=cu)[0]
torch.cuda.synchronize()
print(f"fla-core Gluon forward ran {iters} times at S={S}, C={C}, {docs} documents")
