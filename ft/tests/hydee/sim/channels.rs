//! The simulator's channels (`super`): a packet's delivery to its destination (an application message through the
//! engine's arrival hook, a control message to a process or a coordinator, a checkpoint marker), the checks made at
//! each arrival, and the engine's actions applied (control messages, replays read back from the log, log discards,
//! held sends resumed).

use std::collections::VecDeque;

use nemesis_ft::{Action, Control, CoordinatorId, Endpoint, Piggyback, Rank, Reception, Stamp, digest::digest};

use super::{AppMsg, Packet, Sim, SimResult, Trace, err};

impl Sim {
    pub(super) fn deliver(&mut self, from: Endpoint, to: Endpoint) -> SimResult<()> {
        let packet = self.channels.get_mut(&(from, to)).and_then(VecDeque::pop_front).ok_or("empty channel")?;
        match (to, packet) {
            (Endpoint::Process(p), Packet::App { pb, stamp, payload, replay, round }) => {
                let Endpoint::Process(q) = from else {
                    return Err("application message from a coordinator".into());
                };
                let stamp = Stamp::decode(&stamp).map_err(err("stamp"))?;
                self.arrive(q, p, &pb, stamp, &payload, replay, round)
            }
            (Endpoint::Process(p), Packet::Ctl(bytes)) => {
                let msg = Control::decode(&bytes).map_err(err("decode"))?;
                self.trace.push(Trace::Control { from, to, msg: msg.clone() });
                let proc_ = &mut self.procs[p as usize];
                proc_
                    .engine
                    .on_control(from, msg, &proc_.log)
                    .map_err(|e| format!("rank {p} on_control from {from}: {e}"))?;
                self.drain(p)
            }
            (Endpoint::Coordinator(c), Packet::Ctl(bytes)) => {
                let msg = Control::decode(&bytes).map_err(err("decode"))?;
                self.trace.push(Trace::Control { from, to, msg: msg.clone() });
                if let (Endpoint::Process(j), Control::OrphanCounts { counts, round }) = (from, &msg)
                    && *round == self.round
                {
                    // An orphan's phase is below its receiver's (Lemma 6.2, T:2207), once the receiver has delivered what it
                    // holds (an orphan that arrived but is not delivered has not raised it yet).
                    let held = self.procs[j as usize].app.unexpected.iter().map(|m| m.phase).max().unwrap_or(0);
                    let phase = self.procs[j as usize].engine.phase().max(held);
                    if let Some(&(op, _)) = counts.iter().find(|(op, _)| *op >= phase) {
                        return Err(format!("rank {j} reports an orphan of phase {op} at phase {phase}"));
                    }
                }
                self.coordinators[c as usize]
                    .on_control(from, msg)
                    .map_err(|e| format!("coordinator {c} from {from}: {e}"))?;
                self.drain_coordinator(c);
                Ok(())
            }
            (Endpoint::Process(p), Packet::Mark { generation, stage }) => {
                let Endpoint::Process(q) = from else { return Err("marker from a coordinator".into()) };
                self.mark(q, p, generation, stage);
                Ok(())
            }
            (Endpoint::Coordinator(_), Packet::App { .. } | Packet::Mark { .. }) => {
                Err("application message to a coordinator".into())
            }
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn arrive(
        &mut self,
        q: Rank,
        p: Rank,
        pb: &[u8; 12],
        stamp: Stamp,
        payload: &[u8],
        replay: bool,
        round: u64,
    ) -> SimResult<()> {
        let pb = Piggyback::decode(pb).map_err(err("piggyback"))?;
        let mut msg = AppMsg::decode(payload)?;
        if msg.id.0 != q {
            return Err(format!("message {:?} arrived on the channel from {q}", msg.id));
        }
        let engine = &mut self.procs[p as usize].engine;
        let verdict = if self.cfg.stamps {
            engine.on_receive_stamped(q, pb, stamp, Some(digest(&[], payload)))
        } else {
            engine.on_receive(q, pb)
        }
        .map_err(|e| format!("rank {p} on_receive from {q}: {e}"))?;
        let id = msg.id;
        match verdict {
            Reception::Deliver(delivery) => {
                self.trace.push(Trace::Arrive { rank: p, id, verdict: "deliver", replay });
                if self.procs[p as usize].app.delivered.contains(&id) {
                    return Err(format!("{id:?} delivered twice to rank {p}"));
                }
                if self.reference.dest(id) != p {
                    return Err(format!("{id:?} delivered to rank {p}, not its destination"));
                }
                if round == self.round {
                    self.check_causality(p, &msg)?;
                }
                msg.phase = delivery.phase();
                let expected = pb.phase() + u64::from(self.group(q) != self.group(p));
                if delivery.phase() != expected {
                    return Err(format!(
                        "{id:?} brings phase {} at rank {p}, Fig 6.3 says {expected}",
                        delivery.phase()
                    ));
                }
                if self.cfg.deliver_on_arrival {
                    self.procs[p as usize].engine.on_deliver(delivery);
                } else {
                    msg.delivery = Some(delivery);
                }
                let app = &mut self.procs[p as usize].app;
                app.delivered.insert(id);
                app.unexpected.push_back(msg);
            }
            Reception::Duplicate => {
                self.trace.push(Trace::Arrive { rank: p, id, verdict: "duplicate", replay });
                self.stats.duplicates += 1;
                if !self.procs[p as usize].app.delivered.contains(&id) {
                    return Err(format!("rank {p} discarded {id:?} as a duplicate but never delivered it: lost"));
                }
            }
            Reception::Stale => {
                self.trace.push(Trace::Arrive { rank: p, id, verdict: "stale", replay });
                self.stats.stale += 1;
            }
        }
        self.drain(p)
    }

    /// Theorem 6.1: every message in the causal past of `msg` has arrived at its destination's current state.
    fn check_causality(&self, at: Rank, msg: &AppMsg) -> SimResult<()> {
        for g in msg.past.iter() {
            let x = *self.reference.ids.get(g).ok_or("unknown message in a causal past")?;
            let d = self.reference.dest(x);
            if !self.procs[d as usize].app.delivered.contains(&x) {
                return Err(format!(
                    "causal order broken: {:?} arrived at rank {at} before {x:?}, in its causal past, reached rank {d}",
                    msg.id
                ));
            }
        }
        Ok(())
    }

    /// Applies a process's actions.
    pub(super) fn drain(&mut self, p: Rank) -> SimResult<()> {
        while let Some(a) = self.procs[p as usize].engine.poll_action() {
            match a {
                // The held-back generation (`sim/markers.rs`).
                Action::Control { to: Endpoint::Process(j), msg }
                    if self.cfg.markers
                        && self.cfg.hold_back
                        && matches!(msg, Control::Ack { .. } | Control::Checkpointed { .. }) =>
                {
                    self.procs[p as usize].ckpt.defer(j, msg);
                }
                Action::Control { to, msg } => {
                    self.push(Endpoint::Process(p), to, Packet::Ctl(msg.encode()));
                    self.trace.push(Trace::ControlSent { from: Endpoint::Process(p), to, msg });
                }
                Action::Replay { to, piggyback } => {
                    let mut payload = Vec::new();
                    let (logged, stamp) = self.procs[p as usize]
                        .log
                        .read_stamped(to, piggyback.date(), &mut payload)
                        .map_err(|e| format!("rank {p} replay to {to}: {e}"))?;
                    if self.cfg.stamps && !stamp.is_some() {
                        return Err(format!("rank {p} replays an unstamped entry to {to}"));
                    }
                    if logged.phase() != piggyback.phase() {
                        return Err(format!(
                            "rank {p} replays with phase {} a message logged in {}",
                            piggyback.phase(),
                            logged.phase()
                        ));
                    }
                    let id = AppMsg::decode(&payload)?.id;
                    self.stats.replays += 1;
                    self.trace.push(Trace::Replay { rank: p, to, id });
                    let round = self.procs[p as usize].engine.round();
                    self.push(
                        Endpoint::Process(p),
                        Endpoint::Process(to),
                        Packet::App { pb: piggyback.encode(), stamp: stamp.encode(), payload, replay: true, round },
                    );
                }
                Action::DiscardLog { to, before } => {
                    let log = &mut self.procs[p as usize].log;
                    log.discard_before(to, before);
                    let remaining = log.entries(to).into_iter().map(|e| e.0).collect();
                    self.trace.push(Trace::Discard { rank: p, to, before, remaining });
                }
                // Queued non-blocking sends go at the process's next step.
                Action::ResumeSends => self.procs[p as usize].hold = false,
            }
        }
        Ok(())
    }

    pub(super) fn drain_coordinator(&mut self, c: CoordinatorId) {
        while let Some(o) = self.coordinators[c as usize].poll_outgoing() {
            self.push(Endpoint::Coordinator(c), o.to, Packet::Ctl(o.msg.encode()));
            self.trace.push(Trace::ControlSent { from: Endpoint::Coordinator(c), to: o.to, msg: o.msg });
        }
    }
}
