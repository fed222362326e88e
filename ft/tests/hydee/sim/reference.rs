//! The failure-free reference run of a program (`super`): every process's sends and final state, and the messages
//! each receives, which a simulated run with failures must reproduce.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use nemesis_ft::Rank;

use super::{MsgId, Op, Program};

pub(super) fn mix(a: u64, b: u64) -> u64 {
    let mut x = a.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ b.rotate_left(29);
    x ^= x >> 31;
    x = x.wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x ^ (x >> 27)
}

/// Value of send `n` of `rank` given the state folded from what it consumed (order-independent).
pub(super) fn value_of(rank: Rank, n: u64, acc: u64) -> u64 {
    mix(mix(rank as u64, n), acc)
}

pub(super) fn fold(acc: u64, value: u64) -> u64 {
    acc.wrapping_add(mix(value, 0x5151))
}

/// The failure-free outcome of a program.
#[derive(Clone, Debug)]
pub struct Reference {
    /// `(destination, value)` of each send, per rank.
    pub sends: Vec<Vec<(Rank, u64)>>,
    /// Final folded state per rank.
    pub acc: Vec<u64>,
    /// Global index of the first message of each rank.
    pub(super) offset: Vec<usize>,
    /// Messages each rank receives.
    pub incoming: Vec<BTreeSet<MsgId>>,
    /// Message of each global index.
    pub(super) ids: Vec<MsgId>,
}

impl Reference {
    pub(super) fn gid(&self, id: MsgId) -> usize {
        self.offset[id.0 as usize] + id.1 as usize
    }
    pub(super) fn dest(&self, id: MsgId) -> Rank {
        self.sends[id.0 as usize][id.1 as usize].0
    }
}

/// Runs `program` without failures (gates open), in a fixed order.
pub fn reference(program: &Program) -> Result<Reference, String> {
    let n = program.scripts.len();
    let mut pc = vec![0usize; n];
    let mut acc = vec![0u64; n];
    let mut sends: Vec<Vec<(Rank, u64)>> = vec![Vec::new(); n];
    let mut batch: Vec<Option<Vec<Rank>>> = vec![None; n];
    let mut queues: BTreeMap<(Rank, Rank), VecDeque<u64>> = BTreeMap::new();
    loop {
        let mut progress = false;
        for p in 0..n {
            while let Some(op) = program.scripts[p].get(pc[p]) {
                match op {
                    Op::Send(to) => {
                        if *to as usize >= n {
                            return Err(format!("rank {p} sends to unknown rank {to}"));
                        }
                        let v = value_of(p as Rank, sends[p].len() as u64, acc[p]);
                        sends[p].push((*to, v));
                        queues.entry((p as Rank, *to)).or_default().push_back(v);
                        pc[p] += 1;
                    }
                    Op::Gate(_) => pc[p] += 1,
                    Op::Recv(from) => {
                        let b = batch[p].get_or_insert_with(|| from.clone());
                        let Some(i) =
                            b.iter().position(|&s| queues.get(&(s, p as Rank)).is_some_and(|q| !q.is_empty()))
                        else {
                            break;
                        };
                        let s = b.remove(i);
                        let v = queues.get_mut(&(s, p as Rank)).and_then(VecDeque::pop_front).unwrap_or_default();
                        acc[p] = fold(acc[p], v);
                        if b.is_empty() {
                            batch[p] = None;
                            pc[p] += 1;
                        }
                    }
                }
                progress = true;
            }
        }
        if !progress {
            break;
        }
    }
    if let Some(p) = (0..n).find(|&p| pc[p] < program.scripts[p].len()) {
        return Err(format!("the program deadlocks without failures: rank {p} stuck at op {}", pc[p]));
    }
    if queues.values().any(|q| !q.is_empty()) {
        return Err("the program leaves messages unreceived".into());
    }
    let mut offset = Vec::with_capacity(n);
    let mut total = 0;
    for s in &sends {
        offset.push(total);
        total += s.len();
    }
    let mut incoming = vec![BTreeSet::new(); n];
    let mut ids = Vec::with_capacity(total);
    for (p, s) in sends.iter().enumerate() {
        for (i, (to, _)) in s.iter().enumerate() {
            incoming[*to as usize].insert((p as Rank, i as u64));
            ids.push((p as Rank, i as u64));
        }
    }
    Ok(Reference { sends, acc, offset, incoming, ids })
}
