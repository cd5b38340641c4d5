"""static_archive: one .a holding a cc_library and every library it depends on.

Bazel makes one archive per cc_library; a program built outside Bazel wants
one libhrx.a. System libraries (//third_party, link flags only) contribute no
archive and stay the linking program's business (hrx.pc's Libs.private).
"""

load("@bazel_tools//tools/cpp:toolchain_utils.bzl", "find_cpp_toolchain")

def _static_archive_impl(ctx):
    archives = []
    for linker_input in ctx.attr.dep[CcInfo].linking_context.linker_inputs.to_list():
        for library in linker_input.libraries:
            # Position-independent objects, so the archive links into PIE
            # programs (Debian's default) and into shared objects alike.
            archive = library.pic_static_library or library.static_library
            if archive:
                archives.append(archive)
    out = ctx.actions.declare_file(ctx.attr.out)
    ar = find_cpp_toolchain(ctx).ar_executable

    # An MRI script merges archives member by member, keeping members of the
    # same name from different libraries apart.
    script = "".join(["create %s\n" % out.path] +
                     ["addlib %s\n" % a.path for a in archives] +
                     ["save\n", "end\n"])
    ctx.actions.run_shell(
        inputs = archives,
        outputs = [out],
        tools = find_cpp_toolchain(ctx).all_files,
        command = "%s -M <<'EOF'\n%sEOF\n" % (ar, script),
        mnemonic = "StaticArchive",
        progress_message = "Merging %d archives into %s" % (len(archives), out.short_path),
    )
    return [DefaultInfo(files = depset([out]))]

static_archive = rule(
    implementation = _static_archive_impl,
    attrs = {
        "dep": attr.label(providers = [CcInfo]),
        "out": attr.string(mandatory = True),
        "_cc_toolchain": attr.label(default = Label("@bazel_tools//tools/cpp:current_cc_toolchain")),
    },
    toolchains = ["@bazel_tools//tools/cpp:toolchain_type"],
    incompatible_use_toolchain_transition = True,
)
