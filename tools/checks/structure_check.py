#!/usr/bin/env python3
"""Checks the layer rules and size limits the build cannot express.

Run by //tools/checks:structure_test (and directly: tools/checks/
structure_check.py [REPO_ROOT]). Each rule prints what breaks it and how to
fix it; the exit status is the number of broken rules.

  1. Nothing under daemon/core or daemon/backend includes gRPC, and neither
     includes the wire protocol's messages (the core reads only the config's,
     hrx/v1/config.pb.h); the backend includes nothing of the core or server,
     the core nothing of the server. daemon/stream (a stream's protocol and
     ring transport, hosted by hrxd and meant for executors too) includes
     nothing of the core, the server or the executor.
  2. Refusals are made through Refusal() (shared/refusal.h): no absl::*Error
     whose message starts with a reason token.
  3. No file in daemon/core passes 400 lines; no class declared there has
     more than 20 public methods.
"""
import os
import re
import sys

MAX_CORE_FILE_LINES = 400
MAX_PUBLIC_METHODS = 20


def sources(root, top):
    for folder, _, files in os.walk(os.path.join(root, top)):
        for name in sorted(files):
            if name.endswith((".h", ".cc")):
                path = os.path.join(folder, name)
                yield os.path.relpath(path, root), open(path, encoding="utf-8").read()


INCLUDE = re.compile(r'^#include [<"]([^>"]+)[>"]', re.M)


def check_layers(root):
    problems = []
    for layer, banned in (
        ("daemon/core", [r"^grpc", r"^grpcpp/", r"\.grpc\.pb\.h$",
                         r"^hrx/v1/(?!config\.pb\.h$)", r"^daemon/server/"]),
        ("daemon/backend", [r"^grpc", r"^grpcpp/", r"\.grpc\.pb\.h$",
                            r"^hrx/v1/", r"^daemon/core/", r"^daemon/server/"]),
        ("daemon/stream", [r"^daemon/core/", r"^daemon/server/",
                           r"^daemon/executor/"]),
    ):
        for path, text in sources(root, layer):
            for included in INCLUDE.findall(text):
                for pattern in banned:
                    if re.search(pattern, included):
                        problems.append(
                            f"{path} includes {included}, which the {layer} "
                            "layer may not use. Fix: move the code that needs "
                            "it up a layer (daemon/server translates the wire; "
                            "a stream engine serves daemon/stream).")
                        break
    return problems


DIRECT_REFUSAL = re.compile(
    r'absl::\w+Error\(\s*(?:absl::Str(?:Format|Cat)\(\s*)?"[a-z][a-z0-9_]*: ',
    re.S)


def check_refusals(root):
    problems = []
    for top in ("daemon", "shared", "client"):
        for path, text in sources(root, top):
            if path.endswith("_test.cc"):
                continue
            for match in DIRECT_REFUSAL.finditer(text):
                line = text.count("\n", 0, match.start()) + 1
                problems.append(
                    f"{path}:{line} makes a refusal without the catalogue. "
                    "Fix: return Refusal(Reason::k..., \"...\") "
                    "(shared/refusal.h), adding the reason there if new.")
    return problems


def public_methods(body):
    """Counts method declarations in the public sections of a class body."""
    count = 0
    public = False
    depth = 0
    statement = ""
    for line in body.split("\n"):
        stripped = line.strip()
        if depth == 0 and re.match(r"(public|private|protected):", stripped):
            public = stripped.startswith("public")
            statement = ""
            continue
        if depth == 0 and public and not stripped.startswith("//"):
            statement += " " + stripped
            if stripped.endswith((";", "{", "}")) or "{" in stripped:
                if ("(" in statement and "operator=" not in statement
                        and not re.search(r"\b(using|friend|struct|class|enum)\b",
                                          statement.split("(")[0])
                        and "= delete" not in statement):
                    count += 1
                statement = ""
        depth += line.count("{") - line.count("}")
    return count


CLASS = re.compile(r"^class (\w+)[^;{]*\{\n(.*?)^\};", re.M | re.S)


def check_sizes(root):
    problems = []
    for path, text in sources(root, "daemon/core"):
        lines = text.count("\n")
        if lines > MAX_CORE_FILE_LINES:
            problems.append(
                f"{path} has {lines} lines, the limit is "
                f"{MAX_CORE_FILE_LINES}. Fix: split it by responsibility.")
        if path.endswith(".h"):
            for match in CLASS.finditer(text):
                methods = public_methods(match.group(2))
                if methods > MAX_PUBLIC_METHODS:
                    problems.append(
                        f"{path}: class {match.group(1)} has {methods} public "
                        f"methods, the limit is {MAX_PUBLIC_METHODS}. Fix: "
                        "give a responsibility its own unit.")
    return problems


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
        os.path.dirname(os.path.realpath(__file__)), "..", "..")
    broken = 0
    for name, check in (("layers", check_layers),
                        ("refusals", check_refusals),
                        ("sizes", check_sizes)):
        problems = check(os.path.realpath(root))
        print(f"{name}: {'ok' if not problems else f'{len(problems)} problems'}")
        for problem in problems:
            print("  " + problem)
        broken += bool(problems)
    return broken


if __name__ == "__main__":
    sys.exit(main())
