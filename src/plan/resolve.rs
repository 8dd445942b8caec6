//! The one step of making a plan that touches the world: DNS (or
//! `--connect-to`), reading `--body-file` and the TLS files, checking the
//! `--monitor-pid` process. Everything else was checked in the spec.

use super::spec::check_headers_frame;
use super::{BodySource, Plan, PlanError, Request, RunSpec, Transport};

impl RunSpec {
    /// Resolves the spec into the plan (this shard's slice with `--shard`).
    pub fn resolve(self) -> Result<Plan, PlanError> {
        let RunSpec {
            asked,
            load,
            stop,
            request,
            transport,
            reporting,
            watch,
            shard,
            start_at,
        } = self;
        let connect_to = transport
            .connect_to
            .as_deref()
            .map(crate::target::resolve_connect_to)
            .transpose()?;
        let mut targets = request.targets;
        for target in &mut targets {
            match &connect_to {
                Some(addrs) => target.addrs = addrs.clone(),
                None => target.resolve()?,
            }
        }
        let body = match request.body {
            BodySource::Inline(body) => body,
            BodySource::File(path) => read_body(
                &path,
                &format!("--body-file '{}'", path.display()),
                &request.headers,
            )?,
            BodySource::At(path) => read_body(&path, &format!("-b @{}", path.display()), &request.headers)?,
        };
        let tls = crate::tls::TlsOptions::load(&transport.tls)?;
        if let Some(pid) = watch.monitor_pid {
            crate::monitor::ProcSampler::new(pid).map_err(PlanError::MonitorPid)?;
        }
        let plan = Plan {
            request: Request {
                targets,
                method: request.method,
                headers: request.headers,
                body: body.into(),
                success: request.success,
                scenario: request.scenario,
                script: request.script,
                users: request.users,
            },
            load,
            stop,
            transport: Transport {
                timeout: transport.timeout,
                connect_timeout: transport.connect_timeout,
                connect_to: transport.connect_to,
                keepalive: transport.keepalive,
                pipeline: transport.pipeline,
                tls,
                http: transport.http,
                streams: transport.streams,
                coalesce: transport.coalesce,
                io: transport.io,
            },
            reporting,
            watch,
            shard: None,
            whole_hash: None,
            start_at,
            asked,
        };
        match shard {
            Some(shard) => plan.into_shard(shard),
            None => Ok(plan),
        }
    }
}

/// A body file's bytes (`flag` says which flag named it), framed as the
/// headers say.
fn read_body(path: &std::path::Path, flag: &str, headers: &[(String, String)]) -> Result<Vec<u8>, PlanError> {
    let body = std::fs::read(path).map_err(|error| PlanError::BodyFile {
        flag: flag.to_string(),
        error,
    })?;
    check_headers_frame(headers, &body)?;
    Ok(body)
}
