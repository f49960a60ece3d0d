//! Per-operation counts and latencies, merged across clients, and the printed table.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::mix::Op;

/// What one operation saw.
#[derive(Debug, Default, Clone)]
pub struct OpStats {
    /// Latency of each 2xx answer.
    pub ok_latencies: Vec<Duration>,
    /// Answers by HTTP status.
    pub statuses: BTreeMap<u16, u64>,
    /// Requests that got no HTTP answer, by kind (timeout, connect, body, other).
    pub failures: BTreeMap<&'static str, u64>,
    /// 2xx answers of `/query` by `answer_mode` (generative, extractive).
    pub modes: BTreeMap<String, u64>,
    /// 429 answers that were a user's rate limit (not the server shedding load).
    pub rate_limited: u64,
}

/// Everything a client (or the health prober) recorded.
#[derive(Debug, Default, Clone)]
pub struct Recorder {
    pub ops: BTreeMap<Op, OpStats>,
}

impl Recorder {
    /// An HTTP answer.
    pub fn response(&mut self, op: Op, status: u16, latency: Duration) {
        let s = self.ops.entry(op).or_default();
        *s.statuses.entry(status).or_default() += 1;
        if (200..300).contains(&status) {
            s.ok_latencies.push(latency);
        }
    }

    /// The `answer_mode` of a 2xx `/query` answer.
    pub fn mode(&mut self, op: Op, mode: &str) {
        *self
            .ops
            .entry(op)
            .or_default()
            .modes
            .entry(mode.to_owned())
            .or_default() += 1;
    }

    /// A 429 answer that was a user's rate limit.
    pub fn rate_limited(&mut self, op: Op) {
        self.ops.entry(op).or_default().rate_limited += 1;
    }

    /// A request that got no HTTP answer.
    pub fn failure(&mut self, op: Op, e: &reqwest::Error) {
        let kind = if e.is_timeout() {
            "timeout"
        } else if e.is_connect() {
            "connect"
        } else if e.is_body() || e.is_decode() {
            "body"
        } else {
            "other"
        };
        *self
            .ops
            .entry(op)
            .or_default()
            .failures
            .entry(kind)
            .or_default() += 1;
    }

    /// Adds `other`'s records to these.
    pub fn merge(&mut self, other: Recorder) {
        for (op, o) in other.ops {
            let s = self.ops.entry(op).or_default();
            s.ok_latencies.extend(o.ok_latencies);
            for (k, v) in o.statuses {
                *s.statuses.entry(k).or_default() += v;
            }
            for (k, v) in o.failures {
                *s.failures.entry(k).or_default() += v;
            }
            for (k, v) in o.modes {
                *s.modes.entry(k).or_default() += v;
            }
            s.rate_limited += o.rate_limited;
        }
    }

    /// Answers with a status >= 500.
    pub fn server_errors(&self) -> u64 {
        self.count(|s| s >= 500)
    }

    /// Answers with this status.
    pub fn with_status(&self, status: u16) -> u64 {
        self.count(|s| s == status)
    }

    fn count(&self, f: impl Fn(u16) -> bool) -> u64 {
        self.ops
            .values()
            .flat_map(|s| s.statuses.iter())
            .filter(|(k, _)| f(**k))
            .map(|(_, v)| v)
            .sum()
    }

    /// Requests that got no HTTP answer.
    pub fn transport_failures(&self) -> u64 {
        self.ops.values().flat_map(|s| s.failures.values()).sum()
    }

    /// The `p`-th percentile (nearest rank) of `op`'s 2xx latencies, in ms.
    pub fn percentile_ms(&self, op: Op, p: f64) -> Option<f64> {
        percentile(&self.ops.get(&op)?.ok_latencies, p)
    }
}

fn percentile(latencies: &[Duration], p: f64) -> Option<f64> {
    if latencies.is_empty() {
        return None;
    }
    let mut v: Vec<Duration> = latencies.to_vec();
    v.sort_unstable();
    let rank = ((p / 100.0) * v.len() as f64).ceil().max(1.0) as usize;
    Some(v[rank.min(v.len()) - 1].as_secs_f64() * 1000.0)
}

fn ms(v: Option<f64>) -> String {
    v.map_or_else(|| "-".into(), |x| format!("{x:.1}"))
}

/// Prints one row per operation: requests, requests/s, 2xx latency percentiles and
/// every other outcome by status (or transport failure).
pub fn print_table(rec: &Recorder, seconds: f64) {
    println!(
        "{:<34} {:>8} {:>8} {:>9} {:>9} {:>9} {:>9}  non-2xx",
        "operation", "requests", "req/s", "p50 ms", "p95 ms", "p99 ms", "max ms"
    );
    let mut all = OpStats::default();
    for (op, s) in &rec.ops {
        print_row(op.label(), s, seconds);
        if *op != Op::Health {
            all.ok_latencies.extend(&s.ok_latencies);
            for (k, v) in &s.statuses {
                *all.statuses.entry(*k).or_default() += v;
            }
            for (k, v) in &s.failures {
                *all.failures.entry(k).or_default() += v;
            }
            all.rate_limited += s.rate_limited;
        }
    }
    print_row("all (without the prober)", &all, seconds);
    for (op, s) in &rec.ops {
        if !s.modes.is_empty() {
            let modes: Vec<String> = s.modes.iter().map(|(k, v)| format!("{k} {v}")).collect();
            println!(
                "{} answers by answer_mode: {}",
                op.label(),
                modes.join(", ")
            );
        }
    }
}

fn print_row(label: &str, s: &OpStats, seconds: f64) {
    let requests: u64 = s.statuses.values().sum::<u64>() + s.failures.values().sum::<u64>();
    let others: Vec<String> = s
        .statuses
        .iter()
        .filter(|(k, _)| !(200..300).contains(*k))
        .map(|(k, v)| match (k, s.rate_limited) {
            (429, 1..) => format!("{k}: {v} ({} rate limit)", s.rate_limited),
            _ => format!("{k}: {v}"),
        })
        .chain(s.failures.iter().map(|(k, v)| format!("{k}: {v}")))
        .collect();
    let max = s
        .ok_latencies
        .iter()
        .max()
        .map(|d| d.as_secs_f64() * 1000.0);
    println!(
        "{:<34} {:>8} {:>8.1} {:>9} {:>9} {:>9} {:>9}  {}",
        label,
        requests,
        requests as f64 / seconds,
        ms(percentile(&s.ok_latencies, 50.0)),
        ms(percentile(&s.ok_latencies, 95.0)),
        ms(percentile(&s.ok_latencies, 99.0)),
        ms(max),
        if others.is_empty() {
            "none".to_owned()
        } else {
            others.join(", ")
        }
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_percentiles() {
        let v: Vec<Duration> = (1..=100).map(Duration::from_millis).collect();
        assert_eq!(percentile(&v, 50.0), Some(50.0));
        assert_eq!(percentile(&v, 99.0), Some(99.0));
        assert_eq!(percentile(&v, 100.0), Some(100.0));
        assert_eq!(percentile(&[], 50.0), None);
    }
}
