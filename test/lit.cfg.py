# -*- Python -*-
# SPDX-License-Identifier: Apache-2.0
"""lit configuration of Cake's IR and pipeline tests."""

import os
import shutil

import lit.formats
from lit.llvm import llvm_config

config.name = "CAKE"
config.test_format = lit.formats.ShTest(not llvm_config.use_lit_shell)
config.suffixes = [".mlir", ".test"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.cake_obj_root, "test")
config.excludes = ["CMakeLists.txt", "lit.cfg.py", "lit.site.cfg.py", "python"]

config.substitutions.append(("%PATH%", config.environment["PATH"]))
llvm_config.with_system_environment(["HOME", "INCLUDE", "LIB", "TMP", "TEMP"])
llvm_config.use_default_substitutions()
# Captured names stay local to their CHECK-LABEL block.
config.environment["FILECHECK_OPTS"] = "--enable-var-scope"

llvm_config.with_environment("PATH", config.llvm_tools_dir, append_path=True)
llvm_config.with_environment("PATH", config.cake_tools_dir, append_path=True)
llvm_config.add_tool_substitutions(
    ["cake-opt", "cake-kernel-gen"], [config.cake_tools_dir]
)

# Optional tools: tests that need them say REQUIRES.
ptxas = shutil.which("ptxas", path=os.pathsep.join(
    [os.environ.get("PATH", ""), "/usr/local/cuda/bin"]))
if ptxas:
    config.available_features.add("ptxas")
    config.substitutions.append(("%ptxas", ptxas))
