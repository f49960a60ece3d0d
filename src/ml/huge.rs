//! Memory for the models' repacked weights, in 2 MiB pages where the system offers them.
//!
//! A decode step streams every weight once, ~100 MB for SmolLM2, 25,000 pages of 4 KiB:
//! far more than the TLB holds, so every page is a TLB miss and a page walk (two levels
//! of walks in a virtual machine), and the hardware prefetchers stop at each 4 KiB edge.
//! In 2 MiB pages the same bytes are 50 pages. Linux gives a mapping such pages when it is
//! advised to (`MADV_HUGEPAGE`, honoured in transparent huge pages' `madvise` mode as well
//! as `always`); most matrices are far smaller than 2 MiB, so they are carved out of
//! shared chunks ([`Arena`]) rather than allocated one by one.
//!
//! A chunk is mapped fresh (zeroed, untouched until written) and never reuses the room
//! of a buffer that was dropped: it is unmapped when its last buffer drops. Buffers of
//! one model are allocated together while it loads and dropped together with it, so a
//! chunk seldom outlives its model. Elsewhere than on Unix the chunks come from the
//! ordinary allocator (no page advice).

use std::sync::{Arc, Mutex, Weak};

/// Bytes a chunk maps (a multiple of [`HUGE`]). A buffer of more than half of it gets a
/// chunk of its own.
const CHUNK: usize = 32 << 20;
/// The page size that the chunks are aligned to and advised for.
const HUGE: usize = 2 << 20;
/// Alignment of every buffer (a cache line, what the kernels' aligned loads need).
pub const ALIGN: usize = 64;

/// One mapping, unmapped when dropped.
struct Chunk {
    /// Start of the usable, [`HUGE`]-aligned room.
    ptr: *mut u8,
    /// Usable bytes from `ptr`.
    len: usize,
    /// What to give back when dropped.
    raw: Raw,
}

// SAFETY: a chunk is plain memory; the buffers carved out of it do not overlap and each
// is used as its owner's `&`/`&mut` borrows allow.
unsafe impl Send for Chunk {}
// SAFETY: as above.
unsafe impl Sync for Chunk {}

#[cfg(unix)]
struct Raw {
    base: *mut libc::c_void,
    len: usize,
}

#[cfg(not(unix))]
struct Raw {
    layout: std::alloc::Layout,
}

impl Chunk {
    /// Maps `len` zeroed bytes (a multiple of [`HUGE`]), [`HUGE`]-aligned, advised for huge
    /// pages. `None` when the system refuses.
    fn map(len: usize) -> Option<Chunk> {
        debug_assert!(len.is_multiple_of(HUGE) && len > 0);
        #[cfg(unix)]
        {
            // Map one huge page more than asked and start at the first aligned address.
            let raw_len = len + HUGE;
            // SAFETY: an anonymous private mapping at an address of the system's choice
            // touches no existing memory.
            let base = unsafe {
                libc::mmap(
                    std::ptr::null_mut(),
                    raw_len,
                    libc::PROT_READ | libc::PROT_WRITE,
                    libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                    -1,
                    0,
                )
            };
            if base == libc::MAP_FAILED {
                return None;
            }
            let ptr = (base as usize).next_multiple_of(HUGE) as *mut u8;
            #[cfg(target_os = "linux")]
            // SAFETY: `ptr..ptr + len` lies inside the mapping made above. The advice only
            // changes how the kernel backs it; a refusal (huge pages disabled) is harmless.
            unsafe {
                libc::madvise(ptr.cast(), len, libc::MADV_HUGEPAGE);
            }
            Some(Chunk {
                ptr,
                len,
                raw: Raw { base, len: raw_len },
            })
        }
        #[cfg(not(unix))]
        {
            let layout = std::alloc::Layout::from_size_align(len, HUGE).ok()?;
            // SAFETY: `layout` has a non-zero size.
            let ptr = unsafe { std::alloc::alloc_zeroed(layout) };
            (!ptr.is_null()).then_some(Chunk {
                ptr,
                len,
                raw: Raw { layout },
            })
        }
    }
}

impl Drop for Chunk {
    fn drop(&mut self) {
        #[cfg(unix)]
        // SAFETY: `raw` is the mapping made in `map`, unmapped once, after every buffer
        // in it has dropped (each holds an `Arc` of this chunk).
        unsafe {
            libc::munmap(self.raw.base, self.raw.len);
        }
        #[cfg(not(unix))]
        // SAFETY: allocated in `map` with this layout.
        unsafe {
            std::alloc::dealloc(self.ptr, self.raw.layout)
        }
    }
}

/// Hands out buffers from shared chunks: the one being filled is held weakly, so it goes
/// as soon as its buffers do.
pub struct Arena {
    current: Mutex<(Weak<Chunk>, usize)>,
}

impl Arena {
    /// An arena with no chunk yet.
    pub const fn new() -> Self {
        Arena {
            current: Mutex::new((Weak::new(), 0)),
        }
    }

    /// A zeroed buffer of `len` bytes, [`ALIGN`]-aligned. `None` when no memory could be
    /// mapped (the caller then uses the ordinary allocator).
    pub fn zeroed(&self, len: usize) -> Option<HugeBuf> {
        let room = len.max(1).next_multiple_of(ALIGN);
        if room > CHUNK / 2 {
            let chunk = Arc::new(Chunk::map(room.next_multiple_of(HUGE))?);
            return Some(HugeBuf { chunk, off: 0, len });
        }
        let mut cur = self.current.lock().unwrap_or_else(|e| e.into_inner());
        let chunk = match cur.0.upgrade() {
            Some(c) if cur.1 + room <= c.len => c,
            _ => {
                let c = Arc::new(Chunk::map(CHUNK)?);
                *cur = (Arc::downgrade(&c), 0);
                c
            }
        };
        let off = cur.1;
        cur.1 += room;
        Some(HugeBuf { chunk, off, len })
    }
}

impl Default for Arena {
    fn default() -> Self {
        Self::new()
    }
}

/// The arena of the models' repacked weights.
pub static WEIGHTS: Arena = Arena::new();

/// `len` bytes of a chunk, owned alone.
pub struct HugeBuf {
    chunk: Arc<Chunk>,
    off: usize,
    len: usize,
}

impl HugeBuf {
    /// The bytes.
    pub fn bytes(&self) -> &[u8] {
        // SAFETY: `off..off + len` lies inside the chunk's usable room (checked when it was
        // handed out), no other buffer overlaps it, and the chunk lives while `self` does.
        unsafe { std::slice::from_raw_parts(self.chunk.ptr.add(self.off), self.len) }
    }

    /// The bytes, to write.
    pub fn bytes_mut(&mut self) -> &mut [u8] {
        // SAFETY: as in `bytes`; `&mut self` makes this the only borrow of them.
        unsafe { std::slice::from_raw_parts_mut(self.chunk.ptr.add(self.off), self.len) }
    }

    /// Bytes held.
    pub fn len(&self) -> usize {
        self.len
    }

    /// No bytes held.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buffers_are_aligned_zeroed_disjoint_and_outlive_their_arena_slot() {
        let arena = Arena::new();
        let sizes = [1usize, 63, 64, 65, 4096, 1 << 20, 5 << 20, CHUNK / 2 + 1, 3];
        let mut bufs: Vec<HugeBuf> = sizes
            .iter()
            .map(|&n| arena.zeroed(n).expect("mapped"))
            .collect();
        for (b, &n) in bufs.iter_mut().zip(&sizes) {
            assert_eq!(b.len(), n);
            assert_eq!(b.bytes().as_ptr() as usize % ALIGN, 0);
            assert!(b.bytes().iter().all(|&v| v == 0), "fresh memory is zeroed");
            b.bytes_mut().fill(n as u8);
        }
        // Each buffer still holds its own fill: none overlaps another.
        for (b, &n) in bufs.iter().zip(&sizes) {
            assert!(
                b.bytes().iter().all(|&v| v == n as u8),
                "{n}-byte buffer overwritten"
            );
        }
        // Small buffers share a chunk; the big one has its own.
        assert!(Arc::ptr_eq(&bufs[0].chunk, &bufs[1].chunk));
        assert!(!Arc::ptr_eq(&bufs[7].chunk, &bufs[0].chunk));
        // Dropping the earlier buffers leaves the later ones intact, and a chunk whose
        // buffers all went is given back: the arena then starts a new one.
        let weak = Arc::downgrade(&bufs[0].chunk);
        let last = bufs.pop().expect("nine");
        drop(bufs);
        assert_eq!(
            weak.strong_count(),
            1,
            "only the last buffer holds the chunk"
        );
        assert!(last.bytes().iter().all(|&v| v == 3));
        drop(last);
        assert_eq!(
            weak.strong_count(),
            0,
            "the chunk is unmapped with its last buffer"
        );
        let again = arena.zeroed(100).expect("mapped");
        assert!(again.bytes().iter().all(|&v| v == 0));
    }

    #[test]
    fn a_full_chunk_is_followed_by_a_new_one() {
        let arena = Arena::new();
        let quarter = CHUNK / 4;
        let bufs: Vec<HugeBuf> = (0..5)
            .map(|_| arena.zeroed(quarter).expect("mapped"))
            .collect();
        assert!(Arc::ptr_eq(&bufs[0].chunk, &bufs[3].chunk));
        assert!(!Arc::ptr_eq(&bufs[3].chunk, &bufs[4].chunk));
        assert_eq!(bufs[4].off, 0);
    }
}
