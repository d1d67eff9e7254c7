"""C++ code generation for .proto files with the system protoc and grpc_cpp_plugin.

    load("//third_party:proto.bzl", "cc_grpc_proto")

    cc_grpc_proto(
        name = "ps_service",          # a cc_library
        src = "ps_service.proto",
        deps = [":tensor"],           # other cc_grpc_proto targets it imports
    )

One call per .proto file. Imports are written relative to the workspace root
(`import "proto/tensor.proto";`) and the generated headers are included the
same way (`#include "proto/tensor.pb.h"`). With `grpc = False` only the
message code is generated.
"""

def cc_grpc_proto(name, src, deps = [], grpc = True, visibility = None, testonly = False):
    if not src.endswith(".proto"):
        fail("cc_grpc_proto: src must be a .proto file, got " + src)
    base = src[:-len(".proto")]
    outs = [base + ".pb.h", base + ".pb.cc"]
    if grpc:
        outs += [base + ".grpc.pb.h", base + ".grpc.pb.cc"]

    # The .proto files this one can import: its own and those of its deps.
    native.filegroup(
        name = name + "_protos",
        srcs = [src] + [d + "_protos" for d in deps],
        visibility = visibility,
        testonly = testonly,
    )

    grpc_flags = ""
    if grpc:
        grpc_flags = "--plugin=protoc-gen-grpc=$$(command -v grpc_cpp_plugin) --grpc_out=$(GENDIR) "
    native.genrule(
        name = name + "_gen",
        srcs = [src, name + "_protos"],
        outs = outs,
        cmd = ("protoc --proto_path=. --cpp_out=$(GENDIR) " + grpc_flags +
               "$(location " + src + ")"),
        message = "Generating C++ code for " + src,
        testonly = testonly,
    )

    native.cc_library(
        name = name,
        srcs = [o for o in outs if o.endswith(".cc")],
        hdrs = [o for o in outs if o.endswith(".h")],
        deps = deps + ["//third_party/system:protobuf"] +
               (["//third_party/system:grpc++"] if grpc else []),
        visibility = visibility,
        testonly = testonly,
    )
