//! What one client does: a weighted mix of operations on keep-alive connections, each
//! timed and counted, with the uploads and deletes it was acknowledged for recorded so
//! that they can be checked afterwards.

use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::stats::Recorder;

/// The operations of the mix, with their share (percent) of requests.
pub const MIX: &[(Op, u32)] = &[
    (Op::Search, 55),
    (Op::Query, 10),
    (Op::Upload, 13),
    (Op::List, 8),
    (Op::Delete, 5),
    (Op::Chat, 6),
    (Op::ConversationSearch, 3),
];

/// One kind of request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Op {
    Search,
    Query,
    Upload,
    List,
    Delete,
    Chat,
    ConversationSearch,
    Health,
}

impl Op {
    /// Row label of the report.
    pub fn label(self) -> &'static str {
        match self {
            Op::Search => "POST /search",
            Op::Query => "POST /query",
            Op::Upload => "POST /upload",
            Op::List => "GET /documents",
            Op::Delete => "POST /documents/delete/by-source",
            Op::Chat => "assistant chat_with_tools",
            Op::ConversationSearch => "assistant search_conversations",
            Op::Health => "GET /health (prober)",
        }
    }
}

/// A small deterministic generator, one per client.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Self(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1)
    }

    /// A number in `0..n`.
    pub fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 >> 11) % n.max(1)
    }

    fn pick<'a>(&mut self, words: &[&'a str]) -> &'a str {
        words[self.below(words.len() as u64) as usize]
    }
}

const TOPICS: &[&str] = &[
    "invoice",
    "shipping",
    "warranty",
    "password",
    "battery",
    "printer",
    "router",
    "refund",
    "contract",
    "backup",
    "firmware",
    "license",
    "calibration",
    "inventory",
    "payroll",
    "schedule",
    "vaccine",
    "harvest",
    "telescope",
    "glacier",
    "mortgage",
    "recipe",
    "bicycle",
    "pipeline",
    "satellite",
    "orchestra",
    "volcano",
    "compiler",
    "pharmacy",
    "tariff",
];
const VERBS: &[&str] = &[
    "explains",
    "describes",
    "covers",
    "lists",
    "compares",
    "summarises",
    "reviews",
    "details",
];
const NOUNS: &[&str] = &[
    "steps",
    "costs",
    "risks",
    "rules",
    "deadlines",
    "options",
    "settings",
    "limits",
    "causes",
    "checks",
];

/// A question about two topics of the corpus.
pub fn question(rng: &mut Rng) -> String {
    format!(
        "what are the {} of the {} and the {}?",
        rng.pick(NOUNS),
        rng.pick(TOPICS),
        rng.pick(TOPICS)
    )
}

/// A Markdown document of a few paragraphs; `marker` (a unique token) appears in it.
pub fn document(rng: &mut Rng, title: &str, marker: &str) -> String {
    let mut s = format!("# {title}\n\n");
    for p in 0..3 {
        let (a, b) = (rng.pick(TOPICS), rng.pick(TOPICS));
        s.push_str(&format!(
            "Part {p} {} the {} of the {a} and how the {b} {} them. Reference {marker} \
             keeps the {} of the {a} apart from the {} of the {b}.\n\n",
            rng.pick(VERBS),
            rng.pick(NOUNS),
            rng.pick(VERBS),
            rng.pick(NOUNS),
            rng.pick(NOUNS),
        ));
    }
    s
}

/// The unique token of one client's `n`-th upload.
pub fn marker(client: usize, n: usize) -> String {
    format!("qz{client}k{n}v")
}

/// What the server acknowledged about a source.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fate {
    /// Upload answered 2xx (and not deleted since): must be listed and searchable.
    Stored,
    /// Delete answered 2xx: must be gone.
    Deleted,
}

/// A client's acknowledged sources: name -> (marker, fate).
pub type Ledger = HashMap<String, (String, Fate)>;

/// One client: its connection, identity and record.
pub struct Client {
    pub id: usize,
    pub http: reqwest::Client,
    pub base: String,
    /// `key:secret` of the assistant user it signs in as.
    pub credentials: String,
    pub rng: Rng,
    pub rec: Recorder,
    pub ledger: Ledger,
    /// Acknowledged state the server contradicted while the load ran.
    pub anomalies: Vec<String>,
    uploads: usize,
    conversation: Option<String>,
}

/// A finished request: status, or the transport error.
type Outcome = Result<(u16, Option<u64>, Value), reqwest::Error>;

impl Client {
    pub fn new(id: usize, base: &str, credentials: String, timeout: Duration) -> Self {
        let http = reqwest::Client::builder()
            .timeout(timeout)
            .pool_max_idle_per_host(1)
            .build()
            .expect("HTTP client");
        Self {
            id,
            http,
            base: base.to_owned(),
            credentials,
            rng: Rng::new(id as u64 + 1),
            rec: Recorder::default(),
            ledger: Ledger::new(),
            anomalies: Vec::new(),
            uploads: 0,
            conversation: None,
        }
    }

    /// Runs the mix until `until`; honours `Retry-After` on a 429 as a client should.
    pub async fn run(mut self, until: Instant) -> Self {
        let total: u32 = MIX.iter().map(|(_, w)| w).sum();
        while Instant::now() < until {
            let mut roll = self.rng.below(total as u64) as u32;
            let op = MIX
                .iter()
                .find(|(_, w)| {
                    if roll < *w {
                        return true;
                    }
                    roll -= w;
                    false
                })
                .map(|(op, _)| *op)
                .unwrap_or(Op::Search);
            if let Some(wait) = self.step(op).await {
                tokio::time::sleep(wait.min(until.saturating_duration_since(Instant::now()))).await;
            }
        }
        self
    }

    /// One request of kind `op`; returns how long to back off after a 429.
    async fn step(&mut self, op: Op) -> Option<Duration> {
        let started = Instant::now();
        let (op, outcome) = match op {
            Op::Search => {
                let q = question(&mut self.rng);
                (
                    op,
                    self.post("/api/v1/search", json!({"query": q, "top_k": 5}))
                        .await,
                )
            }
            Op::Query => {
                let q = question(&mut self.rng);
                let body = json!({"question": q, "top_k": 3});
                (op, self.post("/api/v1/query", body).await)
            }
            Op::Upload => (op, self.upload().await),
            Op::List => {
                let page = 1 + self.rng.below(5);
                let url = format!("{}/api/v1/documents?page={page}&page_size=20", self.base);
                (op, read(self.http.get(url).send().await).await)
            }
            Op::Delete => match self.pick_stored() {
                Some(name) => {
                    let out = self
                        .post(
                            "/api/v1/documents/delete/by-source",
                            json!({ "source": name }),
                        )
                        .await;
                    if let Ok((200..=299, _, body)) = &out {
                        if body["deleted"].as_u64() == Some(0) {
                            // Acknowledged as stored, yet nothing was there to delete.
                            self.anomalies
                                .push(format!("{name}: stored, but its delete found nothing"));
                        }
                        if let Some(e) = self.ledger.get_mut(&name) {
                            e.1 = Fate::Deleted;
                        }
                    }
                    (op, out)
                }
                None => (Op::Upload, self.upload().await),
            },
            Op::Chat => (op, self.chat().await),
            Op::ConversationSearch => {
                let word = self.rng.pick(TOPICS);
                let url = format!(
                    "{}/api/method/assistant.api.search_conversations?query={word}",
                    self.base
                );
                let req = self.http.get(url).header("Authorization", self.token());
                (op, read(req.send().await).await)
            }
            Op::Health => unreachable!("the prober sends health checks"),
        };
        let elapsed = started.elapsed();
        match outcome {
            Ok((status, retry_after, body)) => {
                self.rec.response(op, status, elapsed);
                if let (Op::Query, 200..=299, Some(mode)) =
                    (op, status, body["answer_mode"].as_str())
                {
                    self.rec.mode(op, mode);
                }
                // The assistant's per-user rate limit, as against a server shedding load.
                if status == 429 && body["exc_type"] == "RateLimitExceededError" {
                    self.rec.rate_limited(op);
                }
                (status == 429).then(|| Duration::from_secs(retry_after.unwrap_or(1)))
            }
            Err(e) => {
                self.rec.failure(op, &e);
                None
            }
        }
    }

    fn token(&self) -> String {
        format!("token {}", self.credentials)
    }

    async fn post(&self, path: &str, body: Value) -> Outcome {
        let url = format!("{}{path}", self.base);
        read(self.http.post(url).json(&body).send().await).await
    }

    async fn upload(&mut self) -> Outcome {
        let n = self.uploads;
        self.uploads += 1;
        let name = format!("load-c{}-{n}.md", self.id);
        let mark = marker(self.id, n);
        let text = document(&mut self.rng, &format!("Load note {} {n}", self.id), &mark);
        let part = reqwest::multipart::Part::bytes(text.into_bytes()).file_name(name.clone());
        let form = reqwest::multipart::Form::new().part("file", part);
        let url = format!("{}/api/v1/upload", self.base);
        let out = read(self.http.post(url).multipart(form).send().await).await;
        if let Ok((200..=299, _, body)) = &out {
            if body["success"] == true {
                self.ledger.insert(name, (mark, Fate::Stored));
            }
        }
        out
    }

    fn pick_stored(&mut self) -> Option<String> {
        let mut stored: Vec<&String> = self
            .ledger
            .iter()
            .filter(|(_, (_, f))| *f == Fate::Stored)
            .map(|(n, _)| n)
            .collect();
        stored.sort();
        if stored.is_empty() {
            return None;
        }
        let i = self.rng.below(stored.len() as u64) as usize;
        Some(stored[i].clone())
    }

    async fn chat(&mut self) -> Outcome {
        let mut body = json!({"user_message": question(&mut self.rng)});
        if let Some(c) = &self.conversation {
            body["conversation_id"] = json!(c);
        }
        let url = format!("{}/api/method/assistant.api.chat_with_tools", self.base);
        let req = self
            .http
            .post(url)
            .header("Authorization", self.token())
            .json(&body);
        let out = read(req.send().await).await;
        if let Ok((200, _, body)) = &out {
            if let Some(c) = body["message"]["data"]["conversation_id"].as_str() {
                self.conversation = Some(c.to_owned());
            }
        }
        out
    }
}

/// Status, `Retry-After` and JSON body (null when not JSON) of a response.
async fn read(sent: Result<reqwest::Response, reqwest::Error>) -> Outcome {
    let r = sent?;
    let status = r.status().as_u16();
    let retry_after = r
        .headers()
        .get("retry-after")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse().ok());
    let bytes = r.bytes().await?;
    Ok((
        status,
        retry_after,
        serde_json::from_slice(&bytes).unwrap_or(Value::Null),
    ))
}

/// Checks `/api/v1/health` every `every` until `until`, recording each answer.
pub async fn probe_health(base: String, until: Instant, every: Duration) -> Recorder {
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(5))
        .build()
        .expect("HTTP client");
    let mut rec = Recorder::default();
    let mut tick = tokio::time::interval(every);
    while Instant::now() < until {
        tick.tick().await;
        let started = Instant::now();
        match read(http.get(format!("{base}/api/v1/health")).send().await).await {
            Ok((status, ..)) => rec.response(Op::Health, status, started.elapsed()),
            Err(e) => rec.failure(Op::Health, &e),
        }
    }
    rec
}

/// Every acknowledged source of every client, merged.
pub fn merge_ledgers(
    ledgers: impl IntoIterator<Item = Ledger>,
) -> BTreeMap<String, (String, Fate)> {
    ledgers.into_iter().flatten().collect()
}
