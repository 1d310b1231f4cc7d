// RUN: cake-opt %s --split-input-file --verify-diagnostics --pass-pipeline="builtin.module(gpu.module(gpu.func(cake-stage-rows)),canonicalize,cse)" | FileCheck %s

// A row loop with 4 stages: the row load becomes a copy into a ring of 4
// slots per thread in workgroup memory. Four copies go out before the loop;
// iteration i waits for its own group (3 may stay in flight), reads its slot,
// computes, then refills the slot with the row of iteration i + 4. A copy for
// an iteration past the loop's end reads nothing (source size 0), and the
// copies issued past the end are drained after the loop. The slot is marked
// for cake-unroll-rows.
// CHECK-LABEL: gpu.func @staged
// CHECK-SAME: (%[[X:.*]]: memref<?x?xbf16>, %[[Y:.*]]: memref<?x?xbf16>, %[[FIRST:.*]]: index, %[[END:.*]]: index)
// CHECK-SAME: workgroup(%[[RING:.*]] : memref<4x1x64x8xbf16, #gpu.address_space<workgroup>>)
// CHECK: %[[TID:.*]] = gpu.thread_id x
// CHECK-COUNT-4: nvgpu.device_async_copy %[[X]][%{{.*}}, %{{.*}}], %[[RING]][%{{.*}}, %{{.*}}, %[[TID]], %{{.*}}], 8, %{{.*}} {bypassL1}
// CHECK: scf.for %[[T:.*]] = %[[FIRST]] to %[[END]]
// CHECK-NEXT: nvvm.cp.async.wait.group 3
// CHECK: %[[ROW:.*]] = vector.load %[[RING]][%{{.*}}, %{{.*}}, %[[TID]], %{{.*}}]
// CHECK: vector.store %[[ROW]], %[[Y]][%[[T]], %{{.*}}]
// CHECK: %[[AHEAD:.*]] = arith.addi %[[T]], %c4
// CHECK: %[[SLOT:.*]] = arith.remui %{{.*}}, %c4 {cake.ring_slot}
// CHECK: %[[EXISTS:.*]] = arith.cmpi slt, %[[AHEAD]], %[[END]]
// CHECK: %[[SIZE:.*]] = arith.select %[[EXISTS]], %c8, %c0
// CHECK: nvgpu.device_async_copy %[[X]][%[[AHEAD]], %{{.*}}], %[[RING]][%[[SLOT]], {{.*}}], 8, %[[SIZE]]
// CHECK-NEXT: nvvm.cp.async.commit.group
// CHECK: }
// CHECK-NEXT: nvvm.cp.async.wait.group 0
// CHECK-NOT: vector.load %[[X]]
gpu.module @kernels {
  gpu.func @staged(%x: memref<?x?xbf16>, %y: memref<?x?xbf16>, %first: index, %end: index)
      kernel attributes {known_block_size = array<i32: 64, 1, 1>} {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    scf.for %t = %first to %end step %c1 {
      %row = vector.load %x[%t, %c0] : memref<?x?xbf16>, vector<8xbf16>
      vector.store %row, %y[%t, %c0] : memref<?x?xbf16>, vector<8xbf16>
    } {cake.row_loop = #cake.tiling<vector_channels = 8, block_threads = 64, stages = 4, unroll = 1>}
    gpu.return
  }
}

// -----

// A row load under a condition, with zeros otherwise (RowBuilder::loadRowIf):
// one copy whose source size is 0 where the condition fails, so that it reads
// nothing and fills the slot with zeros.
// CHECK-LABEL: gpu.func @guarded
// CHECK-SAME: %[[X:[a-z0-9]+]]: memref<?x?xbf16>, {{.*}}%[[S:[a-z0-9]+]]: index)
// CHECK: scf.for
// CHECK-NOT: scf.if
// CHECK: %[[AHEAD:.*]] = arith.addi %{{.*}}, %c2
// CHECK-DAG: %[[INLOOP:.*]] = arith.cmpi slt, %[[AHEAD]], %{{.*}}
// CHECK-DAG: %[[INX:.*]] = arith.cmpi slt, %[[AHEAD]], %[[S]]
// CHECK: %[[BOTH:.*]] = arith.andi %[[INLOOP]], %[[INX]]
// CHECK: %[[SIZE:.*]] = arith.select %[[BOTH]], %c8, %c0
// CHECK: nvgpu.device_async_copy %[[X]][%[[AHEAD]], %{{.*}}], {{.*}}, 8, %[[SIZE]]
gpu.module @kernels {
  gpu.func @guarded(%x: memref<?x?xbf16>, %y: memref<?x?xbf16>, %first: index, %end: index, %s: index)
      kernel attributes {known_block_size = array<i32: 64, 1, 1>} {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %zero = arith.constant dense<0.0> : vector<8xbf16>
    scf.for %t = %first to %end step %c1 {
      %exists = arith.cmpi slt, %t, %s : index
      %row = scf.if %exists -> (vector<8xbf16>) {
        %read = vector.load %x[%t, %c0] : memref<?x?xbf16>, vector<8xbf16>
        scf.yield %read : vector<8xbf16>
      } else {
        scf.yield %zero : vector<8xbf16>
      }
      vector.store %row, %y[%t, %c0] : memref<?x?xbf16>, vector<8xbf16>
    } {cake.row_loop = #cake.tiling<vector_channels = 8, block_threads = 64, stages = 2, unroll = 1>}
    gpu.return
  }
}

// -----

// The first rows' copies go out before the set-up the loop waits for but they
// do not (here a load the loop body uses), as early as their operands allow.
// CHECK-LABEL: gpu.func @prologue_first
// CHECK: %[[TID:.*]] = gpu.thread_id x
// CHECK-COUNT-2: nvgpu.device_async_copy
// CHECK: memref.load
// CHECK: scf.for
gpu.module @kernels {
  gpu.func @prologue_first(%x: memref<?x?xbf16>, %y: memref<?x?xbf16>, %cu: memref<?xindex>,
                           %first: index, %end: index)
      kernel attributes {known_block_size = array<i32: 64, 1, 1>} {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %col = memref.load %cu[%c0] : memref<?xindex>
    scf.for %t = %first to %end step %c1 {
      %row = vector.load %x[%t, %c0] : memref<?x?xbf16>, vector<8xbf16>
      vector.store %row, %y[%t, %col] : memref<?x?xbf16>, vector<8xbf16>
    } {cake.row_loop = #cake.tiling<vector_channels = 8, block_threads = 64, stages = 2, unroll = 1>}
    gpu.return
  }
}

// -----

// Loads from workgroup memory and loops without stages are left alone.
// CHECK-LABEL: gpu.func @unstaged
// CHECK-NOT: nvgpu.device_async_copy
// CHECK-NOT: nvvm.cp.async
gpu.module @kernels {
  gpu.func @unstaged(%x: memref<?x?xbf16>, %y: memref<?x?xbf16>, %n: index)
      workgroup(%buf : memref<64x8xbf16, #gpu.address_space<workgroup>>)
      kernel attributes {known_block_size = array<i32: 64, 1, 1>} {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    scf.for %t = %c0 to %n step %c1 {
      %row = vector.load %x[%t, %c0] : memref<?x?xbf16>, vector<8xbf16>
      vector.store %row, %y[%t, %c0] : memref<?x?xbf16>, vector<8xbf16>
    } {cake.row_loop = #cake.tiling<vector_channels = 8, block_threads = 64, stages = 0, unroll = 1>}
    scf.for %t = %c0 to %n step %c1 {
      %row = vector.load %buf[%t, %c0] : memref<64x8xbf16, #gpu.address_space<workgroup>>, vector<8xbf16>
      vector.store %row, %y[%t, %c0] : memref<?x?xbf16>, vector<8xbf16>
    } {cake.row_loop = #cake.tiling<vector_channels = 8, block_threads = 64, stages = 4, unroll = 1>}
    gpu.return
  }
}

// -----

// The ring must fit the static shared memory.
gpu.module @kernels {
  // expected-error @+1 {{cake-stage-rows: 65536 bytes of staging exceed the 49152 bytes of static shared memory; use fewer stages or rows}}
  gpu.func @too_deep(%x: memref<?x?xbf16>, %y: memref<?x?xbf16>, %n: index)
      kernel attributes {known_block_size = array<i32: 256, 1, 1>} {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    scf.for %t = %c0 to %n step %c1 {
      %row = vector.load %x[%t, %c0] : memref<?x?xbf16>, vector<8xbf16>
      vector.store %row, %y[%t, %c0] : memref<?x?xbf16>, vector<8xbf16>
    } {cake.row_loop = #cake.tiling<vector_channels = 8, block_threads = 256, stages = 16, unroll = 1>}
    gpu.return
  }
}
