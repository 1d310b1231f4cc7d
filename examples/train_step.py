# SPDX-License-Identifier: Apache-2.0
"""A few training steps of a tiny layer through cake_causal_conv1d.

Packed documents of random lengths go through the op and a linear head; the
loss falls, and the first step's gradients are compared with the float64
reference. On a supported GPU the GPU kernels run; elsewhere the host kernels,
on the CPU. It also shows the op rejecting a bad argument before any launch.
"""

import torch

import cake
from cake.reference import causal_conv1d_backward_ref

S, C, DOCS = 4096, 256, 7


def packed_batch(device):
    cuts = torch.sort(torch.randint(1, S, (DOCS - 1,))).values
    cu = torch.cat([torch.tensor([0]), cuts, torch.tensor([S])]).to(torch.int32)
    x = torch.randn(S, C).bfloat16()
    target = torch.randn(S, C)
    return x.to(device), cu.to(device), target.to(device)


def main() -> None:
    torch.manual_seed(0)
    on_gpu = torch.cuda.is_available() and cake.is_cake_causal_conv1d_train_supported("cuda")
    device = "cuda" if on_gpu else "cpu"
    weight = (0.5 * torch.randn(C, 4)).to(device).requires_grad_()
    bias = (0.1 * torch.randn(C)).to(device).requires_grad_()
    head = torch.nn.Linear(C, C).to(device)
    optimizer = torch.optim.SGD([weight, bias, *head.parameters()], lr=0.05)
    x, cu, target = packed_batch(device)

    if on_gpu:
        print(f"running on {torch.cuda.get_device_name()}")
    elif cake.is_cake_causal_conv1d_train_supported("cpu"):
        print("no supported GPU here: running the host kernels on the CPU")
    else:
        raise SystemExit("neither a supported GPU nor an x86-64-v3 CPU here")
    try:
        cake.cake_causal_conv1d(x[:, :12], weight[:12], cu, bias[:12])
    except (TypeError, ValueError, RuntimeError) as error:
        print(f"  the op rejects C = 12 before any launch: {error}")
    check_gradients(x, weight, cu, bias, head, target)
    conv = lambda: cake.cake_causal_conv1d(x, weight, cu, bias)  # noqa: E731

    for step in range(5):
        optimizer.zero_grad()
        y = conv()
        loss = torch.nn.functional.mse_loss(head(y.float()), target)
        loss.backward()
        optimizer.step()
        print(f"  step {step}: loss {loss.item():.5f}")


def check_gradients(x, weight, cu, bias, head, target) -> None:
    """Compares the op's weight and bias gradients with the reference's."""
    w = weight.detach().requires_grad_()
    b = bias.detach().requires_grad_()
    y = cake.cake_causal_conv1d(x, w, cu, b)
    y.retain_grad()
    torch.nn.functional.mse_loss(head(y.float()), target).backward()
    _, dw_ref, db_ref = causal_conv1d_backward_ref(x, w.detach(), cu, y.grad, b.detach())
    dw_err = ((w.grad.double() - dw_ref).abs().max() / dw_ref.abs().max()).item()
    db_err = ((b.grad.double() - db_ref).abs().max() / db_ref.abs().max()).item()
    print(f"  gradients vs the float64 reference: dweight {dw_err:.1e}, dbias {db_err:.1e}")
    head.zero_grad()


if __name__ == "__main__":
    main()
