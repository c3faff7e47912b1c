#!/usr/bin/env python3
"""The container image and the Kubernetes manifests agree with each other and with softrdmad.

usage: manifests_test.py SOURCE_DIR SOFTRDMAD VERSION

No cluster or image registry is reachable here, so what can be checked without one is checked
(docs/containers.md says what was run by hand): both manifests parse; the DaemonSet's selector
matches its pods and every mount names a volume; the daemon runs on the host's network and PID
namespace with CAP_SYS_PTRACE, on the node's address from the downward API; the daemon and the
client pod use one socket, one hostPath and one group ID, the same as the Containerfile, its
CMD and container-image.sh; the image named is this version's; and every softrdmad option the
Containerfile and the DaemonSet pass is one `softrdmad --help` lists.

Exit status: 0 pass, 1 fail, 2 usage error.
"""

import json
import re
import subprocess
import sys

import yaml

failures = []


def check(ok, what, detail=""):
    print(("ok   " if ok else "FAIL ") + what + ("" if ok or not detail else f": {detail}"))
    if not ok:
        failures.append(what)


def load(path):
    with open(path) as f:
        return {doc["kind"]: doc for doc in yaml.safe_load_all(f) if doc}


def read(path):
    with open(path) as f:
        return f.read()


def mounts_named(pod_spec):
    volumes = {v["name"]: v for v in pod_spec.get("volumes", [])}
    return [(m, volumes.get(m["name"])) for c in pod_spec["containers"] for m in c.get("volumeMounts", [])]


def socket_mount(pod_spec):
    """The hostPath and the mount path of the volume mounted where the socket lives."""
    for mount, volume in mounts_named(pod_spec):
        if volume and "hostPath" in volume and mount["mountPath"] == "/run/softrdma":
            return volume["hostPath"]["path"]
    return None


def main(argv):
    if len(argv) != 4:
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    source, softrdmad, version = argv[1:]
    daemonset = load(f"{source}/deploy/kubernetes/softrdmad-daemonset.yaml")
    pod = load(f"{source}/deploy/kubernetes/client-pod.yaml")["Pod"]
    containerfile = read(f"{source}/deploy/container/Containerfile")
    image_script = read(f"{source}/scripts/container-image.sh")
    help_text = subprocess.run([softrdmad, "--help"], capture_output=True, text=True, check=True).stdout

    ds = daemonset["DaemonSet"]
    spec = ds["spec"]["template"]["spec"]
    labels = ds["spec"]["template"]["metadata"]["labels"]
    check(ds["spec"]["selector"]["matchLabels"].items() <= labels.items(), "the DaemonSet's selector matches its pods")
    check(daemonset.get("Namespace", {}).get("metadata", {}).get("name") == ds["metadata"]["namespace"],
          "the DaemonSet's namespace is the one the file makes")
    for name, s in (("DaemonSet", spec), ("client pod", pod["spec"])):
        check(all(volume is not None for _, volume in mounts_named(s)), f"every mount of the {name} names a volume")
    check(spec.get("hostNetwork") is True and spec.get("hostPID") is True,
          "softrdmad runs on the host's network and PID namespace")
    daemon = spec["containers"][0]
    check("SYS_PTRACE" in daemon["securityContext"]["capabilities"]["add"], "softrdmad keeps CAP_SYS_PTRACE")
    args = daemon["command"] + daemon["args"]
    env = {e["name"]: e for e in daemon.get("env", [])}
    check("$(NODE_IP)" in args and env.get("NODE_IP", {}).get("valueFrom", {}).get("fieldRef", {}).get("fieldPath")
          == "status.hostIP", "softrdmad binds the node's address (downward API status.hostIP)")

    cmd = json.loads(re.search(r"^CMD (\[.*?\])$", containerfile, re.M | re.S).group(1).replace("\\\n", ""))
    for where, argv_ in (("the Containerfile's CMD", cmd), ("the DaemonSet", args)):
        options = [a for a in argv_ if a.startswith("--")]
        unknown = [o for o in options if not re.search(rf"^\s+{re.escape(o)}\b", help_text, re.M)]
        check(not unknown, f"softrdmad knows every option {where} passes", " ".join(unknown))
    socket = args[args.index("--socket") + 1]
    check(cmd[cmd.index("--socket") + 1] == socket, "the image and the DaemonSet serve one socket", socket)
    clients = " ".join(" ".join(c["command"]) for c in pod["spec"]["containers"])
    check(clients.count(f"--daemon={socket}") == 2, "both client containers attach to that socket", clients)
    check(socket_mount(spec) == socket_mount(pod["spec"]) == "/run/softrdma",
          "the daemon and the client pod share the hostPath /run/softrdma")

    gids = {
        "Containerfile": re.search(r"^ARG SOFTRDMA_GID=(\d+)$", containerfile, re.M).group(1),
        "container-image.sh": re.search(r"\bgid=(\d+)\b", image_script).group(1),
        "DaemonSet": str(spec["securityContext"]["supplementalGroups"][0]),
        "client pod": str(pod["spec"]["securityContext"]["supplementalGroups"][0]),
    }
    check(len(set(gids.values())) == 1, "one GID for group softrdma everywhere", json.dumps(gids))
    images = {c["image"] for s in (spec, pod["spec"]) for c in s["containers"]}
    check(images == {f"localhost/softrdma:{version}"}, f"the manifests name this version's image ({version})",
          " ".join(sorted(images)))

    print("all checks passed" if not failures else f"{len(failures)} check(s) failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
