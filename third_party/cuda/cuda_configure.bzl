"""Finds the CUDA toolkit (nvcc, cudart, cuBLAS, cuDNN) for the GPU worker.

The toolkit is looked for in $CUDA_PATH, default /usr/local/cuda. The rule
writes a repository with:
  //:defs.bzl      CUDA_AVAILABLE (bool), NVCC (path), CUDA_MISSING (why not)
  //:cuda          cc_library: headers plus cudart (static when
                   libcudart_static.a exists), cuBLAS(Lt) and cuDNN
  //:BUILD         the above, empty when the toolkit is missing

When anything is missing, CUDA_AVAILABLE is False and the GPU targets (made
with cuda_library / gpu_cc_* in //third_party:cuda.bzl) are marked
incompatible, so `bazel build //...` skips them; one line says why.
"""

_REQUIRED = [
    ("bin/nvcc", "nvcc"),
    ("include/cuda_runtime.h", "CUDA runtime headers"),
    ("include/cublas_v2.h", "cuBLAS headers"),
    ("include/cudnn.h", "cuDNN headers"),
]

_LIBS = ["cudart", "cublas", "cublasLt", "cudnn"]

def _find_lib(rctx, root, lib):
    for d in ["lib64", "lib", "targets/x86_64-linux/lib"]:
        if rctx.path(root + "/" + d + "/lib" + lib + ".so").exists:
            return root + "/" + d
    return None

def _cuda_configure_impl(rctx):
    root = rctx.os.environ.get("CUDA_PATH", "/usr/local/cuda").rstrip("/")
    missing = []
    for rel, what in _REQUIRED:
        if not rctx.path(root + "/" + rel).exists:
            missing.append(what + " (" + root + "/" + rel + ")")
    libdirs = []
    for lib in _LIBS:
        d = _find_lib(rctx, root, lib)
        if d == None:
            missing.append("lib" + lib + ".so under " + root)
        elif d not in libdirs:
            libdirs.append(d)

    if missing:
        why = "CUDA toolkit not usable at CUDA_PATH=" + root + ": missing " + ", ".join(missing)
        print("GPU targets are left out of this build: " + why)
        rctx.file("defs.bzl", "CUDA_AVAILABLE = False\nNVCC = \"\"\nCUDA_ROOT = \"\"\nCUDA_MISSING = %r\n" % why)
        rctx.file("BUILD.bazel", """
package(default_visibility = ["//visibility:public"])
exports_files(["defs.bzl"])
cc_library(name = "cuda")
""")
        return

    # Headers are symlinked into the repository so that Bazel tracks them.
    rctx.symlink(root + "/include", "include")
    linkopts = []
    for d in libdirs:
        linkopts += ["-L" + d, "-Wl,-rpath," + d]

    # The CUDA runtime is linked statically when its archive is there, so
    # that a binary needs only the driver's libcuda plus cuBLAS(Lt) and cuDNN
    # at run time (see docs/GPU.md); the rest are shared libraries.
    cudart_dir = _find_lib(rctx, root, "cudart")
    if rctx.path(cudart_dir + "/libcudart_static.a").exists:
        linkopts += ["-l:libcudart_static.a", "-ldl", "-lrt", "-lpthread"]
    else:
        linkopts += ["-lcudart"]
    linkopts += ["-l" + lib for lib in _LIBS if lib != "cudart"]
    rctx.file("defs.bzl", "CUDA_AVAILABLE = True\nNVCC = %r\nCUDA_ROOT = %r\nCUDA_MISSING = \"\"\n" % (root + "/bin/nvcc", root))
    rctx.file("BUILD.bazel", """
package(default_visibility = ["//visibility:public"])
exports_files(["defs.bzl"])

# CUDA runtime, cuBLAS and cuDNN from {root}.
cc_library(
    name = "cuda",
    # The host-side headers: the top level, crt/ and nv/ (cuda_fp16.h, which
    # cublas_api.h includes, reads <nv/target>). The device-side tree cccl/
    # is only read by nvcc, which finds it itself.
    hdrs = glob(["include/*.h", "include/*.hpp", "include/crt/**", "include/nv/**"]),
    includes = ["include"],
    linkopts = {linkopts},
)
""".format(root = root, linkopts = repr(linkopts)))

cuda_configure = repository_rule(
    implementation = _cuda_configure_impl,
    environ = ["CUDA_PATH"],
    local = True,
)
