//! Starting a run's workers: each worker's share of the plan (its
//! connections, requests, arrivals and extra connections, split so that
//! the totals stay exact) and its thread.

use super::budget::Limit;
use super::fast_path::FastPath;
use super::worker::{self, WorkerSpec};
use super::{EngineError, Shared, WorkerMsg};
use crate::plan::{Plan, Warmup, share};
use crate::recorder::Snapshot;
use std::sync::Arc;
use std::sync::mpsc::{self, Receiver, Sender};
use std::thread::JoinHandle;
use std::time::Duration;

/// A run's started workers: their threads, their messages, and where each
/// is sent its spare snapshots.
pub struct Workers {
    pub handles: Vec<JoinHandle<()>>,
    pub rx: Receiver<WorkerMsg>,
    pub spares: Vec<Sender<Snapshot>>,
}

impl Workers {
    /// Starts one thread per worker of `plan`, sharing `shared`.
    pub fn spawn<W: FastPath>(plan: &Plan, shared: &Arc<Shared<W>>) -> Result<Workers, EngineError> {
        let threads = plan.load.threads;
        let (tx, rx) = mpsc::channel();
        let mut handles = Vec::with_capacity(threads);
        // Each worker's empty snapshots for its swap once per interval: one
        // up front, then one back from the collector for every one it sends.
        let steps = shared.workload.steps();
        let mut spares = Vec::with_capacity(threads);
        for id in 0..threads {
            let (spare_tx, spare_rx) = mpsc::channel();
            let _ = spare_tx.send(Snapshot::with_steps(steps));
            spares.push(spare_tx);
            let spec = spec_of(plan, id);
            let (shared, tx) = (shared.clone(), tx.clone());
            let handle = std::thread::Builder::new()
                .name(format!("volley-worker-{id}"))
                .spawn(move || worker::run(spec, shared, tx, spare_rx))
                .map_err(|e| EngineError::Thread("worker thread", e))?;
            handles.push(handle);
        }
        Ok(Workers { handles, rx, spares })
    }
}

/// Worker `id`'s part of `plan`.
fn spec_of(plan: &Plan, id: usize) -> WorkerSpec {
    let threads = plan.load.threads;
    let warmup = plan.stop.warmup.map(|w| match w {
        Warmup::Duration(d) => Limit {
            requests: None,
            duration: Some(d),
        },
        Warmup::Requests(n) => worker_limit(plan, id, Some(n), None),
    });
    let connections = plan.connections_of(id);
    let extra = plan
        .load
        .max_connections
        .map_or(0, |max| max.saturating_sub(plan.load.connections));
    WorkerSpec {
        id,
        connections,
        share: connections as f64 / plan.load.connections as f64,
        // Workers stripe the shard's arrivals, shards the whole run's:
        // worker w of shard I takes global arrivals (k*T + w)*N + I.
        phase: (id as f64 + plan.shard.map_or(0.0, |s| s.phase())) / threads as f64,
        workers: threads,
        may_add: share(extra as u64, threads, id) as usize,
        warmup,
        measured: worker_limit(plan, id, plan.stop.requests, plan.stop.duration),
    }
}

/// Splits a phase's request count over workers in proportion to their
/// connections, so the total stays exact.
pub(super) fn worker_limit(
    plan: &Plan,
    worker: usize,
    requests: Option<u64>,
    duration: Option<Duration>,
) -> Limit {
    let requests = requests.map(|n| {
        // Connections per worker differ by at most one; split requests the
        // same way they split connections.
        let mut before = 0u64;
        for i in 0..worker {
            before += plan.connections_of(i) as u64;
        }
        let mine = plan.connections_of(worker) as u64;
        let total = plan.load.connections as u64;
        let start = n * before / total;
        let end = n * (before + mine) / total;
        end - start
    });
    Limit { requests, duration }
}
