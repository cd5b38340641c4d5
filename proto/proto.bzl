"""hrx_proto_library: C++ and gRPC code from .proto files with the system protoc.

Debian 12's Bazel 4 has no working proto toolchain offline, so a genrule calls
/usr/bin/protoc with /usr/bin/grpc_cpp_plugin and a cc_library compiles the result.
"""

def hrx_proto_library(name, srcs, deps = [], visibility = None):
    """Generates <name> (a cc_library) from srcs, all relative to //proto.

    Args:
      name: the cc_library name.
      srcs: .proto files in this package; imports are resolved from //proto.
      deps: other hrx_proto_library targets whose .proto files srcs import.
      visibility: visibility of the cc_library.
    """
    outs = []
    for src in srcs:
        base = src[:-len(".proto")]
        outs += [base + ".pb.h", base + ".pb.cc", base + ".grpc.pb.h", base + ".grpc.pb.cc"]

    native.genrule(
        name = name + "_gen",
        srcs = srcs + [d + "_srcs" for d in deps],
        outs = outs,
        cmd = " ".join([
            "/usr/bin/protoc",
            "--proto_path=$$(dirname $(location //proto:proto.bzl))",
            "--cpp_out=$(GENDIR)/proto",
            "--grpc_out=$(GENDIR)/proto",
            "--plugin=protoc-gen-grpc=/usr/bin/grpc_cpp_plugin",
        ] + ["$(location %s)" % s for s in srcs]),
        tools = ["//proto:proto.bzl"],
    )

    native.filegroup(
        name = name + "_srcs",
        srcs = srcs + [d + "_srcs" for d in deps],
        visibility = visibility,
    )

    native.cc_library(
        name = name,
        srcs = [o for o in outs if o.endswith(".cc")],
        hdrs = [o for o in outs if o.endswith(".h")],
        includes = ["."],
        deps = deps + ["//third_party:grpc", "//third_party:protobuf"],
        visibility = visibility,
    )
