//! The attention of a decode step's token: one kernel for a single new token, whose
//! query rows keep their value sums in registers over the whole key range and read keys
//! and values straight from the cache. It does what the prompt kernels (`super::rows`)
//! do for such a row, operation for operation.

// Row and block loops index several register arrays at once.
#![allow(clippy::needless_range_loop)]

use super::super::kv::{k_index, v_index, KBLOCK};
use super::{load_kv, softmax_step, Item, Scratch, Shape};
use crate::ml::simd::{prefetch, F16x};

/// One new token's item (a decode step): its group's query rows with their value
/// accumulators in registers for the whole key range, keys and values read straight from
/// the cache (no converted copy). The same operations in the same order as [`super::rows`], so
/// the results are identical. False when the shape has no such kernel (too many
/// accumulators for the registers).
#[inline(always)]
pub(super) unsafe fn decode<V: F16x, const F32: bool>(
    s: &Shape,
    q: *const f32,
    k: &[u8],
    v: &[u8],
    item: Item,
    scratch: &mut Scratch,
    group: usize,
) -> bool {
    macro_rules! go {
        ($r:literal, $d:literal) => {
            decode_rows::<
                V,
                F32,
                $r,
                $d,
                {
                    if $r * $d <= 12 {
                        4
                    } else {
                        2
                    }
                },
            >(s, q, k, v, item, scratch, group)
        };
    }
    match (s.head_dim, item.heads()) {
        (64, 1) => go!(1, 4),
        (64, 2) => go!(2, 4),
        (64, 3) => go!(3, 4),
        (64, 4) => go!(4, 4),
        (64, 5) => go!(5, 4),
        (64, 6) => go!(6, 4),
        (128, 1) => go!(1, 8),
        (128, 2) => go!(2, 8),
        (128, 3) => go!(3, 8),
        (256, 1) => go!(1, 16),
        _ => return false,
    }
    true
}

/// [`decode`] for `R` query rows of `16 * D` dimensions. The scores of `NB` key blocks
/// are computed together (independent sums, so the multiply-add latency is hidden); the
/// softmax and values then take the blocks in order, as [`super::rows`] does.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn decode_rows<V: F16x, const F32: bool, const R: usize, const D: usize, const NB: usize>(
    s: &Shape,
    q: *const f32,
    k: &[u8],
    v: &[u8],
    item: Item,
    scratch: &mut Scratch,
    group: usize,
) {
    let hd = 16 * D;
    let t = item.t0;
    let elem = if F32 { 4 } else { 2 };
    let (kp, vp) = (k.as_ptr(), v.as_ptr());
    let qs: [*const f32; R] =
        std::array::from_fn(|i| q.add(t * s.ldq + (item.kv_head * group + item.g0 + i) * hd));
    let mut st = DecodeState::<V, R, D> {
        m: [f32::NEG_INFINITY; R],
        l: [0f32; R],
        acc: [[V::splat(0.0); D]; R],
    };
    let first = item.k0.max(s.first_key(t));
    let seen = (s.pos + t + 1).min(item.k1);
    let kblock = |b: usize| kp.add(k_index(s.cap, hd, item.kv_head, b * KBLOCK, 0) * elem);
    let vblock = |b: usize| vp.add(v_index(s.cap, hd, item.kv_head, b * KBLOCK, 0) * elem);
    let blocks = item.k1.div_ceil(KBLOCK);
    let ask = prefetch_kv();
    let fetch = |b: usize| {
        if ask && b < blocks {
            prefetch(kblock(b), KBLOCK * hd * elem);
            prefetch(vblock(b), (item.k1 - b * KBLOCK).min(KBLOCK) * hd * elem);
        }
    };
    let mut b = item.k0 / KBLOCK;
    for f in 0..NB {
        fetch(b + f);
    }
    while b < blocks {
        let nb = (blocks - b).min(NB);
        for f in 0..nb {
            fetch(b + NB + f);
        }
        if nb == NB {
            let sc = scores::<V, F32, R, NB>(std::array::from_fn(|n| kblock(b + n)), &qs, hd);
            for (n, scn) in sc.iter().enumerate() {
                st.block::<F32>(scn, b + n, first, seen, s.scale, vblock(b + n), hd);
            }
        } else {
            for n in 0..nb {
                let sc = scores::<V, F32, R, 1>([kblock(b + n)], &qs, hd);
                st.block::<F32>(&sc[0], b + n, first, seen, s.scale, vblock(b + n), hd);
            }
        }
        b += nb;
    }
    let out = scratch.state.data.as_mut_ptr();
    for i in 0..R {
        let row = out.add(i * (hd + 2));
        *row = st.m[i];
        *row.add(1) = st.l[i];
        for c in 0..D {
            st.acc[i][c].store(row.add(2 + 16 * c));
        }
    }
}

/// Whether the decode kernel asks for its key and value blocks ahead of use. On Intel
/// cores it must (without, an 8-stream SmolLM2 step's attention went 2.25 -> 2.8 ms);
/// on AMD's Zen 4 the hardware prefetchers do better alone (the same step 2.65-2.72 ->
/// 2.27-2.43 ms, at 512-token contexts 7.4-8.0 -> 6.0-6.3 ms; docs/llm.md). Decided
/// once, from the CPU's vendor.
fn prefetch_kv() -> bool {
    static ASK: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ASK.get_or_init(|| {
        let ask = !cpu_is_amd();
        tracing::debug!(
            prefetch = ask,
            "decode attention: software prefetch of keys and values"
        );
        ask
    })
}

/// Whether the CPU's vendor string is AMD's.
fn cpu_is_amd() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        let r = std::arch::x86_64::__cpuid(0);
        let mut vendor = [0u8; 12];
        vendor[..4].copy_from_slice(&r.ebx.to_le_bytes());
        vendor[4..8].copy_from_slice(&r.edx.to_le_bytes());
        vendor[8..].copy_from_slice(&r.ecx.to_le_bytes());
        &vendor == b"AuthenticAMD"
    }
    #[cfg(not(target_arch = "x86_64"))]
    false
}

/// The raw scores of `R` query rows against the 16 keys of each of `N` blocks.
#[inline(always)]
unsafe fn scores<V: F16x, const F32: bool, const R: usize, const N: usize>(
    kb: [*const u8; N],
    qs: &[*const f32; R],
    hd: usize,
) -> [[V; R]; N] {
    let mut sc = [[V::splat(0.0); R]; N];
    for d in 0..hd {
        let qd: [V; R] = std::array::from_fn(|i| V::splat(*qs[i].add(d)));
        for n in 0..N {
            let kd = load_kv::<V, F32>(kb[n], d * KBLOCK);
            for i in 0..R {
                sc[n][i] = qd[i].fma(kd, sc[n][i]);
            }
        }
    }
    sc
}

/// The running softmax and value sums of [`decode_rows`].
struct DecodeState<V, const R: usize, const D: usize> {
    m: [f32; R],
    l: [f32; R],
    acc: [[V; D]; R],
}

impl<V: F16x, const R: usize, const D: usize> DecodeState<V, R, D> {
    /// Key block `b` (keys `first..seen` of the item visible), its raw scores `sc`.
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    unsafe fn block<const F32: bool>(
        &mut self,
        sc: &[V; R],
        b: usize,
        first: usize,
        seen: usize,
        scale: f32,
        vb: *const u8,
        hd: usize,
    ) {
        let base = b * KBLOCK;
        let lo = (first.max(base) - base).min(KBLOCK);
        let hi = (seen.saturating_sub(base)).min(KBLOCK);
        if hi <= lo {
            return;
        }
        let mut p = [[0f32; KBLOCK]; R];
        let mut corr = [0f32; R];
        for i in 0..R {
            corr[i] = softmax_step(
                sc[i],
                scale,
                lo,
                hi,
                &mut self.m[i],
                &mut self.l[i],
                &mut p[i],
            );
        }
        for i in 0..R {
            for c in 0..D {
                self.acc[i][c] = self.acc[i][c].mul(V::splat(corr[i]));
            }
        }
        for j in lo..hi {
            for c in 0..D {
                let vj = load_kv::<V, F32>(vb, j * hd + 16 * c);
                for i in 0..R {
                    self.acc[i][c] = V::splat(p[i][j]).fma(vj, self.acc[i][c]);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    /// The vendor read from CPUID is the one the kernel reports.
    #[test]
    #[cfg(all(target_arch = "x86_64", target_os = "linux"))]
    fn the_cpu_vendor_is_the_kernels() {
        let info = std::fs::read_to_string("/proc/cpuinfo").expect("/proc/cpuinfo");
        let vendor = info
            .lines()
            .find_map(|l| l.strip_prefix("vendor_id"))
            .and_then(|l| l.split(':').nth(1))
            .expect("a vendor_id line")
            .trim()
            .to_string();
        assert_eq!(
            super::cpu_is_amd(),
            vendor == "AuthenticAMD",
            "vendor_id {vendor}"
        );
    }
}
