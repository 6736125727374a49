#!/usr/bin/env bash
# tier: parallel
# The container recipes of examples/containers/ (docs/containers.md "Containers"): the
# Kubernetes DaemonSet and Deployment and the compose file parse, and say what
# the recipe says (the node's /run/sluice mounted at /run/sluice by the daemon
# and by every application, the shim and the config read from it, no hostIPC);
# the config they ship is valid; and the daemon's container script, run in a pod
# of the test's own (namespaces, no Docker here) with another pod as the
# application, shapes the application's requests at the destination.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/pod_lib.sh"

[ "$(id -u)" -eq 0 ] || fail "needs root (namespaces)"
EX="$ROOT/examples/containers"
python3 - "$EX" <<'PY' || fail "the container recipes do not say what docs/containers.md says"
import sys, yaml
ex = sys.argv[1]
docs = list(yaml.safe_load_all(open(ex + "/sluice-daemonset.yaml")))
kinds = {d["kind"]: d for d in docs}
assert set(kinds) == {"DaemonSet", "Deployment"}, kinds.keys()
for kind, d in kinds.items():
    assert d["apiVersion"] == "apps/v1", (kind, d["apiVersion"])
    spec = d["spec"]["template"]["spec"]
    assert spec["containers"] and not spec.get("hostIPC") and not spec.get("hostPID"), kind
    vols = {v["name"]: v for v in spec["volumes"]}
    assert vols["run-sluice"]["hostPath"]["path"] == "/run/sluice", kind
    c = spec["containers"][0]
    mounts = {m["name"]: m["mountPath"] for m in c["volumeMounts"]}
    assert mounts["run-sluice"] == "/run/sluice", kind
    env = {e["name"]: e["value"] for e in c.get("env", [])}
    if kind == "Deployment":
        assert env["LD_PRELOAD"] == "/run/sluice/libsluice.so", env
        assert env["SLUICE_CONFIG"] == "/run/sluice/sluice.ini", env
    else:
        assert c["command"] == ["/usr/local/bin/sluice-container-daemon"], c["command"]
compose = yaml.safe_load(open(ex + "/compose.yaml"))
svcs = compose["services"]
assert "sluiced" in svcs and len(svcs) >= 3, svcs.keys()
for name, s in svcs.items():
    assert "/run/sluice:/run/sluice" in s["volumes"], name
    if name != "sluiced":
        assert s["environment"]["LD_PRELOAD"] == "/run/sluice/libsluice.so", name
        assert s["environment"]["SLUICE_CONFIG"] == "/run/sluice/sluice.ini", name
print("recipes: %s; compose services %s" % (", ".join(sorted(kinds)), ", ".join(sorted(svcs))))
PY
grep -q "^COPY examples/containers/daemon.sh /usr/local/bin/sluice-container-daemon$" "$EX/Dockerfile" ||
	fail "the Dockerfile does not install the daemon's script where the recipes run it"
sh -n "$EX/daemon.sh" || fail "daemon.sh does not parse"
"$SLUICE" check -c "$EX/sluice.ini" >/dev/null || fail "the recipes' config: $("$SLUICE" check -c "$EX/sluice.ini" 2>&1)"

# --- the daemon's script in a pod, an application in another ---
start_server
mkdir -p "$T/node-run-sluice" "$T/etc"
sed -e "s|^match .*|match    = 127.0.0.1:$PORT|" "$EX/sluice.ini" >"$T/etc/sluice.ini"
mkdir -p "$T/bin"
ln -s "$SLUICED" "$T/bin/sluiced"
pod "$T/node-run-sluice" env PATH="$T/bin:/usr/bin:/bin" SLUICE_LIB="$SHIM" SLUICE_CONFIG="$T/etc/sluice.ini" \
	sh "$EX/daemon.sh" 2>"$T/daemon.err" &
BG_PIDS+=($!)
for _ in $(seq 100); do [ -S "$T/node-run-sluice/sluice.segment" ] && break; sleep 0.1; done
[ -S "$T/node-run-sluice/sluice.segment" ] || fail "the daemon's pod serves no segment: $(cat "$T/daemon.err")"
[ -f "$T/node-run-sluice/libsluice.so" ] && [ -f "$T/node-run-sluice/sluice.ini" ] ||
	fail "the daemon's pod did not leave the shim and the config for the applications: $(ls "$T/node-run-sluice")"
start_witness request "$PORT" "$T/requests"
pod "$T/node-run-sluice" env LD_PRELOAD=/run/sluice/libsluice.so SLUICE_CONFIG=/run/sluice/sluice.ini \
	bash -c 'for i in $(seq 8); do curl -s -o /dev/null --max-time 30 "$1/w$i" || exit 1; done' sh \
	"http://127.0.0.1:$PORT" || fail "the application's pod failed"
witnessed "$T/requests" --interval-ms 200 --expect 8 --what "requests of an application pod, daemon in a pod" ||
	fail "the recipe did not shape the application"
echo "ok"
