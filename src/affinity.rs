//! Lane CPU affinity: which CPUs this thread may run on, and pinning a thread to one.
//!
//! A lane pinned to a CPU keeps its kernel's data in that core's caches; an unpinned lane
//! moves whenever the scheduler thread or the orchestrator briefly takes its core (tiled
//! Cholesky on 2 cores, pinned / unpinned GFLOP/s per alternated pair: medians 1.04-1.12 over
//! five sets of 8-12 pairs). With tiny tasks and no spare core it is the other way round: the
//! submitting thread can no longer move to the idle core.

use crate::error::{err, Result, Status};

/// CPUs the calling thread may run on (its affinity mask), ascending.
pub fn allowed_cpus() -> std::io::Result<Vec<u32>> {
    // SAFETY: an all-zero cpu_set_t is a valid empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: `set` is a live cpu_set_t of the size passed; pid 0 is the calling thread.
    if unsafe { libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) } != 0
    {
        return Err(std::io::Error::last_os_error());
    }
    Ok((0..libc::CPU_SETSIZE as u32)
        // SAFETY: `c` is below CPU_SETSIZE, inside the set.
        .filter(|&c| unsafe { libc::CPU_ISSET(c as usize, &set) })
        .collect())
}

/// Check a lane CPU list against the calling thread's affinity mask (lane threads inherit
/// the mask of the thread that starts the worker).
pub fn check_cpus(cpus: &[i32]) -> Result<Vec<u32>> {
    if cpus.len() > 1024 {
        return err(
            Status::InvalidArgument,
            format!("{} lane CPUs (at most 1024)", cpus.len()),
        );
    }
    let allowed = allowed_cpus()
        .map_err(|x| crate::error::Error::new(Status::System, format!("sched_getaffinity: {x}")))?;
    cpus.iter()
        .map(|&c| match u32::try_from(c) {
            Ok(c) if allowed.binary_search(&c).is_ok() => Ok(c),
            _ => err(
                Status::InvalidArgument,
                format!("CPU {c} is not one this thread may run on (allowed: {allowed:?})"),
            ),
        })
        .collect()
}

/// Pin the calling thread to `cpu`.
pub fn pin_current_thread(cpu: u32) -> std::io::Result<()> {
    // SAFETY: an all-zero cpu_set_t is a valid empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: callers pass a CPU below CPU_SETSIZE (`check_cpus` took it from the mask).
    unsafe { libc::CPU_SET(cpu as usize, &mut set) };
    // SAFETY: `set` is a live cpu_set_t of the size passed; pid 0 is the calling thread.
    if unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpus_outside_the_mask_are_refused() {
        let allowed = allowed_cpus().unwrap();
        assert!(!allowed.is_empty());
        assert_eq!(check_cpus(&[allowed[0] as i32]).unwrap(), vec![allowed[0]]);
        let outside = (0..1024).find(|c| !allowed.contains(c)).unwrap();
        for bad in [-1, outside as i32, 5000] {
            let e = check_cpus(&[bad]).unwrap_err();
            assert_eq!(e.status, Status::InvalidArgument, "{bad}");
            assert!(e.msg.contains(&format!("CPU {bad}")), "{}", e.msg);
        }
    }
}
