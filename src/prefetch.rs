//! Cache-line prefetch hints. The lanes come back from a task to data its kernel evicted, and
//! the submitting thread claims slots another core last wrote: asking for all of a step's
//! lines at once overlaps misses that would otherwise be waited out one after the other.

/// One prefetch hint per x86-64 instruction; elsewhere a no-op.
macro_rules! hint {
    ($(#[$doc:meta])* $name:ident, $insn:literal) => {
        $(#[$doc])*
        #[inline]
        pub fn $name(p: *const u8) {
            // SAFETY: a prefetch is a hint that never faults, whatever the address.
            #[cfg(target_arch = "x86_64")]
            unsafe {
                std::arch::asm!(
                    concat!($insn, " byte ptr [{0}]"),
                    in(reg) p,
                    options(nostack, preserves_flags, readonly)
                )
            };
            #[cfg(not(target_arch = "x86_64"))]
            let _ = p;
        }
    };
}

hint!(
    /// Ask for the line at `p` in exclusive state: its next access is a write.
    write,
    "prefetchw"
);
hint!(
    /// Ask for the line at `p` in shared state: its next access is a read.
    read,
    "prefetcht0"
);

/// `write` for every line of `*x`.
#[inline]
pub fn write_all<T>(x: &T) {
    let p = x as *const T as *const u8;
    for off in (0..std::mem::size_of::<T>()).step_by(64) {
        write(p.wrapping_add(off));
    }
}
