//! One transformer block of the CPU engine: norm, query/key/value products, rotations,
//! attention, output product, residual, norm, gate/up products, activation, down product,
//! residual; with each family's details in the same rounds (Qwen2's biases, per-head
//! query/key norms, Gemma's output norms and GeGLU, the sliding window).

use super::attention::{self, Scratch, Shape};
use super::config::{Activation, Config};
use super::kv::{self, KvCache, KvType};
use super::ops::{self, Rope};
use super::weights;
use super::{
    prepare_acts, products, quantize_row, row, rows, rows_light, Buffers, CpuModel, Out, Place,
};
use crate::ml::pool::Pool;
use crate::ml::quant::Tier;

/// Largest head the per-head query/key norms run (on a stack copy of the head).
pub const MAX_HEAD_DIM: usize = 512;

impl CpuModel {
    /// Runs layer `l` for the `n` new tokens in `self.buf.x`, each into the sequence and
    /// position `place` gives it.
    pub(super) fn layer(&mut self, l: usize, caches: &mut [&mut KvCache], place: &Place, n: usize) {
        let (h, f) = (self.cfg.hidden, self.cfg.ffn);
        let eps = self.cfg.eps;
        let tier = self.tier;
        let layer = &self.w.layers[l];
        let b = &mut self.buf;
        let (x, xn, tmp) = (
            Out(b.x.as_mut_ptr()),
            Out(b.xn.as_mut_ptr()),
            Out(b.tmp.as_mut_ptr()),
        );
        // Attention block: norm, then the input of the query/key/value products.
        let mut clock = super::prof::Lap::start();
        let writers = prepare_acts(&mut b.acts, &layer.qkv.parts, n, h);
        rows_light(&self.pool, n, h, &|t| {
            // SAFETY: token `t`'s rows are this call's alone.
            let (xt, xnt) = unsafe { (row(x, t, h), row(xn, t, h)) };
            ops::rms_norm(tier, xt, &layer.attn_norm, eps, xnt);
            quantize_row(&writers, tier, t, xnt);
        });
        clock.lap(0);
        let qkv_rows = self.cfg.qkv_rows();
        products(
            &self.pool,
            tier,
            &b.acts,
            &layer.qkv.parts,
            &layer.qkv.offsets,
            Out(b.qkv.as_mut_ptr()),
            qkv_rows,
            n,
        );
        clock.lap(1);
        let swa = self.cfg.family.is_swa(l);
        // Windowed layers have their own rotations when the family says so (Gemma 3).
        let ri = usize::from(swa && self.ropes.len() > 1);
        rope_and_store(
            &self.pool,
            tier,
            &self.cfg,
            &self.ropes[ri],
            ri,
            layer,
            b,
            caches,
            l,
            place,
            n,
        );
        clock.lap(2);
        // One part for a prompt; in a decode step, each token over its own sequence.
        let parts: Vec<Part> = if place.one {
            vec![Part {
                cache: caches[0],
                pos: place.bases[0],
                n,
                row0: 0,
            }]
        } else {
            caches
                .iter()
                .enumerate()
                .map(|(t, c)| Part {
                    cache: c,
                    pos: place.bases[t],
                    n: 1,
                    row0: t,
                })
                .collect()
        };
        attend(&self.pool, tier, &self.cfg, swa, b, &parts, l);
        clock.lap(3);
        let att_w = self.cfg.q_rows();
        let att = Out(b.att.as_mut_ptr());
        let writers = prepare_acts(&mut b.acts, &layer.wo.parts, n, att_w);
        rows_light(&self.pool, n, att_w, &|t| {
            // SAFETY: token `t`'s row is this call's alone.
            quantize_row(&writers, tier, t, unsafe { row(att, t, att_w) });
        });
        clock.lap(4);
        products(
            &self.pool,
            tier,
            &b.acts,
            &layer.wo.parts,
            &layer.wo.offsets,
            tmp,
            h,
            n,
        );
        clock.lap(5);
        // Residual (after Gemma's output norm), then the feed-forward block's norm and
        // input.
        let post = layer.post_norms.as_ref();
        let writers = prepare_acts(&mut b.acts, &layer.gate_up.parts, n, h);
        rows_light(&self.pool, n, h, &|t| {
            // SAFETY: token `t`'s rows are this call's alone.
            let (xt, xnt, tt) = unsafe { (row(x, t, h), row(xn, t, h), row(tmp, t, h)) };
            add_output(tier, eps, post.map(|p| p.0.as_slice()), xt, tt, xnt);
            ops::rms_norm(tier, xt, &layer.ffn_norm, eps, xnt);
            quantize_row(&writers, tier, t, xnt);
        });
        clock.lap(6);
        let gu = Out(b.gu.as_mut_ptr());
        products(
            &self.pool,
            tier,
            &b.acts,
            &layer.gate_up.parts,
            &layer.gate_up.offsets,
            gu,
            2 * f,
            n,
        );
        clock.lap(7);
        let hb = Out(b.h.as_mut_ptr());
        let act = self.cfg.family.act;
        let writers = prepare_acts(&mut b.acts, &layer.down.parts, n, f);
        rows(&self.pool, n, &|t| {
            // SAFETY: token `t`'s rows are this call's alone.
            let (g, ht) = unsafe { (row(gu, t, 2 * f), row(hb, t, f)) };
            match act {
                Activation::Silu => ops::silu_mul(tier, &g[..f], &g[f..], ht),
                Activation::GeluTanh => ops::gelu_mul(tier, &g[..f], &g[f..], ht),
            }
            quantize_row(&writers, tier, t, ht);
        });
        clock.lap(8);
        products(
            &self.pool,
            tier,
            &b.acts,
            &layer.down.parts,
            &layer.down.offsets,
            tmp,
            h,
            n,
        );
        clock.lap(9);
        rows_light(&self.pool, n, h, &|t| {
            // SAFETY: token `t`'s rows are this call's alone.
            let (xt, xnt, tt) = unsafe { (row(x, t, h), row(xn, t, h), row(tmp, t, h)) };
            add_output(tier, eps, post.map(|p| p.1.as_slice()), xt, tt, xnt);
        });
        clock.lap(10);
    }
}

/// `x += out`, or `x += rms_norm(out) · norm` with an output norm (`scratch` holds it).
fn add_output(
    tier: Tier,
    eps: f32,
    norm: Option<&[f32]>,
    x: &mut [f32],
    out: &[f32],
    scratch: &mut [f32],
) {
    let add = match norm {
        Some(w) => {
            ops::rms_norm(tier, out, w, eps, scratch);
            &*scratch
        }
        None => out,
    };
    for (a, v) in x.iter_mut().zip(add.iter()) {
        *a += v;
    }
}

/// Adds the query/key/value biases, normalises query and key heads (Qwen3, Gemma 3),
/// rotates them with rotation set `ri`'s angles, and stores the new keys and values in
/// the cache.
#[allow(clippy::too_many_arguments)]
fn rope_and_store(
    pool: &Pool,
    tier: Tier,
    cfg: &Config,
    rope: &Rope,
    ri: usize,
    layer: &weights::Layer,
    b: &mut Buffers,
    caches: &mut [&mut KvCache],
    l: usize,
    place: &Place,
    n: usize,
) {
    let (hd, heads, kvh) = (cfg.head_dim, cfg.heads, cfg.kv_heads);
    let ld = cfg.qkv_rows();
    let f32kv = caches[0].ty() == KvType::F32;
    // Each sequence's layer-`l` keys and values, and its capacity.
    let seqs: Vec<(KvOut, KvOut, usize)> = caches
        .iter_mut()
        .map(|c| {
            let cap = c.cap();
            let (k, v) = c.layer_mut(l);
            (KvOut(k.as_mut_ptr()), KvOut(v.as_mut_ptr()), cap)
        })
        .collect();
    let qkv = Out(b.qkv.as_mut_ptr());
    let cs = &b.cs[ri];
    let eps = cfg.eps;
    rows(pool, n, &|t| {
        // SAFETY: token `t`'s row is this call's alone.
        let r = unsafe { row(qkv, t, ld) };
        if let Some(bias) = &layer.qkv_bias {
            for (a, bv) in r.iter_mut().zip(bias) {
                *a += bv;
            }
        }
        if let Some((qn, kn)) = &layer.qk_norm {
            for head in 0..heads + kvh {
                let x = &mut r[head * hd..(head + 1) * hd];
                let mut copy = [0f32; MAX_HEAD_DIM];
                copy[..hd].copy_from_slice(x);
                let w = if head < heads { qn } else { kn };
                ops::rms_norm(tier, &copy[..hd], w, eps, x);
            }
        }
        rope.apply(tier, &mut r[..(heads + kvh) * hd], hd, &cs[t]);
        let (seq, p) = place.of(t);
        let (kp, vp, cap) = seqs[seq];
        for head in 0..kvh {
            let kr = &r[(heads + head) * hd..(heads + head + 1) * hd];
            let vr = &r[(heads + kvh + head) * hd..(heads + kvh + head + 1) * hd];
            // Dimension `d` of the key is at `k0 + d · KBLOCK`; the value's are contiguous.
            let (k0, v0) = (
                kv::k_index(cap, hd, head, p, 0),
                kv::v_index(cap, hd, head, p, 0),
            );
            // SAFETY: position `p` of every head of its sequence is this token's alone,
            // and that cache holds `cap > p` positions of its type.
            unsafe {
                if f32kv {
                    let (k, v) = (kp.get().cast::<f32>(), vp.get().cast::<f32>());
                    for (d, &x) in kr.iter().enumerate() {
                        *k.add(k0 + d * kv::KBLOCK) = x;
                    }
                    std::ptr::copy_nonoverlapping(vr.as_ptr(), v.add(v0), hd);
                } else {
                    let (k, v) = (kp.get().cast::<u16>(), vp.get().cast::<u16>());
                    let mut kh = [0u16; MAX_HEAD_DIM];
                    ops::to_f16(tier, kr, &mut kh[..hd]);
                    for (d, &bits) in kh[..hd].iter().enumerate() {
                        *k.add(k0 + d * kv::KBLOCK) = bits;
                    }
                    ops::to_f16(tier, vr, std::slice::from_raw_parts_mut(v.add(v0), hd));
                }
            }
        }
    });
}

/// A raw pointer into the cache that threads write through, each its own positions.
#[derive(Clone, Copy)]
struct KvOut(*mut u8);
// SAFETY: each thread writes only the positions of its own tokens.
unsafe impl Send for KvOut {}
// SAFETY: as above.
unsafe impl Sync for KvOut {}

impl KvOut {
    fn get(self) -> *mut u8 {
        self.0
    }
}

/// One sequence's part of a layer's attention: its cache, the position of its first new
/// token, its new tokens, and the row of `b.qkv` / `b.att` they start at.
struct Part<'a> {
    cache: &'a KvCache,
    pos: usize,
    n: usize,
    row0: usize,
}

/// The attention of layer `l` for the new tokens of every part (one sequence's prompt,
/// or one token of each sequence of a decode step), into their rows of `b.att`. Each
/// part is planned as if it ran alone (so its result does not depend on the others), and
/// the items of all parts run in one round over the threads.
fn attend(
    pool: &Pool,
    tier: Tier,
    cfg: &Config,
    swa: bool,
    b: &mut Buffers,
    parts: &[Part],
    l: usize,
) {
    let (ldq, ldo) = (cfg.qkv_rows(), cfg.q_rows());
    let plans: Vec<(Shape, Vec<attention::Item>, usize)> = parts
        .iter()
        .map(|p| {
            let shape = Shape {
                heads: cfg.heads,
                kv_heads: cfg.kv_heads,
                head_dim: cfg.head_dim,
                cap: p.cache.cap(),
                pos: p.pos,
                tokens: p.n,
                ldq,
                kv: p.cache.ty(),
                window: match cfg.family.window {
                    Some(w) if swa => w,
                    _ => usize::MAX,
                },
                scale: cfg
                    .family
                    .attn_scale
                    .unwrap_or_else(|| 1.0 / (cfg.head_dim as f32).sqrt()),
            };
            let (items, chunks) = attention::plan(&shape, pool.threads(), parts.len());
            (shape, items, chunks)
        })
        .collect();
    // Every item of every part, as (part, item); an item's state slot is its index here.
    let all: Vec<(usize, usize)> = plans
        .iter()
        .enumerate()
        .flat_map(|(pi, plan)| (0..plan.1.len()).map(move |i| (pi, i)))
        .collect();
    let kvs: Vec<(&[u8], &[u8])> = parts.iter().map(|p| p.cache.layer(l)).collect();
    if b.states.len() < all.len() {
        b.states
            .resize_with(all.len(), || attention::State::new(cfg.head_dim));
    }
    let q = b.qkv.as_ptr() as usize;
    let out = Out(b.att.as_mut_ptr());
    let scratch = ScratchPtr(b.attn.as_mut_ptr());
    let states = StatePtr(b.states.as_mut_ptr());
    pool.run(all.len(), &|thread, idx| {
        // SAFETY: thread `thread` alone uses scratch `thread`.
        let scratch = unsafe { &mut *scratch.get().add(thread) };
        let (pi, i) = all[idx];
        let (shape, items, chunks) = &plans[pi];
        let (k, v) = kvs[pi];
        let item = items[i];
        let row0 = parts[pi].row0;
        // SAFETY: the query buffer holds the part's `n` rows from `row0`; `k`/`v` hold
        // its positions `0..pos + n`; `tier` was checked at load.
        unsafe {
            let q = (q as *const f32).add(row0 * ldq);
            attention::run_item(tier, shape, q, k, v, item, scratch)
        };
        if *chunks > 1 {
            // SAFETY: item `idx` is run by this thread only.
            unsafe { core::ptr::swap(&mut scratch.state, states.get().add(idx)) };
        } else {
            // SAFETY: each item writes its own heads and tokens of its own part.
            unsafe {
                attention::write(shape, item, &scratch.state, out.get().add(row0 * ldo), ldo)
            };
        }
    });
    let mut first = 0;
    for (part, (shape, items, chunks)) in parts.iter().zip(&plans) {
        if *chunks > 1 {
            for (group, its) in items.chunks(*chunks).enumerate() {
                let states: Vec<&attention::State> = (0..its.len())
                    .map(|c| &b.states[first + group * chunks + c])
                    .collect();
                // SAFETY: one thread; the item's rows are in `b.att` from the part's row.
                unsafe {
                    let out = out.get().add(part.row0 * ldo);
                    attention::combine(shape, its[0], &states, out, ldo)
                };
            }
        }
        first += items.len();
    }
}

#[derive(Clone, Copy)]
struct ScratchPtr(*mut Scratch);
// SAFETY: thread `i` of a round uses only element `i`.
unsafe impl Send for ScratchPtr {}
// SAFETY: as above.
unsafe impl Sync for ScratchPtr {}

impl ScratchPtr {
    fn get(self) -> *mut Scratch {
        self.0
    }
}

#[derive(Clone, Copy)]
struct StatePtr(*mut attention::State);
// SAFETY: each item's state is used by the one thread that runs the item.
unsafe impl Send for StatePtr {}
// SAFETY: as above.
unsafe impl Sync for StatePtr {}

impl StatePtr {
    fn get(self) -> *mut attention::State {
        self.0
    }
}
