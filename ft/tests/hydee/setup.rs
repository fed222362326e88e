//! The set-up the hand-driven tests share (`engine.rs`, `stamps.rs`): a topology, a process of it with the default
//! configuration, a sender log that never spills, and the actions a process has queued.

use std::sync::Arc;

use nemesis_ft::{Action, Control, Endpoint, LogConfig, Process, ProcessConfig, Rank, SenderLog, Topology};

pub fn topo(groups: Vec<u32>) -> Arc<Topology> {
    Arc::new(Topology::new(groups).unwrap())
}

pub fn process(t: &Arc<Topology>, rank: Rank) -> Process {
    Process::new(t.clone(), rank, ProcessConfig::default()).unwrap()
}

/// A sender log held in memory (1 MiB, no spill directory).
pub fn log(t: &Arc<Topology>) -> SenderLog {
    SenderLog::new(t.ranks(), LogConfig { memory_limit: 1 << 20, spill_dir: None, spill_limit: None })
}

/// Every action queued, in order.
pub fn actions(p: &mut Process) -> Vec<Action> {
    std::iter::from_fn(|| p.poll_action()).collect()
}

/// The control messages among the queued actions (the others are dropped).
pub fn controls(p: &mut Process) -> Vec<(Endpoint, Control)> {
    actions(p)
        .into_iter()
        .filter_map(|a| match a {
            Action::Control { to, msg } => Some((to, msg)),
            _ => None,
        })
        .collect()
}
