//===- CakeOps.td - Operations of the cake dialect ---------*- tablegen -*-===//
// SPDX-License-Identifier: Apache-2.0

#ifndef CAKE_DIALECT_CAKE_IR_CAKEOPS_TD
#define CAKE_DIALECT_CAKE_IR_CAKEOPS_TD

include "cake/Dialect/Cake/IR/CakeAttrs.td"
include "mlir/Interfaces/SideEffectInterfaces.td"
include "mlir/Interfaces/InferTypeOpInterface.td"

class Cake_Op<string mnemonic, list<Trait> traits = []>
    : Op<Cake_Dialect, mnemonic, traits>;

//===----------------------------------------------------------------------===//
// Operand and attribute kinds shared by the ops
//===----------------------------------------------------------------------===//

def Cake_Tokens : MemRefRankOf<[BF16], [2]>;              // [S, C]
def Cake_Weight : MemRefRankOf<[F32, BF16], [2]>;         // [C, width]
def Cake_Bias : MemRefRankOf<[F32, BF16], [1]>;           // [C]
def Cake_CuSeqlens : MemRefRankOf<[I32], [1]>;            // [docs + 1]
def Cake_Partials : MemRefRankOf<[F32, F64], [2]>;        // [R, (width+1) * C]

def Cake_Width : ConfinedAttr<I64Attr, [IntMinValue<2>, IntMaxValue<8>]>;

//===----------------------------------------------------------------------===//
// Op level
//===----------------------------------------------------------------------===//

def Cake_Conv1dFwdOp : Cake_Op<"conv1d_fwd"> {
  let summary = "packed varlen causal depthwise conv1d forward";
  let description = [{
    For the document `[s, e)` of token `t` (from `cu_seqlens`) and channel `c`:

        pre[t, c] = sum_k weight[c, k] * xz[t - width + 1 + k, c]  (+ bias[c])
        xz[u, c]  = x[u, c] if u >= s else 0
        y[t, c]   = bf16(act(pre))

    in fp32. `weight[c, width - 1]` multiplies the current token. Tokens never
    read across a document start.

    The tokens are split into `parts` contiguous ranges of near-equal length
    (part `p` is `[p * S / parts, (p + 1) * S / parts)`), worked on in
    parallel: the caller picks `parts` to fill the machine. The result does not
    depend on it.

    ```mlir
    cake.conv1d_fwd %x, %w, %cu bias %b : memref<?xf32> into %y parts %p
        {activation = #cake.activation<silu>, width = 4 : i64}
        : memref<?x?xbf16>, memref<?x4xf32>, memref<?xi32> -> memref<?x?xbf16>
    ```
  }];
  let arguments = (ins
    Arg<Cake_Tokens, "", [MemRead]>:$x,
    Arg<Cake_Weight, "", [MemRead]>:$weight,
    Arg<Cake_CuSeqlens, "", [MemRead]>:$cu_seqlens,
    Arg<Optional<Cake_Bias>, "", [MemRead]>:$bias,
    Arg<Cake_Tokens, "", [MemWrite]>:$y,
    Index:$parts,
    Cake_Width:$width,
    Cake_ActivationAttr:$activation,
    OptionalAttr<Cake_TilingAttr>:$tiling);
  let assemblyFormat = [{
    $x `,` $weight `,` $cu_seqlens (`bias` $bias^ `:` type($bias))? `into` $y
    `parts` $parts attr-dict `:` type($x) `,` type($weight) `,`
    type($cu_seqlens) `->` type($y)
  }];
  let hasVerifier = 1;
}

def Cake_Conv1dBwdOp : Cake_Op<"conv1d_bwd", [AttrSizedOperandSegments]> {
  let summary = "packed varlen causal depthwise conv1d backward";
  let description = [{
    Recomputes the preactivation of `cake.conv1d_fwd` and, given `dy`, computes

        z  = f32(bf16(pre)) under silu_grad bf16, pre under fp32
        g  = dy * act'(z)
        dx[u, c]      = bf16(sum_k weight[c, k] * g[u + width - 1 - k, c])
        dweight[c, k] = sum_t g[t, c] * xz[t - width + 1 + k, c]
        dbias[c]      = sum_t g[t, c]

    where `dx` sums only over tokens of `u`'s document. The weight and bias
    gradients are summed through `partials` ([R, (width + 1) * C], f32 under
    silu_grad bf16 and f64 under fp32): R partial rows, then a sum of the rows in
    a fixed order, so the result does not depend on scheduling. Partial row
    `r` covers the tokens of part `r` (`[r * S / R, (r + 1) * S / R)`).
    `dweight` and `dbias` take the element types the caller wants (the
    parameters' own).
  }];
  let arguments = (ins
    Arg<Cake_Tokens, "", [MemRead]>:$x,
    Arg<Cake_Weight, "", [MemRead]>:$weight,
    Arg<Cake_CuSeqlens, "", [MemRead]>:$cu_seqlens,
    Arg<Cake_Tokens, "", [MemRead]>:$dy,
    Arg<Optional<Cake_Bias>, "", [MemRead]>:$bias,
    Arg<Cake_Tokens, "", [MemWrite]>:$dx,
    Arg<Cake_Weight, "", [MemWrite]>:$dweight,
    Arg<Optional<Cake_Bias>, "", [MemWrite]>:$dbias,
    Arg<Cake_Partials, "", [MemRead, MemWrite]>:$partials,
    Cake_Width:$width,
    Cake_ActivationAttr:$activation,
    Cake_SiluGradAttr:$silu_grad,
    OptionalAttr<Cake_TilingAttr>:$tiling);
  let assemblyFormat = [{
    $x `,` $weight `,` $cu_seqlens `,` $dy (`bias` $bias^ `:` type($bias))?
    `into` $dx `,` $dweight (`,` $dbias^ `:` type($dbias))?
    `partials` $partials attr-dict `:` type($x) `,` type($weight) `,`
    type($cu_seqlens) `,` type($dy) `->` type($dx) `,` type($dweight) `,`
    type($partials)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Tile level
//===----------------------------------------------------------------------===//

def Cake_FwdTileOp : Cake_Op<"fwd_tile", [AttrSizedOperandSegments]> {
  let summary = "one thread's tile of the forward: taps, bias and activation";
  let description = [{
    Computes `y` of `cake.conv1d_fwd` for the tokens `[first, end)` and the
    channels `[col, col + vector_channels)`. Taps, bias and activation are
    fused: `x` is read once and `pre` never leaves registers. `tiling` says how
    the tile is fed (see `#cake.tiling`).

    With `shared_by n`, the op is the body of an `scf.forall` whose
    iterations come in runs of `n` consecutive ones, each run starting at a
    multiple of `n`, that have the same `[first, end)`, and whose extent is a
    multiple of `n`: threads of one run may search cu_seqlens together.
  }];
  let arguments = (ins
    Arg<Cake_Tokens, "", [MemRead]>:$x,
    Arg<Cake_Weight, "", [MemRead]>:$weight,
    Arg<Cake_CuSeqlens, "", [MemRead]>:$cu_seqlens,
    Arg<Optional<Cake_Bias>, "", [MemRead]>:$bias,
    Arg<Cake_Tokens, "", [MemWrite]>:$y,
    Index:$first,
    Index:$end,
    Optional<Index>:$shared_by,
    Index:$col,
    Cake_Width:$width,
    Cake_ActivationAttr:$activation,
    Cake_TilingAttr:$tiling);
  let assemblyFormat = [{
    $x `,` $weight `,` $cu_seqlens (`bias` $bias^ `:` type($bias))? `into` $y
    `rows` `[` $first `,` $end `)` (`shared_by` $shared_by^)? `col` $col
    attr-dict `:` type($x) `,` type($weight) `,` type($cu_seqlens) `->`
    type($y)
  }];
  let hasVerifier = 1;
}

def Cake_BwdTileOp : Cake_Op<"bwd_tile"> {
  let summary = "one thread's share of the backward: recompute, SiLU', dx, partials";
  let description = [{
    Computes `dx` of `cake.conv1d_bwd` for the tokens `[first, end)` and the
    channels `[col, col + vector_channels)`, and writes those tokens'
    contribution to the weight (and bias) gradient of these channels into row
    `part` of `partials`. Fused: the preactivation is recomputed in registers,
    `x` and `dy` are read once (plus a halo of `width - 1` rows on each side),
    and the partial sums stay in registers until the end.
  }];
  let arguments = (ins
    Arg<Cake_Tokens, "", [MemRead]>:$x,
    Arg<Cake_Weight, "", [MemRead]>:$weight,
    Arg<Cake_CuSeqlens, "", [MemRead]>:$cu_seqlens,
    Arg<Cake_Tokens, "", [MemRead]>:$dy,
    Arg<Optional<Cake_Bias>, "", [MemRead]>:$bias,
    Arg<Cake_Tokens, "", [MemWrite]>:$dx,
    Arg<Cake_Partials, "", [MemWrite]>:$partials,
    Index:$first,
    Index:$end,
    Index:$col,
    Index:$part,
    Cake_Width:$width,
    Cake_ActivationAttr:$activation,
    Cake_SiluGradAttr:$silu_grad,
    Cake_TilingAttr:$tiling);
  let assemblyFormat = [{
    $x `,` $weight `,` $cu_seqlens `,` $dy (`bias` $bias^ `:` type($bias))?
    `into` $dx `,` $partials `rows` `[` $first `,` $end `)` `col` $col `part`
    $part attr-dict `:` type($x) `,` type($weight) `,` type($cu_seqlens) `,`
    type($dy) `->` type($dx) `,` type($partials)
  }];
  let hasVerifier = 1;
}

def Cake_PartialsReduceOp : Cake_Op<"partials_reduce"> {
  let summary = "sum the partial rows of the weight gradient in a fixed order";
  let description = [{
    `dweight[c, k] = sum_r partials[r, c * width + k]` and
    `dbias[c] = sum_r partials[r, width * C + c]`, summed in the element type
    of `partials` in one fixed order, then rounded to the gradients' element
    types. With no rows, the gradients are zero.
  }];
  let arguments = (ins
    Arg<Cake_Partials, "", [MemRead]>:$partials,
    Arg<Cake_Weight, "", [MemWrite]>:$dweight,
    Arg<Optional<Cake_Bias>, "", [MemWrite]>:$dbias);
  let assemblyFormat = [{
    $partials `into` $dweight (`,` $dbias^ `:` type($dbias))? attr-dict `:`
    type($partials) `->` type($dweight)
  }];
  let hasVerifier = 1;
}

def Cake_LaneSumOp : Cake_Op<"lane_sum", [Pure, SameOperandsAndResultType]> {
  let summary = "sum a value over groups of consecutive forall iterations";
  let description = [{
    Inside an `scf.forall` whose consecutive iterations run as consecutive
    lanes of a 32-lane subgroup: the sum of `operand` over the `lanes`
    iterations `i` with the same `i / lanes`, returned to each of them. The
    sum is taken pairwise in one fixed order (a butterfly: lanes `lanes / 2`
    apart first, then ever closer), so every iteration of a group gets the
    same bits, run to run. `lanes` is a power of two from 2 to 32, and every
    lane of a subgroup must reach the op: the forall's extent is a multiple
    of 32, and the op is not under a condition that differs between lanes.
  }];
  let arguments = (ins AnyTypeOf<[F32, F64]>:$operand,
                   ConfinedAttr<I64Attr, [IntPowerOf2, IntMinValue<2>,
                                          IntMaxValue<32>]>:$lanes);
  let results = (outs AnyTypeOf<[F32, F64]>:$result);
  let assemblyFormat = "$operand `lanes` $lanes attr-dict `:` type($result)";
}

//===----------------------------------------------------------------------===//
// Activation math
//===----------------------------------------------------------------------===//

class Cake_ActivationMathOp<string mnemonic>
    : Cake_Op<mnemonic, [Pure, Elementwise, SameOperandsAndResultType]> {
  let arguments = (ins FloatLike:$operand, UnitAttr:$approx);
  let results = (outs FloatLike:$result);
  let assemblyFormat = "$operand attr-dict `:` type($result)";
}

def Cake_SiluOp : Cake_ActivationMathOp<"silu"> {
  let summary = "x * sigmoid(x)";
  let description = [{
    Elementwise SiLU. It saturates: finite for every finite input, never
    flushing a representable result to zero, and NaN where the float64 formula
    is (`-inf * sigmoid(-inf)`). With `approx`, exp2 and the reciprocal may be
    hardware approximations within 2 ulp.
  }];
}

def Cake_SiluDerivativeOp : Cake_ActivationMathOp<"silu_derivative"> {
  let summary = "sigmoid(x) * (1 + x * (1 - sigmoid(x)))";
  let description = [{
    Elementwise derivative of SiLU, with the saturation and `approx` of
    `cake.silu`. `1 - sigmoid(x)` is computed without cancellation.
  }];
}

#endif // CAKE_DIALECT_CAKE_IR_CAKEOPS_TD
