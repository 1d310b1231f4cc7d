// The forward and backward of one route (fp32 weight and bias, SiLU, bf16
// SiLU' policy) at the op level: what cake-kernel-gen builds for each route.
//
//   cake-opt causal_conv1d.mlir --cake-tile --convert-cake-to-gpu   # kernels
//   cake-opt causal_conv1d.mlir --cake-to-kernels                   # row loops
//   cake-opt causal_conv1d.mlir --cake-to-ptx                       # PTX

func.func @forward(%x: memref<?x?xbf16>, %weight: memref<?x4xf32>, %cu_seqlens: memref<?xi32>,
                   %bias: memref<?xf32>, %y: memref<?x?xbf16>, %parts: index) {
  cake.conv1d_fwd %x, %weight, %cu_seqlens bias %bias : memref<?xf32> into %y parts %parts
      {activation = #cake.activation<silu>, width = 4 : i64}
      : memref<?x?xbf16>, memref<?x4xf32>, memref<?xi32> -> memref<?x?xbf16>
  return
}

func.func @backward(%x: memref<?x?xbf16>, %weight: memref<?x4xf32>, %cu_seqlens: memref<?xi32>,
                    %bias: memref<?xf32>, %dy: memref<?x?xbf16>, %dx: memref<?x?xbf16>,
                    %partials: memref<?x?xf32>, %dweight: memref<?x4xf32>, %dbias: memref<?xf32>) {
  cake.conv1d_bwd %x, %weight, %cu_seqlens, %dy bias %bias : memref<?xf32>
      into %dx, %dweight, %dbias : memref<?xf32> partials %partials
      {activation = #cake.activation<silu>, silu_grad = #cake.silu_grad<bf16>, width = 4 : i64,
       tiling = #cake.tiling<vector_channels = 8, block_threads = 128, stages = 8, unroll = 1>}
      : memref<?x?xbf16>, memref<?x4xf32>, memref<?xi32>, memref<?x?xbf16>
        -> memref<?x?xbf16>, memref<?x4xf32>, memref<?x?xf32>
  return
}
