// RUN: cake-opt %s --split-input-file --verify-diagnostics

// The tokens must be bf16.
func.func @x_not_bf16(%x: memref<?x?xf32>, %w: memref<?x4xf32>, %cu: memref<?xi32>, %y: memref<?x?xbf16>, %n: index) {
  // expected-error @+1 {{operand #0 must be 2D memref of bfloat16 type values}}
  cake.conv1d_fwd %x, %w, %cu into %y parts %n {activation = #cake.activation<silu>, width = 4 : i64}
      : memref<?x?xf32>, memref<?x4xf32>, memref<?xi32> -> memref<?x?xbf16>
  return
}

// -----

// The tokens are [S, C].
func.func @x_rank(%x: memref<?xbf16>, %w: memref<?x4xf32>, %cu: memref<?xi32>, %y: memref<?x?xbf16>, %n: index) {
  // expected-error @+1 {{operand #0 must be 2D memref of bfloat16 type values}}
  cake.conv1d_fwd %x, %w, %cu into %y parts %n {activation = #cake.activation<silu>, width = 4 : i64}
      : memref<?xbf16>, memref<?x4xf32>, memref<?xi32> -> memref<?x?xbf16>
  return
}

// -----

// The weight is fp32 or bf16.
func.func @weight_f16(%x: memref<?x?xbf16>, %w: memref<?x4xf16>, %cu: memref<?xi32>, %y: memref<?x?xbf16>, %n: index) {
  // expected-error @+1 {{operand #1 must be 2D memref of 32-bit float or bfloat16 type values}}
  cake.conv1d_fwd %x, %w, %cu into %y parts %n {activation = #cake.activation<silu>, width = 4 : i64}
      : memref<?x?xbf16>, memref<?x4xf16>, memref<?xi32> -> memref<?x?xbf16>
  return
}

// -----

// cu_seqlens is int32.
func.func @cu_i64(%x: memref<?x?xbf16>, %w: memref<?x4xf32>, %cu: memref<?xi64>, %y: memref<?x?xbf16>, %n: index) {
  // expected-error @+1 {{operand #2 must be 1D memref of 32-bit signless integer values}}
  cake.conv1d_fwd %x, %w, %cu into %y parts %n {activation = #cake.activation<silu>, width = 4 : i64}
      : memref<?x?xbf16>, memref<?x4xf32>, memref<?xi64> -> memref<?x?xbf16>
  return
}

// -----

// One weight row per channel.
func.func @weight_rows(%x: memref<?x16xbf16>, %w: memref<8x4xf32>, %cu: memref<?xi32>, %y: memref<?x16xbf16>, %n: index) {
  // expected-error @+1 {{'weight' has 8 rows but 'x' has 16 channels}}
  cake.conv1d_fwd %x, %w, %cu into %y parts %n {activation = #cake.activation<silu>, width = 4 : i64}
      : memref<?x16xbf16>, memref<8x4xf32>, memref<?xi32> -> memref<?x16xbf16>
  return
}

// -----

// One weight column per tap.
func.func @weight_columns(%x: memref<?x?xbf16>, %w: memref<?x3xf32>, %cu: memref<?xi32>, %y: memref<?x?xbf16>, %n: index) {
  // expected-error @+1 {{'weight' has 3 columns but the width is 4}}
  cake.conv1d_fwd %x, %w, %cu into %y parts %n {activation = #cake.activation<silu>, width = 4 : i64}
      : memref<?x?xbf16>, memref<?x3xf32>, memref<?xi32> -> memref<?x?xbf16>
  return
}

// -----

// The width is 2 to 8.
func.func @width_range(%x: memref<?x?xbf16>, %w: memref<?x9xf32>, %cu: memref<?xi32>, %y: memref<?x?xbf16>, %n: index) {
  // expected-error @+1 {{attribute 'width' failed to satisfy constraint: 64-bit signless integer attribute whose minimum value is 2 whose maximum value is 8}}
  cake.conv1d_fwd %x, %w, %cu into %y parts %n {activation = #cake.activation<silu>, width = 9 : i64}
      : memref<?x?xbf16>, memref<?x9xf32>, memref<?xi32> -> memref<?x?xbf16>
  return
}

// -----

// One bias element per channel.
func.func @bias_shape(%x: memref<?x16xbf16>, %w: memref<?x4xf32>, %cu: memref<?xi32>, %b: memref<8xf32>, %y: memref<?x16xbf16>, %n: index) {
  // expected-error @+1 {{'bias' has 8 elements but 'x' has 16 channels}}
  cake.conv1d_fwd %x, %w, %cu bias %b : memref<8xf32> into %y parts %n {activation = #cake.activation<silu>, width = 4 : i64}
      : memref<?x16xbf16>, memref<?x4xf32>, memref<?xi32> -> memref<?x16xbf16>
  return
}

// -----

// The output has the tokens' shape.
func.func @y_shape(%x: memref<?x16xbf16>, %w: memref<?x4xf32>, %cu: memref<?xi32>, %y: memref<?x8xbf16>, %n: index) {
  // expected-error @+1 {{'y' has shape ?x8 but 'x' has shape ?x16}}
  cake.conv1d_fwd %x, %w, %cu into %y parts %n {activation = #cake.activation<silu>, width = 4 : i64}
      : memref<?x16xbf16>, memref<?x4xf32>, memref<?xi32> -> memref<?x8xbf16>
  return
}

// -----

// Activations are none or silu.
func.func @unknown_activation(%x: memref<?x?xbf16>, %w: memref<?x4xf32>, %cu: memref<?xi32>, %y: memref<?x?xbf16>, %n: index) {
  // expected-error @+2 {{expected one of [none, silu] for activation applied to the preactivation, got: gelu}}
  // expected-error @+1 {{failed to parse Cake_ActivationAttr parameter 'value'}}
  cake.conv1d_fwd %x, %w, %cu into %y parts %n {activation = #cake.activation<gelu>, width = 4 : i64}
      : memref<?x?xbf16>, memref<?x4xf32>, memref<?xi32> -> memref<?x?xbf16>
  return
}

// -----

// A tiling whose block is not whole warps.
func.func @tiling_block(%x: memref<?x?xbf16>, %w: memref<?x4xf32>, %cu: memref<?xi32>, %y: memref<?x?xbf16>, %n: index) {
  // expected-error @+2 {{block_threads (100) must be a multiple of 32 up to 1024}}
  cake.conv1d_fwd %x, %w, %cu into %y parts %n {activation = #cake.activation<silu>, width = 4 : i64,
      tiling = #cake.tiling<vector_channels = 8, block_threads = 100, stages = 4, unroll = 1>}
      : memref<?x?xbf16>, memref<?x4xf32>, memref<?xi32> -> memref<?x?xbf16>
  return
}

// -----

// A tiling that unrolls no rows.
func.func @tiling_unroll(%x: memref<?x?xbf16>, %w: memref<?x4xf32>, %cu: memref<?xi32>, %y: memref<?x?xbf16>, %n: index) {
  // expected-error @+2 {{unroll (0) must be positive}}
  cake.conv1d_fwd %x, %w, %cu into %y parts %n {activation = #cake.activation<silu>, width = 4 : i64,
      tiling = #cake.tiling<vector_channels = 8, block_threads = 128, stages = 4, unroll = 0>}
      : memref<?x?xbf16>, memref<?x4xf32>, memref<?xi32> -> memref<?x?xbf16>
  return
}

// -----

// A register cap past what a thread can address.
func.func @tiling_registers(%x: memref<?x?xbf16>, %w: memref<?x4xf32>, %cu: memref<?xi32>, %y: memref<?x?xbf16>, %n: index) {
  // expected-error @+2 {{max_registers (256) must be 0 (no cap) or from 16 to 255}}
  cake.conv1d_fwd %x, %w, %cu into %y parts %n {activation = #cake.activation<silu>, width = 4 : i64,
      tiling = #cake.tiling<vector_channels = 8, block_threads = 128, stages = 4, unroll = 1, max_registers = 256>}
      : memref<?x?xbf16>, memref<?x4xf32>, memref<?xi32> -> memref<?x?xbf16>
  return
}

// -----

// A launch of no waves of parts.
func.func @tiling_waves(%x: memref<?x?xbf16>, %w: memref<?x4xf32>, %cu: memref<?xi32>, %y: memref<?x?xbf16>, %n: index) {
  // expected-error @+2 {{waves (0) must be positive}}
  cake.conv1d_fwd %x, %w, %cu into %y parts %n {activation = #cake.activation<silu>, width = 4 : i64,
      tiling = #cake.tiling<vector_channels = 8, block_threads = 128, stages = 4, unroll = 1, waves = 0>}
      : memref<?x?xbf16>, memref<?x4xf32>, memref<?xi32> -> memref<?x?xbf16>
  return
}

// -----

// A longest part of fewer than no tokens.
func.func @tiling_max_part_tokens(%x: memref<?x?xbf16>, %w: memref<?x4xf32>, %cu: memref<?xi32>, %y: memref<?x?xbf16>, %n: index) {
  // expected-error @+2 {{max_part_tokens (-1) must not be negative}}
  cake.conv1d_fwd %x, %w, %cu into %y parts %n {activation = #cake.activation<silu>, width = 4 : i64,
      tiling = #cake.tiling<vector_channels = 8, block_threads = 128, stages = 4, unroll = 1, max_part_tokens = -1>}
      : memref<?x?xbf16>, memref<?x4xf32>, memref<?xi32> -> memref<?x?xbf16>
  return
}

// -----

// A backward's parts are its workspace's rows: a longest part would make them
// grow with S.
func.func @bwd_max_part_tokens(%x: memref<?x?xbf16>, %w: memref<?x4xf32>, %cu: memref<?xi32>, %dy: memref<?x?xbf16>,
                               %dx: memref<?x?xbf16>, %dw: memref<?x4xf32>, %p: memref<?x?xf32>) {
  // expected-error @+1 {{tiling has max_part_tokens = 18, but a backward's parts are bounded by its waves alone}}
  cake.conv1d_bwd %x, %w, %cu, %dy into %dx, %dw partials %p
      {activation = #cake.activation<silu>, silu_grad = #cake.silu_grad<bf16>, width = 4 : i64,
       tiling = #cake.tiling<vector_channels = 8, block_threads = 128, stages = 4, unroll = 1, max_part_tokens = 18>}
      : memref<?x?xbf16>, memref<?x4xf32>, memref<?xi32>, memref<?x?xbf16>
        -> memref<?x?xbf16>, memref<?x4xf32>, memref<?x?xf32>
  return
}

// -----

// A tiling whose vector is not a power of two.
func.func @tiling_vector(%x: memref<?x?xbf16>, %w: memref<?x4xf32>, %cu: memref<?xi32>, %y: memref<?x?xbf16>, %n: index) {
  // expected-error @+2 {{vector_channels (6) must be a power of two up to 16}}
  cake.conv1d_fwd %x, %w, %cu into %y parts %n {activation = #cake.activation<silu>, width = 4 : i64,
      tiling = #cake.tiling<vector_channels = 6, block_threads = 128, stages = 4, unroll = 1>}
      : memref<?x?xbf16>, memref<?x4xf32>, memref<?xi32> -> memref<?x?xbf16>
  return
}

// -----

// dy has the tokens' shape.
func.func @dy_shape(%x: memref<?x16xbf16>, %w: memref<?x4xf32>, %cu: memref<?xi32>, %dy: memref<?x8xbf16>,
                    %dx: memref<?x16xbf16>, %dw: memref<?x4xf32>, %p: memref<?x?xf32>) {
  // expected-error @+1 {{'dy' has shape ?x8 but 'x' has shape ?x16}}
  cake.conv1d_bwd %x, %w, %cu, %dy into %dx, %dw partials %p
      {activation = #cake.activation<silu>, silu_grad = #cake.silu_grad<bf16>, width = 4 : i64}
      : memref<?x16xbf16>, memref<?x4xf32>, memref<?xi32>, memref<?x8xbf16>
        -> memref<?x16xbf16>, memref<?x4xf32>, memref<?x?xf32>
  return
}

// -----

// dweight has the weight's shape.
func.func @dweight_shape(%x: memref<?x?xbf16>, %w: memref<?x4xf32>, %cu: memref<?xi32>, %dy: memref<?x?xbf16>,
                         %dx: memref<?x?xbf16>, %dw: memref<?x2xf32>, %p: memref<?x?xf32>) {
  // expected-error @+1 {{'dweight' has shape ?x2 but 'weight' has shape ?x4}}
  cake.conv1d_bwd %x, %w, %cu, %dy into %dx, %dw partials %p
      {activation = #cake.activation<silu>, silu_grad = #cake.silu_grad<bf16>, width = 4 : i64}
      : memref<?x?xbf16>, memref<?x4xf32>, memref<?xi32>, memref<?x?xbf16>
        -> memref<?x?xbf16>, memref<?x2xf32>, memref<?x?xf32>
  return
}

// -----

// A bias gradient without a bias.
func.func @dbias_without_bias(%x: memref<?x?xbf16>, %w: memref<?x4xf32>, %cu: memref<?xi32>, %dy: memref<?x?xbf16>,
                              %dx: memref<?x?xbf16>, %dw: memref<?x4xf32>, %db: memref<?xf32>, %p: memref<?x?xf32>) {
  // expected-error @+1 {{'dbias' must be given exactly when 'bias' is}}
  cake.conv1d_bwd %x, %w, %cu, %dy into %dx, %dw, %db : memref<?xf32> partials %p
      {activation = #cake.activation<silu>, silu_grad = #cake.silu_grad<bf16>, width = 4 : i64}
      : memref<?x?xbf16>, memref<?x4xf32>, memref<?xi32>, memref<?x?xbf16>
        -> memref<?x?xbf16>, memref<?x4xf32>, memref<?x?xf32>
  return
}

// -----

// dbias has the bias's shape.
func.func @dbias_shape(%x: memref<?x?xbf16>, %w: memref<?x4xf32>, %cu: memref<?xi32>, %dy: memref<?x?xbf16>,
                       %b: memref<16xf32>, %dx: memref<?x?xbf16>, %dw: memref<?x4xf32>, %db: memref<8xf32>,
                       %p: memref<?x?xf32>) {
  // expected-error @+1 {{'dbias' has shape 8 but 'bias' has shape 16}}
  cake.conv1d_bwd %x, %w, %cu, %dy bias %b : memref<16xf32> into %dx, %dw, %db : memref<8xf32> partials %p
      {activation = #cake.activation<silu>, silu_grad = #cake.silu_grad<bf16>, width = 4 : i64}
      : memref<?x?xbf16>, memref<?x4xf32>, memref<?xi32>, memref<?x?xbf16>
        -> memref<?x?xbf16>, memref<?x4xf32>, memref<?x?xf32>
  return
}

// -----

// fp32 SiLU' means f64 partial sums.
func.func @partials_precision(%x: memref<?x?xbf16>, %w: memref<?x4xf32>, %cu: memref<?xi32>, %dy: memref<?x?xbf16>,
                              %dx: memref<?x?xbf16>, %dw: memref<?x4xf32>, %p: memref<?x?xf32>) {
  // expected-error @+1 {{'partials' must hold 'f64' under silu_grad fp32, got 'f32'}}
  cake.conv1d_bwd %x, %w, %cu, %dy into %dx, %dw partials %p
      {activation = #cake.activation<silu>, silu_grad = #cake.silu_grad<fp32>, width = 4 : i64}
      : memref<?x?xbf16>, memref<?x4xf32>, memref<?xi32>, memref<?x?xbf16>
        -> memref<?x?xbf16>, memref<?x4xf32>, memref<?x?xf32>
  return
}

// -----

// Each partial row holds (width + 1) * C sums.
func.func @partials_columns(%x: memref<?x16xbf16>, %w: memref<?x4xf32>, %cu: memref<?xi32>, %dy: memref<?x16xbf16>,
                            %dx: memref<?x16xbf16>, %dw: memref<?x4xf32>, %p: memref<?x64xf32>) {
  // expected-error @+1 {{'partials' has 64 columns but (width + 1) * C = 80}}
  cake.conv1d_bwd %x, %w, %cu, %dy into %dx, %dw partials %p
      {activation = #cake.activation<silu>, silu_grad = #cake.silu_grad<bf16>, width = 4 : i64}
      : memref<?x16xbf16>, memref<?x4xf32>, memref<?xi32>, memref<?x16xbf16>
        -> memref<?x16xbf16>, memref<?x4xf32>, memref<?x64xf32>
  return
}

// -----

// SiLU' policies are bf16 or fp32.
func.func @unknown_policy(%x: memref<?x?xbf16>, %w: memref<?x4xf32>, %cu: memref<?xi32>, %dy: memref<?x?xbf16>,
                          %dx: memref<?x?xbf16>, %dw: memref<?x4xf32>, %p: memref<?x?xf32>) {
  cake.conv1d_bwd %x, %w, %cu, %dy into %dx, %dw partials %p
      // expected-error @+2 {{expected one of [bf16, fp32] for preactivation policy of the SiLU derivative, got: fp16}}
      // expected-error @+1 {{failed to parse Cake_SiluGradAttr parameter 'value'}}
      {activation = #cake.activation<silu>, silu_grad = #cake.silu_grad<fp16>, width = 4 : i64}
      : memref<?x?xbf16>, memref<?x4xf32>, memref<?xi32>, memref<?x?xbf16>
        -> memref<?x?xbf16>, memref<?x4xf32>, memref<?x?xf32>
  return
}

// -----

// A tile's vector divides the channels.
func.func @tile_vector(%x: memref<?x12xbf16>, %w: memref<?x4xf32>, %cu: memref<?xi32>, %y: memref<?x12xbf16>, %i: index) {
  // expected-error @+1 {{'x' has 12 channels, not a multiple of vector_channels = 8}}
  cake.fwd_tile %x, %w, %cu into %y rows [%i, %i) col %i
      {activation = #cake.activation<silu>, width = 4 : i64,
       tiling = #cake.tiling<vector_channels = 8, block_threads = 128, stages = 4, unroll = 1>}
      : memref<?x12xbf16>, memref<?x4xf32>, memref<?xi32> -> memref<?x12xbf16>
  return
}

// -----

// A backward tile's partial rows hold the policy's accumulator.
func.func @tile_partials(%x: memref<?x?xbf16>, %w: memref<?x4xf32>, %cu: memref<?xi32>, %dy: memref<?x?xbf16>,
                         %p: memref<?x?xf32>, %i: index) {
  // expected-error @+1 {{'partials' must hold 'f64' under silu_grad fp32, got 'f32'}}
  cake.bwd_tile %x, %w, %cu, %dy into %dy, %p rows [%i, %i) col %i part %i
      {activation = #cake.activation<silu>, silu_grad = #cake.silu_grad<fp32>, width = 4 : i64,
       tiling = #cake.tiling<vector_channels = 8, block_threads = 128, stages = 4, unroll = 1>}
      : memref<?x?xbf16>, memref<?x4xf32>, memref<?xi32>, memref<?x?xbf16>
        -> memref<?x?xbf16>, memref<?x?xf32>
  return
}

// -----

// The activation math is on floats.
func.func @silu_int(%v: vector<8xi32>) {
  // expected-error @+1 {{operand #0 must be floating-point-like}}
  %0 = cake.silu %v : vector<8xi32>
  return
}

// -----

// The reduction writes one bias gradient per weight row.
func.func @reduce_dbias(%p: memref<?x?xf32>, %dw: memref<16x4xf32>, %db: memref<8xf32>) {
  // expected-error @+1 {{'dbias' has 8 elements but 'dweight' has 16 rows}}
  cake.partials_reduce %p into %dw, %db : memref<8xf32> : memref<?x?xf32> -> memref<16x4xf32>
  return
}

// -----

// The reduction needs to know the width.
func.func @reduce_width(%p: memref<?x?xf32>, %dw: memref<?x?xf32>) {
  // expected-error @+1 {{'dweight' must have a static number of columns (the width)}}
  cake.partials_reduce %p into %dw : memref<?x?xf32> -> memref<?x?xf32>
  return
}

// -----

// The reduction's rows hold (width + 1) * C sums.
func.func @reduce_columns(%p: memref<?x40xf32>, %dw: memref<16x4xf32>) {
  // expected-error @+1 {{'partials' has 40 columns but (width + 1) * C = 80}}
  cake.partials_reduce %p into %dw : memref<?x40xf32> -> memref<16x4xf32>
  return
}

// -----

func.func @lane_sum_lanes(%s: f32) {
  // expected-error @+1 {{attribute 'lanes' failed to satisfy constraint}}
  %0 = cake.lane_sum %s lanes 3 : f32
  return
}
