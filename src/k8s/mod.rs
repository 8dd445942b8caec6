//! `volley k8s`: a sharded run as a Kubernetes Indexed Job.
//!
//! `manifest` prints the objects (a ConfigMap with the plan file, or the
//! run's wrk script, when there is one, and the Job whose pod I runs
//! `--shard I/N`, streaming its intervals on stdout); `run` applies them through the user's own
//! `kubectl`, follows every pod's stream live ([`logs`]), collects each
//! index's report, merges them and deletes the Job ([`kubectl`]). Talking to the cluster through
//! kubectl, rather than an API client crate, reuses the credentials,
//! contexts and plugins users already have configured, and keeps a large
//! dependency out of a load generator.

pub mod kubectl;
pub mod logs;
mod yaml;

use crate::cli::{Cli, Command, K8sOptions};
use clap::Parser;
use serde_json::{Value, json};
use std::time::SystemTime;

/// Where a plan file and its companions are mounted in the pods.
const PLAN_DIR: &str = "/plan";

/// The label that ties a run's Job and pods together.
pub const RUN_LABEL: &str = "volley.dev/run";

/// What the pods of one run get.
#[derive(Debug)]
pub struct JobSpec {
    pub name: String,
    pub shards: u32,
    /// The manifests, in apply order.
    pub objects: Vec<Value>,
    /// The Secret holding the command's words that carry a password (URLs
    /// with credentials), which the pods read from their environment. Kept
    /// out of `objects` so that no printed manifest shows a password:
    /// `volley k8s run` applies it through kubectl's stdin.
    pub credentials: Option<Credentials>,
    /// When the shards start (RFC 3339).
    pub start_at: String,
}

/// Flags that the pods' command may not carry: the Job sets them, or the
/// merge does their work.
const OWNED_FLAGS: [(&str, &str); 9] = [
    ("--shard", "the Job gives each pod its shard"),
    ("--start-at", "set --start-lead instead"),
    ("--json", "the pods always print their report as JSON"),
    ("-o", "the reports are collected from the pods' logs"),
    ("--output", "the reports are collected from the pods' logs"),
    ("--html", "give --html to volley k8s run"),
    (
        "--threshold",
        "give --threshold to volley k8s run: it checks the merged run",
    ),
    ("--spawn", "a pod cannot start the target"),
    (
        "--stream",
        "the pods stream their intervals to volley k8s run through their logs",
    ),
];

/// The Secret of a run's passwords, and how to make it by hand.
#[derive(Debug)]
pub struct Credentials {
    /// The Secret's name.
    pub name: String,
    /// The Secret object itself (it holds the passwords: never printed).
    pub secret: Value,
    /// Each key with its word masked, for the hint `manifest` prints.
    pub masked: Vec<(String, String)>,
}

impl Credentials {
    /// The kubectl command that creates the Secret, the passwords masked.
    pub fn hint(&self) -> String {
        let literals: Vec<String> = self
            .masked
            .iter()
            .map(|(key, word)| format!("--from-literal={key}='{word}'"))
            .collect();
        format!(
            "the password in the URL is not printed: create Secret {} before applying, with the real password for ***: kubectl create secret generic {} {}",
            self.name,
            self.name,
            literals.join(" ")
        )
    }
}

/// Moves every word of `command` that carries a password into a Secret:
/// the word becomes `$(VOLLEY_SECRET_N)`, which Kubernetes expands from the
/// container's environment, filled from the Secret.
fn move_passwords(run: &str, command: &mut [String]) -> (Option<Credentials>, Vec<Value>) {
    let name = format!("{run}-credentials");
    let mut data = serde_json::Map::new();
    let mut masked = Vec::new();
    let mut env = Vec::new();
    for word in command.iter_mut() {
        let shown = crate::target::mask_password(word).into_owned();
        if shown == *word {
            continue;
        }
        let key = format!("arg-{}", data.len());
        let var = format!("VOLLEY_SECRET_{}", data.len());
        env.push(json!({
            "name": var,
            "valueFrom": { "secretKeyRef": { "name": name, "key": key } },
        }));
        data.insert(
            key.clone(),
            Value::String(std::mem::replace(word, format!("$({var})"))),
        );
        masked.push((key, shown));
    }
    if data.is_empty() {
        return (None, env);
    }
    let secret = json!({
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": { "name": name, "labels": { RUN_LABEL: run } },
        "type": "Opaque",
        "stringData": data,
    });
    (Some(Credentials { name, secret, masked }), env)
}

fn dns_label(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 52
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !name.starts_with('-')
        && !name.ends_with('-')
}

/// Why the Job's manifests could not be built: a flag, or the pods'
/// command, that does not fit.
#[derive(Debug, thiserror::Error)]
pub enum K8sError {
    #[error("--shards must be at least 1")]
    NoShards,
    #[error("invalid --name '{0}': use lowercase letters, digits and '-', at most 52 characters")]
    Name(String),
    #[error(transparent)]
    StartLead(#[from] crate::plan::PlanError),
    #[error("the pods' command may not take {flag}: {why}")]
    OwnedFlag { flag: String, why: &'static str },
    /// clap's first line, without its `error: `.
    #[error("the pods' command is not a volley command: {0}")]
    NotVolley(String),
    #[error("the pods' command must be `run URL...` or `plan FILE.yml ...`")]
    NotARun,
    #[error("'{0}' has no file name")]
    NoFileName(String),
    #[error("cannot read '{0}' for the ConfigMap")]
    Read(String, #[source] std::io::Error),
    #[error(
        "--with adds files to a plan file's or a script's ConfigMap: use it with `plan FILE.yml` or `run -s FILE.lua`"
    )]
    WithoutPlan,
}

/// Builds the manifests for `opts`, starting `lead` from `now`.
pub fn build(opts: &K8sOptions, now: SystemTime) -> Result<JobSpec, K8sError> {
    if opts.shards == 0 {
        return Err(K8sError::NoShards);
    }
    if !dns_label(&opts.name) {
        return Err(K8sError::Name(opts.name.clone()));
    }
    let lead = crate::plan::parse_duration("--start-lead", &opts.start_lead)?;
    let mut command = opts.command.clone();
    // What follows `--` is a script's arguments, not volley's flags.
    let own_flags = command.iter().position(|w| w == "--").unwrap_or(command.len());
    for word in &command[..own_flags] {
        let flag = word.split('=').next().unwrap_or(word);
        if let Some((_, why)) = OWNED_FLAGS.iter().find(|(f, _)| *f == flag) {
            return Err(K8sError::OwnedFlag {
                flag: flag.to_string(),
                why,
            });
        }
    }
    // The command must be one volley accepts; checked here, not in a pod.
    let mut probe = vec!["volley".to_string()];
    probe.extend(command.iter().cloned());
    let parsed = Cli::try_parse_from(&probe).map_err(|e| {
        let text = e.render().to_string();
        K8sError::NotVolley(
            text.lines()
                .next()
                .unwrap_or("")
                .trim_start_matches("error: ")
                .to_string(),
        )
    })?;
    // A plan file, or a run's wrk script, travels in the ConfigMap.
    let plan_file = match parsed.command {
        Command::Run(args) => args.script,
        Command::Plan(args) => Some(args.file),
        _ => return Err(K8sError::NotARun),
    };
    let (credentials, secret_env) = move_passwords(&opts.name, &mut command);
    let start_at = humantime::format_rfc3339_seconds(now + lead).to_string();
    let mut objects = Vec::new();
    let mut mounts = Vec::new();
    let mut volumes = Vec::new();
    if let Some(file) = &plan_file {
        let mut data = serde_json::Map::new();
        for path in std::iter::once(file).chain(&opts.with) {
            let name = path
                .file_name()
                .and_then(|n| n.to_str())
                .ok_or_else(|| K8sError::NoFileName(path.display().to_string()))?;
            let text =
                std::fs::read_to_string(path).map_err(|e| K8sError::Read(path.display().to_string(), e))?;
            data.insert(name.to_string(), Value::String(text));
        }
        let position = command[..own_flags]
            .iter()
            .position(|w| std::path::Path::new(w) == file.as_path());
        if let (Some(i), Some(name)) = (position, file.file_name().and_then(|n| n.to_str())) {
            command[i] = format!("{PLAN_DIR}/{name}");
        }
        objects.push(json!({
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": { "name": format!("{}-plan", opts.name), "labels": { RUN_LABEL: opts.name } },
            "data": data,
        }));
        mounts.push(json!({ "name": "plan", "mountPath": PLAN_DIR, "readOnly": true }));
        volumes.push(json!({ "name": "plan", "configMap": { "name": format!("{}-plan", opts.name) } }));
    } else if !opts.with.is_empty() {
        return Err(K8sError::WithoutPlan);
    }
    // The Job's own flags go before a script's arguments.
    let script_args = command.split_off(own_flags.min(command.len()));
    let mut args = command;
    args.extend([
        "--shard".to_string(),
        format!("$(JOB_COMPLETION_INDEX)/{}", opts.shards),
        "--start-at".to_string(),
        start_at.clone(),
        "--json".to_string(),
        // The intervals as JSON lines on stdout, before the report (the
        // same pipe keeps them apart): `volley k8s run` follows them live.
        "--stream".to_string(),
        "-".to_string(),
    ]);
    // The shards' metric outputs share one `run` label unless the user
    // named the run.
    if !args.iter().any(|a| a == "--run-id" || a.starts_with("--run-id=")) {
        args.extend(["--run-id".to_string(), format!("{}-{start_at}", opts.name)]);
    }
    args.extend(script_args);
    let mut requests = serde_json::Map::new();
    if let Some(cpu) = &opts.cpu {
        requests.insert("cpu".to_string(), json!(cpu));
    }
    if let Some(memory) = &opts.memory {
        requests.insert("memory".to_string(), json!(memory));
    }
    let labels = json!({ RUN_LABEL: opts.name, "app.kubernetes.io/name": "volley" });
    objects.push(json!({
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": { "name": opts.name, "labels": labels },
        "spec": {
            "completionMode": "Indexed",
            "completions": opts.shards,
            "parallelism": opts.shards,
            // A failed shard is not replaced by a late copy of itself.
            "backoffLimit": 0,
            "template": {
                "metadata": { "labels": labels },
                "spec": {
                    "restartPolicy": "Never",
                    // Spread the shards over nodes where it can (a soft
                    // rule, so a one-node cluster still runs them).
                    "topologySpreadConstraints": [{
                        "maxSkew": 1,
                        "topologyKey": "kubernetes.io/hostname",
                        "whenUnsatisfiable": "ScheduleAnyway",
                        "labelSelector": { "matchLabels": { RUN_LABEL: opts.name } },
                    }],
                    "securityContext": { "runAsNonRoot": true, "runAsUser": 10001, "runAsGroup": 10001 },
                    "containers": [{
                        "name": "volley",
                        "image": opts.image,
                        "command": ["volley"],
                        "args": args,
                        "env": std::iter::once(json!({
                            "name": "JOB_COMPLETION_INDEX",
                            "valueFrom": { "fieldRef": {
                                "fieldPath": "metadata.annotations['batch.kubernetes.io/job-completion-index']"
                            } },
                        })).chain(secret_env).collect::<Vec<_>>(),
                        "resources": { "requests": requests },
                        "volumeMounts": mounts,
                    }],
                    "volumes": volumes,
                },
            },
        },
    }));
    Ok(JobSpec {
        name: opts.name.clone(),
        shards: opts.shards,
        objects,
        credentials,
        start_at,
    })
}

/// The manifests as YAML, one document per object: what `volley k8s
/// manifest` prints.
pub fn to_yaml(spec: &JobSpec) -> String {
    yaml::documents(&spec.objects)
}

/// The manifests as JSON documents, `---` between them (`volley k8s
/// manifest --output json`, and what `volley k8s run` hands kubectl, whose
/// YAML reader takes JSON as it is).
pub fn to_json(spec: &JobSpec) -> String {
    let mut out = String::new();
    for object in &spec.objects {
        out += "---\n";
        out += &serde_json::to_string_pretty(object).expect("manifests serialise");
        out += "\n";
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts(command: &[&str]) -> K8sOptions {
        K8sOptions {
            shards: 3,
            image: "volley:test".to_string(),
            name: "load".to_string(),
            cpu: Some("1".to_string()),
            memory: None,
            start_lead: "30s".to_string(),
            with: Vec::new(),
            command: command.iter().map(|s| s.to_string()).collect(),
        }
    }

    #[test]
    fn a_run_becomes_an_indexed_job() {
        let now = SystemTime::UNIX_EPOCH;
        let spec = build(&opts(&["run", "http://svc:8080/", "-n", "300"]), now).unwrap();
        assert_eq!(spec.objects.len(), 1);
        let job = &spec.objects[0];
        assert_eq!(job["spec"]["completionMode"], "Indexed");
        assert_eq!(job["spec"]["backoffLimit"], 0);
        let args = job["spec"]["template"]["spec"]["containers"][0]["args"]
            .as_array()
            .unwrap();
        let args: Vec<&str> = args.iter().map(|a| a.as_str().unwrap()).collect();
        assert_eq!(
            args,
            [
                "run",
                "http://svc:8080/",
                "-n",
                "300",
                "--shard",
                "$(JOB_COMPLETION_INDEX)/3",
                "--start-at",
                "1970-01-01T00:00:30Z",
                "--json",
                "--stream",
                "-",
                "--run-id",
                "load-1970-01-01T00:00:30Z"
            ]
        );
    }

    #[test]
    fn passwords_go_to_a_secret_the_manifests_do_not_print() {
        let spec = build(
            &opts(&["run", "http://u:pw@svc:8080/", "-n", "30"]),
            SystemTime::UNIX_EPOCH,
        )
        .unwrap();
        for printed in [to_yaml(&spec), to_json(&spec)] {
            assert!(!printed.contains("pw@"), "{printed}");
        }
        let container = &spec.objects[0]["spec"]["template"]["spec"]["containers"][0];
        assert_eq!(container["args"][1], "$(VOLLEY_SECRET_0)");
        assert_eq!(container["env"][1]["name"], "VOLLEY_SECRET_0");
        assert_eq!(
            container["env"][1]["valueFrom"]["secretKeyRef"],
            json!({ "name": "load-credentials", "key": "arg-0" })
        );
        let credentials = spec.credentials.unwrap();
        assert_eq!(credentials.secret["stringData"]["arg-0"], "http://u:pw@svc:8080/");
        let hint = credentials.hint();
        assert!(
            hint.contains("--from-literal=arg-0='http://u:***@svc:8080/'") && !hint.contains("pw@"),
            "{hint}"
        );
        let plain = build(&opts(&["run", "http://svc/"]), SystemTime::UNIX_EPOCH).unwrap();
        assert!(plain.credentials.is_none());
    }

    #[test]
    fn refuses_what_the_job_owns_or_volley_does_not_take() {
        let err = build(
            &opts(&["run", "http://svc/", "--threshold", "p99<1s"]),
            SystemTime::now(),
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("give --threshold to volley k8s run"), "{err}");
        let err = build(&opts(&["run", "http://svc/", "--bogus"]), SystemTime::now())
            .unwrap_err()
            .to_string();
        assert!(err.contains("not a volley command"), "{err}");
        let err = build(&opts(&["serve"]), SystemTime::now())
            .unwrap_err()
            .to_string();
        assert!(err.contains("must be `run"), "{err}");
        let mut bad = opts(&["run", "http://svc/"]);
        bad.name = "Bad_Name".to_string();
        assert!(
            build(&bad, SystemTime::now())
                .unwrap_err()
                .to_string()
                .contains("invalid --name")
        );
    }
}
