//! Helpers for the loom models of `nemesis-shm` (the models are in `tests/`, built only with
//! `RUSTFLAGS="--cfg loom"`). Every model sets its own bounds with [`builder`], so the suite runs
//! in minutes whatever the environment says.

#[cfg(loom)]
pub use model::*;

#[cfg(loom)]
mod model {
    use loom::sync::atomic::{AtomicBool, AtomicU64, Ordering::*};
    use nemesis_shm::arena::CellRef;
    use nemesis_shm::{Arena, HeapArena, Liveness, Params, Queue, QueueShared};

    /// A model builder with a preemption bound of `bound` (2–3 keeps each model to seconds).
    pub fn builder(bound: usize) -> loom::model::Builder {
        let mut b = loom::model::Builder::new();
        b.preemption_bound = Some(bound);
        b
    }

    /// Small cells (256 B) and one-slot fastboxes of 64 B: models stay small. `fastboxes` per
    /// receiver (0: none), `cells` per rank.
    pub fn params(fastboxes: u32, cells: u32) -> Params {
        Params {
            cell_size: 256,
            cells_per_rank: cells,
            fastbox_slots: 1,
            fastbox_slot_size: 64,
            fastboxes_per_rank: fastboxes,
            ..Params::DEFAULT
        }
    }

    /// Ranks that can be declared dead, as a launcher would after `waitpid`.
    pub struct Deaths {
        dead: Vec<AtomicBool>,
        epoch: AtomicU64,
    }

    impl Deaths {
        pub fn new(ranks: usize) -> Self {
            Deaths { dead: (0..ranks).map(|_| AtomicBool::new(false)).collect(), epoch: AtomicU64::new(0) }
        }

        /// Declares `rank` dead; called by the rank's own thread once it has stopped for good.
        pub fn kill(&self, rank: u16) {
            self.dead[rank as usize].store(true, Release);
            self.epoch.fetch_add(1, Release);
        }
    }

    impl Liveness for Deaths {
        fn death_epoch(&self) -> u64 {
            self.epoch.load(Acquire)
        }
        fn is_dead(&self, rank: u16) -> bool {
            self.dead[rank as usize].load(Acquire)
        }
    }

    /// One queue over a small heap arena.
    pub struct OneQueue {
        pub arena: HeapArena,
        pub shared: QueueShared,
    }

    impl OneQueue {
        pub fn new(cells: u32) -> Self {
            OneQueue { arena: HeapArena::new(cells, 64), shared: QueueShared::new() }
        }

        pub fn queue(&self) -> Queue<'_, HeapArena> {
            Queue::new(&self.shared, &self.arena, 1)
        }

        /// Cell `h` of the arena.
        pub fn cell(&self, h: u32) -> CellRef<'_> {
            self.arena.cell(h, "model cell").expect("a valid handle")
        }
    }
}

/// Counts model executions and prints the count when dropped (for sizing models).
#[cfg(loom)]
pub struct Executions(pub &'static str, pub std::sync::atomic::AtomicUsize);

#[cfg(loom)]
impl Executions {
    pub fn hit(&self) {
        self.1.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }
    pub fn report(&self) {
        eprintln!("{}: {} executions", self.0, self.1.load(std::sync::atomic::Ordering::Relaxed));
    }
}
