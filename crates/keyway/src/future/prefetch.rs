//! A hint to the CPU to start loading cache lines a thread is about to touch, so that the
//! misses of a value another core wrote last overlap instead of stalling one after another.

/// The cache line size assumed (x86-64 and most ARM cores).
const LINE: usize = 64;

/// Starts loading the cache lines of the `len` bytes at `at` (a hint: nothing is read and no
/// fault is raised, whatever `at` points to). `len` is the size of a value or of its storage
/// (at most `isize::MAX`).
#[inline(always)]
pub(crate) fn prefetch(at: *const u8, len: usize) {
    let skew = at.addr() % LINE;
    let first = at.wrapping_sub(skew);
    let span = len.saturating_add(skew);
    let mut offset = 0;
    while offset < span {
        prefetch_line(first.wrapping_add(offset));
        offset += LINE;
    }
}

#[inline(always)]
fn prefetch_line(at: *const u8) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: `prefetcht0` is a hint (SSE, baseline on x86-64): it reads no memory the program
    // sees, raises no fault for any address, and changes no register or flag.
    unsafe {
        std::arch::asm!(
            "prefetcht0 [{}]",
            in(reg) at,
            options(nostack, preserves_flags, readonly)
        );
    }
    #[cfg(target_arch = "aarch64")]
    // SAFETY: `prfm` is a hint: it reads no memory the program sees, raises no fault for any
    // address, and changes no register or flag.
    unsafe {
        std::arch::asm!(
            "prfm pldl1keep, [{}]",
            in(reg) at,
            options(nostack, preserves_flags, readonly)
        );
    }
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    let _ = at;
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::prefetch;

    /// A hint faults on nothing: a live value, no bytes, a null pointer, an address that is no
    /// allocation's, the top of the address space.
    #[test]
    fn a_prefetch_faults_on_no_address() {
        let value = [7u8; 300];
        prefetch(value.as_ptr(), value.len());
        prefetch(value.as_ptr().wrapping_add(13), 0);
        prefetch(std::ptr::null(), 256);
        prefetch(std::ptr::dangling::<u8>(), 512);
        prefetch(std::ptr::without_provenance(usize::MAX - 40), 30);
        assert_eq!(value, [7u8; 300], "nothing written");
    }
}
