"""deploy/kubernetes/*.yaml against what hrx-device-plugin says it does.

run_manifest_test.sh sets HRX_DEVICE_PLUGIN to the built plugin. These
cases load every YAML document of the manifests, run
`hrx-device-plugin --describe` with the DaemonSet's plugin container's args,
and check that the DaemonSet, the sample pod and the plugin agree: the
resource the pod asks for is the one advertised, the sockets the plugin
uses are mounted from the host paths the kubelet and hrxd use, the tenants'
socket directories inside hrxd's container are their host paths (the
plugin hands them to the kubelet), the pod gets its socket only from the
plugin, and hrxd is probed on the socket the plugin talks to.
"""
import glob
import json
import os
import posixpath
import re
import subprocess

import pytest
import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
MANIFESTS = sorted(glob.glob(os.path.join(HERE, "*.yaml")))
DOCUMENTS = [(os.path.basename(path), doc)
             for path in MANIFESTS
             for doc in yaml.safe_load_all(open(path))
             if doc is not None]


def the(kind, name):
    found = [doc for _, doc in DOCUMENTS
             if doc.get("kind") == kind and doc["metadata"]["name"] == name]
    assert len(found) == 1, (
        f"expected one {kind} {name!r} in {[os.path.basename(p) for p in MANIFESTS]}, "
        f"found {len(found)}")
    return found[0]


DAEMONSET = the("DaemonSet", "hrxd")
NODE_POD = DAEMONSET["spec"]["template"]["spec"]
SAMPLE = the("Pod", "hrx-sample")
SAMPLE_POD = SAMPLE["spec"]


def container(pod, name):
    found = [c for c in pod["containers"] if c["name"] == name]
    assert len(found) == 1, f"expected one container {name!r}, found {len(found)}"
    return found[0]


HRXD = container(NODE_POD, "hrxd")
PLUGIN = container(NODE_POD, "device-plugin")


def flags(args, who):
    """--name=value (or a bare --name, a true bool) -> {name: value}."""
    result = {}
    for arg in args:
        match = re.fullmatch(r"--([a-z_]+)(=(.*))?", arg)
        assert match, f"{who}: argument {arg!r} is not --name=value"
        assert match.group(1) not in result, f"{who}: --{match.group(1)} given twice"
        result[match.group(1)] = match.group(3) if match.group(2) else "true"
    return result


HRXD_FLAGS = flags(HRXD.get("args", []), "hrxd container")
PLUGIN_FLAGS = flags(PLUGIN.get("args", []), "device-plugin container")


@pytest.fixture(scope="module")
def describe():
    """The plugin's own account of the container's args (--describe)."""
    binary = os.environ["HRX_DEVICE_PLUGIN"]
    command = [binary, "--describe"] + list(PLUGIN.get("args", []))
    run = subprocess.run(command, capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, (
        f"{' '.join(command)} exited {run.returncode}: {run.stderr.strip()}")
    described = json.loads(run.stdout)
    assert isinstance(described, dict), f"--describe printed {run.stdout!r}"
    return described


def volume(pod, name):
    found = [v for v in pod.get("volumes", []) if v["name"] == name]
    assert len(found) == 1, f"expected one volume {name!r} in the pod, found {len(found)}"
    return found[0]


def mount_of(pod, c, path):
    """The volumeMount of container `c` under which `path` lies (the deepest
    one), its volume, and the path's host path if the volume is a hostPath
    (else None)."""
    path = posixpath.normpath(path)
    best = None
    for m in c.get("volumeMounts", []):
        mount_path = posixpath.normpath(m["mountPath"])
        if path == mount_path or path.startswith(mount_path.rstrip("/") + "/"):
            if best is None or len(mount_path) > len(posixpath.normpath(best["mountPath"])):
                best = m
    assert best is not None, (
        f"container {c['name']!r} mounts nothing that holds {path} "
        f"(its mounts: {[m['mountPath'] for m in c.get('volumeMounts', [])]})")
    assert not best.get("subPath") and not best.get("subPathExpr"), (
        f"container {c['name']!r} mounts {best['mountPath']} with a subPath")
    v = volume(pod, best["name"])
    host = None
    if "hostPath" in v:
        rest = posixpath.relpath(path, posixpath.normpath(best["mountPath"]))
        host = posixpath.normpath(posixpath.join(v["hostPath"]["path"], rest))
    return best, v, host


def assert_host_path_is_container_path(pod, c, path, what, writable):
    m, v, host = mount_of(pod, c, path)
    assert host is not None, (
        f"{what} ({path}) in container {c['name']!r} lies under volume "
        f"{v['name']!r}, which is not a hostPath volume")
    assert host == posixpath.normpath(path), (
        f"{what}: {path} in container {c['name']!r} is {host} on the host "
        f"(volume {v['name']!r} mounted at {m['mountPath']}); they must be equal")
    if writable:
        assert not m.get("readOnly", False), (
            f"{what}: container {c['name']!r} mounts {m['mountPath']} read-only, "
            f"but it creates sockets there")
    return m, v


def hrxd_socket():
    assert "socket" in HRXD_FLAGS, "the hrxd container must pass --socket=PATH explicitly"
    return HRXD_FLAGS["socket"]


def tenant_socket_dir():
    return HRXD_FLAGS.get("tenant_socket_dir",
                          posixpath.join(posixpath.dirname(hrxd_socket()), "tenants"))


def uid_of(pod, c):
    for context in (c.get("securityContext") or {}, pod.get("securityContext") or {}):
        if "runAsUser" in context:
            return context["runAsUser"]
    return None


def test_describe_reflects_the_containers_args(describe):
    for key in ("resource_name", "kubelet_socket", "plugin_socket", "pod_resources_socket",
                "hrxd_socket", "container_socket_dir"):
        assert isinstance(describe.get(key), str) and describe[key], (
            f"--describe has no string {key!r}: {describe}")
        if key in PLUGIN_FLAGS:
            assert posixpath.normpath(describe[key]) == posixpath.normpath(PLUGIN_FLAGS[key]), (
                f"--{key}={PLUGIN_FLAGS[key]} in the container, but --describe says "
                f"{describe[key]!r}")
    assert isinstance(describe.get("unit_bytes"), int) and describe["unit_bytes"] > 0, (
        f"unit_bytes must be a positive integer: {describe.get('unit_bytes')!r}")
    assert describe["container_socket"] == posixpath.join(
        describe["container_socket_dir"], "hrxd.sock"), (
        f"container_socket {describe['container_socket']!r} is not "
        f"container_socket_dir + /hrxd.sock")
    assert describe.get("env") == "HRXD_SOCKET", (
        f"the plugin must hand pods their socket in HRXD_SOCKET (what libhrx and "
        f"import hrx read), not {describe.get('env')!r}")
    assert isinstance(describe.get("load_kernels"), bool), (
        f"load_kernels must be a bool: {describe.get('load_kernels')!r}")


# (a)
def test_the_sample_pod_asks_for_the_advertised_resource(describe):
    resource = describe["resource_name"]
    asked = False
    for c in SAMPLE_POD["containers"] + SAMPLE_POD.get("initContainers", []):
        resources = c.get("resources") or {}
        limits = resources.get("limits") or {}
        requests = resources.get("requests") or {}
        if resource not in limits:
            assert resource not in requests, (
                f"container {c['name']!r} requests {resource} without a limit: "
                f"extended resources are asked for in limits")
            continue
        count = limits[resource]
        assert isinstance(count, int) and not isinstance(count, bool) and count > 0, (
            f"container {c['name']!r}: limits[{resource!r}] must be a positive whole "
            f"number of devices, not {count!r}")
        if resource in requests:
            assert requests[resource] == count, (
                f"container {c['name']!r}: requests[{resource!r}] = "
                f"{requests[resource]!r} must equal its limit {count!r}")
        asked = True
    assert asked, f"the sample pod asks for no {resource} in any container's limits"


# (b)
def test_the_plugin_mounts_the_kubelets_directories_at_their_host_paths(describe):
    kubelet_dir = posixpath.dirname(describe["kubelet_socket"])
    plugin_dir = posixpath.dirname(describe["plugin_socket"])
    assert plugin_dir == kubelet_dir, (
        f"the plugin's socket {describe['plugin_socket']} must be in the kubelet's "
        f"socket's directory {kubelet_dir}: the kubelet is told only its base name")
    assert_host_path_is_container_path(
        NODE_POD, PLUGIN, kubelet_dir, "the kubelet's device-plugin directory",
        writable=True)
    assert_host_path_is_container_path(
        NODE_POD, PLUGIN, posixpath.dirname(describe["pod_resources_socket"]),
        "the kubelet's pod-resources directory", writable=False)


# (c)
def test_the_plugin_reaches_hrxds_socket_through_hrxds_own_volume(describe):
    directory = posixpath.dirname(describe["hrxd_socket"])
    plugin_mount, plugin_volume, plugin_host = mount_of(NODE_POD, PLUGIN, directory)
    hrxd_mount, hrxd_volume, hrxd_host = mount_of(NODE_POD, HRXD, directory)
    assert "hostPath" in hrxd_volume, (
        f"the hrxd container holds {directory} in volume {hrxd_volume['name']!r}, "
        f"not a hostPath volume")
    assert plugin_volume["name"] == hrxd_volume["name"], (
        f"the plugin reaches {directory} through volume {plugin_volume['name']!r}, "
        f"hrxd through {hrxd_volume['name']!r}: they must share one")
    assert posixpath.normpath(plugin_mount["mountPath"]) == posixpath.normpath(
        hrxd_mount["mountPath"]), (
        f"volume {hrxd_volume['name']!r} is mounted at {hrxd_mount['mountPath']} in "
        f"hrxd but at {plugin_mount['mountPath']} in the plugin")
    assert plugin_host == hrxd_host, (
        f"{directory} is {plugin_host} on the host for the plugin, {hrxd_host} for hrxd")


# (d)
def test_hrxd_listens_where_the_plugin_looks_and_its_tenants_are_at_host_paths(describe):
    assert posixpath.normpath(hrxd_socket()) == posixpath.normpath(describe["hrxd_socket"]), (
        f"hrxd listens on --socket={hrxd_socket()}, the plugin dials "
        f"{describe['hrxd_socket']}")
    assert_host_path_is_container_path(
        NODE_POD, HRXD, posixpath.dirname(hrxd_socket()), "hrxd's socket directory",
        writable=True)
    # The plugin hands the tenants' socket directories, as hrxd names them,
    # to the kubelet, which mounts them from the host.
    assert_host_path_is_container_path(
        NODE_POD, HRXD, tenant_socket_dir(),
        "hrxd's --tenant_socket_dir (the directories the kubelet mounts into pods)",
        writable=True)


def test_the_plugin_is_hrxds_admin():
    hrxd_uid, plugin_uid = uid_of(NODE_POD, HRXD), uid_of(NODE_POD, PLUGIN)
    if "config" in HRXD_FLAGS:
        pytest.skip("hrxd has a --config: its admin tenants are the config's")
    # Without --config, hrxd's own uid (and root) form the admin tenant.
    assert plugin_uid is not None, (
        "the device-plugin container must set runAsUser: it must be hrxd's admin")
    assert plugin_uid in (0, hrxd_uid), (
        f"the plugin runs as uid {plugin_uid}, hrxd as {hrxd_uid}: without --config "
        f"only hrxd's own uid and root are admins")


# (e)
def test_the_sample_pod_leaves_its_socket_to_the_plugin(describe):
    socket_dir = posixpath.normpath(describe["container_socket_dir"])
    for c in SAMPLE_POD["containers"] + SAMPLE_POD.get("initContainers", []):
        names = [e["name"] for e in c.get("env") or []]
        assert describe["env"] not in names, (
            f"container {c['name']!r} sets {describe['env']} itself; the plugin sets it")
        for m in c.get("volumeMounts") or []:
            mount_path = posixpath.normpath(m["mountPath"])
            overlaps = (mount_path == socket_dir
                        or socket_dir.startswith(mount_path.rstrip("/") + "/")
                        or mount_path.startswith(socket_dir.rstrip("/") + "/"))
            assert not overlaps, (
                f"container {c['name']!r} mounts {mount_path}, over the plugin's "
                f"{socket_dir}")
    for v in SAMPLE_POD.get("volumes") or []:
        assert "hostPath" not in v, (
            f"the sample pod mounts host path {v['hostPath']['path']}; it needs none")


# (f)
def test_hrxd_sees_pids_and_is_probed_on_its_socket(describe):
    assert NODE_POD.get("hostPID") is True, (
        "the DaemonSet needs hostPID: true: hrxd must see its clients' pids "
        "(descriptor redemption, process watches)")
    for kind in ("readinessProbe", "livenessProbe"):
        assert kind in HRXD, f"the hrxd container has no {kind}"
    for kind in ("startupProbe", "readinessProbe", "livenessProbe"):
        if kind not in HRXD:
            continue
        command = (HRXD[kind].get("exec") or {}).get("command")
        assert command, f"hrxd's {kind} must be an exec probe running hrxctl"
        assert posixpath.basename(command[0]) == "hrxctl", (
            f"hrxd's {kind} runs {command[0]!r}, not hrxctl")
        assert "health" in command[1:], f"hrxd's {kind} does not run `hrxctl health`"
        sockets = [a.split("=", 1)[1] for a in command[1:] if a.startswith("--socket=")]
        assert sockets == [describe["hrxd_socket"]] == [hrxd_socket()], (
            f"hrxd's {kind} asks {sockets}, hrxd listens on {hrxd_socket()}")


# (g)
EXTENDED_RESOURCE = re.compile(
    r"(?P<domain>[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*)"
    r"/(?P<name>[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)")


def test_the_api_and_the_resource_name_are_what_the_kubelet_accepts(describe):
    assert describe.get("api_version") == "v1beta1", (
        f"the kubelet's device plugin API is v1beta1, not {describe.get('api_version')!r}")
    resource = describe["resource_name"]
    match = EXTENDED_RESOURCE.fullmatch(resource)
    assert match, f"{resource!r} is not a qualified name domain/name"
    domain, name = match.group("domain"), match.group("name")
    assert len(domain) <= 253 and len(name) <= 63, f"{resource!r} is too long"
    assert domain != "kubernetes.io" and not domain.endswith(".kubernetes.io"), (
        f"{resource!r}: extended resources live outside the kubernetes.io domain")
    assert not resource.startswith("requests."), (
        f"{resource!r}: the requests. prefix is reserved for quotas")


def test_one_image_serves_hrxd_the_plugin_and_the_sample():
    images = {c["name"]: c["image"] for c in NODE_POD["containers"]}
    images.update({"sample/" + c["name"]: c["image"] for c in SAMPLE_POD["containers"]})
    assert len(set(images.values())) == 1, (
        f"the containers use different images: {images} (the Dockerfile builds one)")
