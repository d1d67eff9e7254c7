"""GPU targets: .cu files compiled by nvcc, and targets that exist only with CUDA.

    load("//third_party:cuda.bzl", "cuda_library", "gpu_only")

    cuda_library(
        name = "kernels",
        srcs = ["kernels.cu"],      # compiled by nvcc
        hdrs = ["kernels.h"],       # plain C++ declarations of the launchers
    )
    cc_test(name = "x_test", ..., target_compatible_with = gpu_only())

nvcc builds sm_80 and sm_90 code plus sm_90 PTX (for newer GPUs). Without a
usable toolkit (see cuda_configure.bzl) every such target is incompatible, so
`bazel build //...` and `bazel test //...` skip it.
"""

load("@local_cuda//:defs.bzl", "CUDA_AVAILABLE", "NVCC")

CUDA_ARCH_FLAGS = [
    "-gencode=arch=compute_80,code=sm_80",
    "-gencode=arch=compute_90,code=sm_90",
    "-gencode=arch=compute_90,code=compute_90",
]

def gpu_only():
    """target_compatible_with for targets that need the CUDA toolkit."""
    if CUDA_AVAILABLE:
        return []
    # A constraint no platform has: the target is skipped by `//...` patterns
    # (Bazel 4.2's bundled @platforms has no //:incompatible yet).
    return ["//third_party/cuda:toolkit_missing"]

# extra_hdrs: headers of other packages that the .cu files include (labels;
# header-only code shared with the host, e.g. //common:adam.h); the
# cc_library that provides them must be in deps too.
def cuda_library(name, srcs, hdrs = [], deps = [], nvcc_flags = [], visibility = None, testonly = False, extra_hdrs = []):
    objs = []
    for src in srcs:
        if not src.endswith(".cu"):
            fail("cuda_library: srcs must be .cu files, got " + src)
        obj = name + "_" + src[:-len(".cu")].replace("/", "_") + ".o"
        native.genrule(
            name = obj.replace(".", "_") + "_nvcc",
            srcs = [src] + hdrs + extra_hdrs,
            outs = [obj],
            cmd = " ".join([
                NVCC if NVCC else "nvcc",
                "-c -std=c++17 -O3",
                "-Xcompiler -fPIC -Xcompiler -Wall",
                "-Werror all-warnings",
                "-I. -I$(GENDIR)",
            ] + CUDA_ARCH_FLAGS + nvcc_flags + [
                "-o $@ $(location " + src + ")",
            ]),
            message = "nvcc " + src,
            target_compatible_with = gpu_only(),
            testonly = testonly,
        )
        objs.append(obj)
    native.cc_library(
        name = name,
        srcs = objs,
        hdrs = hdrs,
        deps = deps + ["@local_cuda//:cuda"],
        target_compatible_with = gpu_only(),
        visibility = visibility,
        testonly = testonly,
        linkstatic = True,
    )
