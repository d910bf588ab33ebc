//! Keeping a long-lived process's resident memory close to what it holds (issue 14: the warm
//! daemon's RSS with the model and 100,000 vectors).
//!
//! glibc's allocator gives threads that allocate at the same time arenas of their own (up to
//! eight per core) and keeps what is freed in each arena for later. A service's one-off work —
//! building the full-text index, reading the vectors, embedding a batch — runs on threads of
//! its own and frees tens of MB that no request reuses, so the process kept about 50 MB more
//! than it held at 100,000 records (`cairn-bench daemon`, docs/service.md). Two arenas keep the
//! reader threads from waiting on one lock, and a trim after each piece of one-off work hands
//! the freed pages back to the kernel.
//!
//! Elsewhere than glibc on Linux both are no-ops: other allocators return memory their own way.

/// Arenas glibc may make (a writer and a reader at once, or the indexer beside a request, do
/// not wait on each other; more only hoards freed memory).
#[cfg(all(target_os = "linux", target_env = "gnu"))]
const ARENAS: libc::c_int = 2;

/// Limits glibc to [`ARENAS`] arenas for the rest of the process (arenas made already stay).
/// Called when a [`crate::Service`] is made: a process that serves one brain for hours.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[allow(unsafe_code)]
pub fn limit_arenas() {
    // SAFETY: `mallopt` only sets a parameter of the allocator, under the allocator's own lock;
    // M_ARENA_MAX takes any positive count. It reads or frees no memory of ours.
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, ARENAS);
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
pub fn limit_arenas() {}

/// Hands the pages freed inside glibc's arenas back to the kernel (`malloc_trim(0)`: the top
/// of each heap and whole free pages inside it). A few ms at a heap of hundreds of MB, so it
/// runs after one-off work on a background thread, never on a request's path.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[allow(unsafe_code)]
pub fn release_freed() {
    // SAFETY: `malloc_trim` walks the allocator's free lists under its own locks and only
    // returns pages no allocation uses; any thread may call it at any time.
    unsafe {
        libc::malloc_trim(0);
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
pub fn release_freed() {}

#[cfg(test)]
mod tests {
    use super::*;

    /// Memory freed after a large one-off job is resident until the trim, and not after it:
    /// the trim gives back at least half of 64 MB freed in small pieces (which glibc keeps in
    /// its arena, unlike one large block, which it unmaps at once).
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    #[test]
    fn a_trim_hands_freed_small_allocations_back() {
        fn anon_kb() -> u64 {
            std::fs::read_to_string("/proc/self/status")
                .unwrap()
                .lines()
                .find_map(|line| line.strip_prefix("RssAnon:"))
                .and_then(|rest| rest.split_whitespace().next()?.parse().ok())
                .unwrap()
        }
        // On a thread of its own, as the service's one-off work runs, in its own arena.
        let (before, freed, after) = std::thread::spawn(|| {
            let before = anon_kb();
            // 64 MB in 4 KB pieces, each written so its pages are resident, all freed but the
            // last one, which pins the heap's top (so glibc's own trim on free cannot apply).
            let mut pieces: Vec<Vec<u8>> = (0..16_384).map(|_| vec![1u8; 4096]).collect();
            let pin = pieces.pop();
            drop(pieces);
            let freed = anon_kb();
            release_freed();
            let after = anon_kb();
            drop(pin);
            (before, freed, after)
        })
        .join()
        .unwrap();
        assert!(
            freed > before + 32 * 1024,
            "the pieces were resident: {before} kB before, {freed} kB after freeing"
        );
        assert!(
            after + 32 * 1024 < freed,
            "the trim gave back less than half: {freed} kB before it, {after} kB after"
        );
    }
}
