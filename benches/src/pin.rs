//! Pinning to CPUs, so that two-process measurements use the same two cores every time
//! (`sched_setaffinity`/`sched_getaffinity` through `nix`).

use nix::sched::{CpuSet, sched_getaffinity, sched_setaffinity};
use nix::unistd::Pid;

/// Pins the calling thread (and the process, if single-threaded) to `cpu`.
pub fn pin(cpu: usize) -> std::io::Result<()> {
    let mut set = CpuSet::new();
    set.set(cpu).map_err(|_| std::io::Error::new(std::io::ErrorKind::InvalidInput, format!("no CPU {cpu}")))?;
    Ok(sched_setaffinity(Pid::from_raw(0), &set)?)
}

/// The CPUs the calling thread may run on, in increasing order (those a launcher started from
/// here binds its ranks to).
pub fn allowed() -> Vec<usize> {
    match sched_getaffinity(Pid::from_raw(0)) {
        Ok(set) => (0..CpuSet::count()).filter(|&c| set.is_set(c).unwrap_or(false)).collect(),
        Err(_) => vec![0],
    }
}

/// A set of CPUs as a header prints it: `3`, or `0,1` if there are several.
pub fn describe(cpus: &[usize]) -> String {
    cpus.iter().map(usize::to_string).collect::<Vec<_>>().join(",")
}

/// The two CPUs a two-process benchmark uses: the first two this process may use (where
/// `nemesis::launch` with `Bind::Core`, `mpiexec --bind-to core` and the rank programs put ranks
/// 0 and 1), or the same one twice if only one is allowed.
pub fn pair() -> (usize, usize) {
    match allowed()[..] {
        [] => (0, 0),
        [a] => (a, a),
        [a, b, ..] => (a, b),
    }
}

/// Runs `f` on a new thread pinned to `cpu` and returns its result (the calling thread keeps
/// its own placement, so that processes started from it later are not confined to `cpu`).
pub fn on_cpu<T: Send>(cpu: usize, f: impl FnOnce() -> T + Send) -> std::io::Result<T> {
    std::thread::scope(|s| {
        s.spawn(|| {
            pin(cpu)?;
            Ok(f())
        })
        .join()
        .unwrap_or_else(|_| Err(std::io::Error::other("the measuring thread panicked")))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pair_is_allowed_and_pinning_stays_on_the_thread() {
        let (a, b) = pair();
        let before = allowed();
        assert!(before.contains(&a) && before.contains(&b));
        assert_eq!(on_cpu(a, allowed).unwrap(), vec![a]);
        assert_eq!(allowed(), before);
        assert!(pin(usize::MAX).is_err());
        assert_eq!(describe(&[3]), "3");
        assert_eq!(describe(&[0, 1]), "0,1");
    }
}
