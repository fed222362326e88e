//! Pinning the calling process to one CPU, so that ping-pongs measure the same two cores every
//! time.

/// Pins the calling thread (and the process, if single-threaded) to `cpu`.
pub fn pin(cpu: usize) -> std::io::Result<()> {
    // SAFETY: `set` is a plain bit set initialised by CPU_ZERO; sched_setaffinity reads it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_ZERO(&mut set);
        libc::CPU_SET(cpu, &mut set);
        if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

/// Number of CPUs online (not only those this process may run on: it may be pinned already).
pub fn cpus() -> usize {
    // SAFETY: sysconf with a constant name.
    let n = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) };
    if n > 0 { n as usize } else { 1 }
}

/// The two CPUs a two-process benchmark uses: `0` and `1`, or `0` twice on a one-CPU machine.
pub fn pair() -> (usize, usize) {
    if cpus() >= 2 { (0, 1) } else { (0, 0) }
}
