//! Cache-line prefetch hints. The lanes come back from a task to data its kernel evicted, and
//! the submitting thread claims slots another core last wrote: asking for all of a step's
//! lines at once overlaps misses that would otherwise be waited out one after the other.

/// Ask for the line at `p` in exclusive state: its next access is a write.
#[inline]
pub fn write(p: *const u8) {
    // SAFETY: a prefetch is a hint that never faults, whatever the address.
    #[cfg(target_arch = "x86_64")]
    unsafe {
        std::arch::asm!(
            "prefetchw byte ptr [{0}]",
            in(reg) p,
            options(nostack, preserves_flags, readonly)
        )
    };
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

/// Ask for the line at `p` in shared state: its next access is a read.
#[inline]
pub fn read(p: *const u8) {
    // SAFETY: as for `write`.
    #[cfg(target_arch = "x86_64")]
    unsafe {
        std::arch::asm!(
            "prefetcht0 byte ptr [{0}]",
            in(reg) p,
            options(nostack, preserves_flags, readonly)
        )
    };
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

/// `write` for every line of `*x`.
#[inline]
pub fn write_all<T>(x: &T) {
    let p = x as *const T as *const u8;
    for off in (0..std::mem::size_of::<T>()).step_by(64) {
        write(p.wrapping_add(off));
    }
}
