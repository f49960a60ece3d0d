//! Where a decode step's time goes: ragd's CPU engine runs one step of one sequence and
//! one step of B sequences (a continuous-batching step) alternately, in one process, so
//! the machine's drift hits both alike, and prints their median times, the gain
//! `B x t(1) / t(B)`, and each phase's share of a step (`ragd::ml::llm::cpu::prof`).
//! Every sequence starts with CTX prompt tokens and grows by one per step.
//!
//! This runs the model directly (no worker, no sampling): `scripts/bench_batch.sh` gives
//! the end-to-end figures, where one sequence alone also keeps more of its weights in
//! cache between steps than here, where each of its steps follows a batch's.
//!
//! Usage: llm_step FILE.gguf [THREADS=2] [CTX=128] [STEPS=128] [B=8]

use std::time::Instant;

use ragd::ml::llm::cpu::prof;
use ragd::ml::llm::{CpuModel, CpuOptions};

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let path = args
        .first()
        .ok_or_else(|| anyhow::anyhow!("usage: llm_step FILE.gguf [THREADS] [CTX] [STEPS] [B]"))?;
    let arg = |i: usize, d: usize| args.get(i).and_then(|v| v.parse().ok()).unwrap_or(d);
    let (threads, ctx, steps, b) = (arg(1, 2), arg(2, 128), arg(3, 128).max(1), arg(4, 8));
    let mut m = CpuModel::open(
        path.as_ref(),
        CpuOptions {
            threads: Some(threads),
            ..CpuOptions::default()
        },
    )?;
    let vocab = m.vocab() as u64;
    let tok = |s: u64, i: u64| ((i * 7919 + 13 + s * 104_729) % vocab) as u32;
    let mut prompt = |seed: u64| -> anyhow::Result<_> {
        let mut c = m.new_cache();
        let p: Vec<u32> = (0..ctx as u64).map(|i| tok(seed, i)).collect();
        m.forward(&mut c, &p, false)?;
        Ok(c)
    };
    let mut solo = prompt(99)?;
    let mut batch = (0..b as u64)
        .map(&mut prompt)
        .collect::<anyhow::Result<Vec<_>>>()?;
    prof::reset();
    prof::enable(true);
    let (mut t1, mut tb) = (Vec::new(), Vec::new());
    for step in 0..steps {
        for one in [step % 2 == 0, step % 2 == 1] {
            prof::set_slot(usize::from(!one));
            if one {
                let started = Instant::now();
                m.forward_decode(&mut [&mut solo], &[tok(7, step as u64)])?;
                t1.push(started.elapsed().as_secs_f64() * 1e3);
            } else {
                let toks: Vec<u32> = (0..b as u64).map(|s| tok(s, 1000 + step as u64)).collect();
                let mut refs: Vec<&mut _> = batch.iter_mut().collect();
                let started = Instant::now();
                m.forward_decode(&mut refs, &toks)?;
                tb.push(started.elapsed().as_secs_f64() * 1e3);
            }
        }
    }
    prof::enable(false);
    let median = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let (m1, mb) = (median(&mut t1), median(&mut tb));
    println!(
        "threads {threads} ctx {ctx}+{steps}: t(1) {m1:.2} ms  t({b}) {mb:.2} ms  gain {:.2}x",
        b as f64 * m1 / mb
    );
    for (slot, n) in [(0, 1), (1, b)] {
        let totals = prof::totals(slot);
        let per = |ns: u64| ns as f64 / steps as f64 / 1e6;
        print!("B={n}: {:.2} ms/step:", per(totals.iter().sum()));
        for (name, ns) in prof::PHASES.iter().zip(totals) {
            print!(" {name} {:.2}", per(ns));
        }
        println!();
    }
    Ok(())
}
