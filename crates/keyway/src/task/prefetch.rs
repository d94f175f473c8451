//! A hint to the CPU to start loading cache lines a thread is about to touch, so that the
//! misses of a value another core wrote last overlap instead of stalling one after another.

/// The cache line size assumed (x86-64 and most ARM cores).
const LINE: usize = 64;

/// Starts loading the cache lines of the `len` bytes at `at` (a hint: nothing is read, no
/// fault is raised, whatever `at` points to).
#[inline(always)]
pub(crate) fn prefetch(at: *const u8, len: usize) {
    let mut line = at as usize & !(LINE - 1);
    let end = (at as usize).wrapping_add(len);
    while line < end {
        prefetch_line(line as *const u8);
        line += LINE;
    }
}

#[inline(always)]
fn prefetch_line(at: *const u8) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: `prefetcht0` is a hint (SSE, baseline on x86-64): it reads no memory the program
    // sees, raises no fault for any address, and changes no register or flag.
    unsafe {
        std::arch::asm!("prefetcht0 [{}]", in(reg) at, options(nostack, preserves_flags, readonly));
    }
    #[cfg(target_arch = "aarch64")]
    // SAFETY: `prfm` is a hint: it reads no memory the program sees, raises no fault for any
    // address, and changes no register or flag.
    unsafe {
        std::arch::asm!("prfm pldl1keep, [{}]", in(reg) at, options(nostack, preserves_flags, readonly));
    }
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    let _ = at;
}
