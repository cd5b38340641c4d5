"""hrx_fuzz_target: one fuzz target, as a corpus replay test and a libFuzzer binary."""

def hrx_fuzz_target(name, deps):
    native.cc_library(
        name = name + "_lib",
        srcs = [name + ".cc"],
        deps = deps + [":fuzz_target"],
        alwayslink = True,
    )
    native.cc_test(
        name = name + "_replay",
        deps = [name + "_lib", ":replay_main"],
        data = native.glob(["corpus/" + name + "/**"]),
        args = ["tests/fuzz/corpus/" + name],
    )

    # Linked by libFuzzer's own main: only under --config=fuzz (clang).
    native.cc_binary(
        name = name,
        deps = [name + "_lib"],
        linkopts = ["-fsanitize=fuzzer"],
        tags = ["manual"],
    )
