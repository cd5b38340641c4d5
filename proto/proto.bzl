"""hrx_proto_library: C++ and gRPC code from .proto files with the system protoc.

Debian 12's Bazel 4 has no working proto toolchain offline, so a genrule calls
/usr/bin/protoc with /usr/bin/grpc_cpp_plugin and cc_libraries compile the
result: <name> holds the messages only (protobuf), <name>_grpc the services
(gRPC stubs), so that a layer may use the messages without gRPC.
"""

def hrx_proto_library(name, srcs, deps = [], grpc = True, visibility = None,
                      grpc_visibility = None):
    """Generates <name> (messages) and, with grpc, <name>_grpc (services).

    Args:
      name: the messages cc_library's name.
      srcs: .proto files in this package; imports are resolved from //proto.
      deps: other hrx_proto_library targets whose .proto files srcs import.
      grpc: whether to generate <name>_grpc, the services' stubs.
      visibility: visibility of the messages library.
      grpc_visibility: visibility of the services library.
    """
    pb_outs = []
    grpc_outs = []
    for src in srcs:
        base = src[:-len(".proto")]
        pb_outs += [base + ".pb.h", base + ".pb.cc"]
        grpc_outs += [base + ".grpc.pb.h", base + ".grpc.pb.cc"]
    if not grpc:
        grpc_outs = []

    native.genrule(
        name = name + "_gen",
        srcs = srcs + [d + "_srcs" for d in deps],
        outs = pb_outs + grpc_outs,
        cmd = " ".join([
            "/usr/bin/protoc",
            "--proto_path=$$(dirname $(location //proto:proto.bzl))",
            "--cpp_out=$(GENDIR)/proto",
        ] + ([
            "--grpc_out=$(GENDIR)/proto",
            "--plugin=protoc-gen-grpc=/usr/bin/grpc_cpp_plugin",
        ] if grpc else []) + ["$(location %s)" % s for s in srcs]),
        tools = ["//proto:proto.bzl"],
    )

    native.filegroup(
        name = name + "_srcs",
        srcs = srcs + [d + "_srcs" for d in deps],
        visibility = visibility,
    )

    native.cc_library(
        name = name,
        srcs = [o for o in pb_outs if o.endswith(".cc")],
        hdrs = [o for o in pb_outs if o.endswith(".h")],
        includes = ["."],
        deps = deps + ["//third_party:protobuf"],
        visibility = visibility,
    )

    if grpc:
        native.cc_library(
            name = name + "_grpc",
            srcs = [o for o in grpc_outs if o.endswith(".cc")],
            hdrs = [o for o in grpc_outs if o.endswith(".h")],
            includes = ["."],
            deps = [":" + name, "//third_party:grpc", "//third_party:protobuf"],
            visibility = grpc_visibility,
        )
