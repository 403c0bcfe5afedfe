//! The process's CPU time, for the checks that an idle pool costs next to
//! nothing (`tests/idle_cpu.rs`) and the compare bench's idleness lines
//! (`benches/support/idle.rs`, which includes this file by path).

use std::time::Duration;

/// User + system CPU time of this process so far.
pub fn process_cpu_time() -> Duration {
    // SAFETY: getrusage writes into the struct we pass; zeroed is a valid
    // initial value for this plain C struct.
    let usage = unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        assert_eq!(libc::getrusage(libc::RUSAGE_SELF, &mut usage), 0);
        usage
    };
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    tv(usage.ru_utime) + tv(usage.ru_stime)
}
