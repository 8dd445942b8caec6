#!/usr/bin/env python3
"""A stand-in for kubectl, written for volley's tests: it runs each pod of an
Indexed Job as a local process (JOB_COMPLETION_INDEX set) instead of asking
a cluster. It knows the verbs `volley k8s run` uses: apply -f, get pods -o
json, logs, delete. State lives in $FAKE_KUBECTL_STATE; every call is
appended to its calls.log so the test can check what volley asked for.

$FAKE_KUBECTL_VOLLEY is the volley binary the pods' `volley` stands for;
$FAKE_KUBECTL_FAIL_INDEX makes that index's pod fail as a crashed pod would.
For the live view (`logs POD -f`, which follows the log as it grows):
$FAKE_KUBECTL_LATE_INDEX starts that index's pod $FAKE_KUBECTL_LATE_S
seconds late (Pending until then, its log refused like a waiting
container's); $FAKE_KUBECTL_SLOW_INDEX delays each line of that pod's
followed log by a second, as a slow log pipeline would;
$FAKE_KUBECTL_DROP_INDEX ends that pod's first `logs -f` after three lines,
as a dropped connection would.
"""
import json, os, re, subprocess, sys, time

STATE = os.environ["FAKE_KUBECTL_STATE"]
os.makedirs(STATE, exist_ok=True)


def log_call(args):
    with open(os.path.join(STATE, "calls.log"), "a") as f:
        f.write(" ".join(args) + "\n")


def documents(text):
    # The stream volley writes: `---` lines between JSON documents.
    return [json.loads(d) for d in re.split(r"^---$", text, flags=re.M) if d.strip()]


def secret_values():
    path = os.path.join(STATE, "secrets.json")
    return json.load(open(path)) if os.path.exists(path) else {}


def apply(path):
    objects = documents(sys.stdin.read() if path == "-" else open(path).read())
    for obj in objects:
        if obj["kind"] == "Secret":
            secrets = secret_values()
            secrets[obj["metadata"]["name"]] = obj["stringData"]
            json.dump(secrets, open(os.path.join(STATE, "secrets.json"), "w"))
            print("secret/applied")
        if obj["kind"] != "Job":
            continue
        spec = obj["spec"]
        assert spec["completionMode"] == "Indexed" and spec["backoffLimit"] == 0
        name = obj["metadata"]["name"]
        container = spec["template"]["spec"]["containers"][0]
        # Environment from Secrets, expanded in args as `$(NAME)` the way
        # the kubelet does; a missing Secret fails as a pod would.
        env_values = {}
        for var in container.get("env", []):
            ref = var.get("valueFrom", {}).get("secretKeyRef")
            if ref:
                env_values[var["name"]] = secret_values()[ref["name"]][ref["key"]]
        plan_dir = None
        for o in objects:
            if o["kind"] == "ConfigMap":
                plan_dir = os.path.join(STATE, "configmap")
                os.makedirs(plan_dir, exist_ok=True)
                for fname, text in o["data"].items():
                    open(os.path.join(plan_dir, fname), "w").write(text)
        for index in range(spec["completions"]):
            argv = [os.environ["FAKE_KUBECTL_VOLLEY"] if w == "volley" else w for w in container["command"]]
            for a in container["args"]:
                a = a.replace("$(JOB_COMPLETION_INDEX)", str(index))
                for var, value in env_values.items():
                    a = a.replace(f"$({var})", value)
                if plan_dir and a.startswith("/plan/"):
                    a = os.path.join(plan_dir, a[len("/plan/"):])
                argv.append(a)
            if os.environ.get("FAKE_KUBECTL_FAIL_INDEX") == str(index):
                argv = ["sh", "-c", "echo 'error: the pod crashed' >&2; exit 7"]
            pod = f"{name}-{index}-fake"
            base = os.path.join(STATE, pod)
            env = dict(os.environ, JOB_COMPLETION_INDEX=str(index))
            late = os.environ.get("FAKE_KUBECTL_LATE_INDEX") == str(index)
            delay = os.environ.get("FAKE_KUBECTL_LATE_S", "1") if late else "0"
            # Like a pod's log, stdout and stderr go to one file; the pod is
            # Pending until its container starts.
            wrapper = ('sleep ' + delay + '; touch "$0.started"; '
                       '"$@" > "$0.log" 2>&1; echo $? > "$0.rc.tmp"; mv "$0.rc.tmp" "$0.rc"')
            # Not on kubectl's own output: `apply` returns while the pods run.
            subprocess.Popen(["sh", "-c", wrapper, base] + argv, env=env, start_new_session=True,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            open(base + ".pod", "w").write(json.dumps({"name": pod, "index": index, "job": name}))
    print("job.batch/applied")


def pods(selector):
    items = []
    for entry in sorted(os.listdir(STATE)):
        if not entry.endswith(".pod"):
            continue
        pod = json.load(open(os.path.join(STATE, entry)))
        if selector != f"volley.dev/run={pod['job']}":
            continue
        rc_path = os.path.join(STATE, pod["name"] + ".rc")
        status = {"phase": "Running"}
        if not os.path.exists(os.path.join(STATE, pod["name"] + ".started")):
            status = {"phase": "Pending"}
        elif os.path.exists(rc_path):
            code = int(open(rc_path).read().strip())
            status = {"phase": "Succeeded" if code == 0 else "Failed",
                      "containerStatuses": [{"state": {"terminated": {"exitCode": code, "reason": "Completed" if code == 0 else "Error"}}}]}
        items.append({"metadata": {"name": pod["name"],
                                   "annotations": {"batch.kubernetes.io/job-completion-index": str(pod["index"])}},
                      "status": status})
    print(json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))


def follow_log(pod):
    """`logs POD -f`: the log so far, then each line as it is written, until
    the pod has ended and its log is read to the end."""
    base = os.path.join(STATE, pod)
    if not os.path.exists(base + ".started"):
        print(f'error: container "volley" in pod "{pod}" is waiting to start: ContainerCreating', file=sys.stderr)
        return 1
    index = json.load(open(base + ".pod"))["index"]
    slow = os.environ.get("FAKE_KUBECTL_SLOW_INDEX") == str(index)
    drop = os.environ.get("FAKE_KUBECTL_DROP_INDEX") == str(index) and not os.path.exists(base + ".dropped")
    held = []  # (due, line): a slow pod's lines wait a second before they are shown
    written = 0
    offset, partial = 0, b""
    while True:
        ended = os.path.exists(base + ".rc")
        with open(base + ".log", "rb") as f:
            f.seek(offset)
            chunk = f.read()
        offset += len(chunk)
        lines = (partial + chunk).split(b"\n")
        partial = lines.pop()
        now = time.monotonic()
        held.extend((now + (1.0 if slow else 0.0), line) for line in lines)
        while held and (held[0][0] <= now or (ended and not chunk)):
            sys.stdout.buffer.write(held.pop(0)[1] + b"\n")
            sys.stdout.flush()
            written += 1
            if drop and written == 3:
                open(base + ".dropped", "w").close()
                return 0
        if ended and not chunk and not held:
            sys.stdout.buffer.write(partial)
            return 0
        time.sleep(0.05)


def main(args):
    log_call(args)
    if args[:2] == ["apply", "-f"]:
        apply(args[2])
    elif args[:2] == ["get", "pods"] and args[2] == "-l" and args[4:] == ["-o", "json"]:
        pods(args[3])
    elif args[0] == "logs" and args[2:] == ["-f"]:
        return follow_log(args[1])
    elif args[0] == "logs":
        sys.stdout.write(open(os.path.join(STATE, args[1] + ".log")).read())
    elif args[0] == "delete":
        print(f"{args[1]} {args[2]} deleted")
    else:
        print(f"fake kubectl: unknown command {args}", file=sys.stderr)
        return 1
    return 0


sys.exit(main(sys.argv[1:]))
