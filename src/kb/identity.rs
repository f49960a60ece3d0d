//! The identity of the embedder behind the stored vectors, and whether the knowledge
//! base may serve searches. An identity is the embedder's name, its dimension and its
//! fingerprint: its vectors of a few fixed probe texts. Two embedders are the same when
//! their dimensions match and each probe's vectors are at least [`SAME_COSINE`] alike:
//! that tolerates the arithmetic of one model run differently (f32, int16, int8, a remote
//! server), while different models land far below it.
//!
//! At start-up [`resolve`] finds (or records) the running embedder's identity; when any
//! stored chunk holds another embedder's vector, the knowledge base is *stale*: every
//! search is refused with a clear reason until the re-embedding task has rebuilt them
//! (`kb::reembed`), so the vectors of two embedders are never compared with each other.

use parking_lot::RwLock;

use crate::error::{Error, Result};
use crate::ml::EmbedHandle;
use crate::store::{embedders as repo, Store};

/// The probe texts. Never change them: stored fingerprints are their vectors.
pub const PROBES: [&str; 3] = [
    "The quick brown fox jumps over the lazy dog.",
    "Invoices are payable within thirty days of delivery.",
    "How do I reset my password?",
];

/// Least cosine similarity of every probe's two vectors for two embedders to be the same.
pub const SAME_COSINE: f32 = 0.99;

/// What the fix is, in every refusal.
const HOW_TO_FIX: &str = "run `ragd reindex` (or POST /api/v1/reindex) to re-embed them \
with the current embedder, or start ragd with the embedder that made them";

/// An embedder's identity.
#[derive(Debug, Clone, PartialEq)]
pub struct Identity {
    pub name: String,
    pub dim: usize,
    /// One vector per probe text, in [`PROBES`] order.
    pub probes: Vec<Vec<f32>>,
}

impl Identity {
    /// The running embedder's identity: its vectors of the probe texts.
    pub async fn of(embedder: &EmbedHandle) -> Result<Self> {
        let probes = embedder
            .embed(PROBES.iter().map(|p| p.to_string()).collect())
            .await?;
        if probes.len() != PROBES.len() || probes.iter().any(|v| v.len() != embedder.dim()) {
            return Err(Error::Internal(anyhow::anyhow!(
                "the embedder returned {} probe vectors for {} texts (dimension {})",
                probes.len(),
                PROBES.len(),
                embedder.dim()
            )));
        }
        Ok(Self {
            name: embedder.name().to_owned(),
            dim: embedder.dim(),
            probes,
        })
    }

    /// A stored identity (its fingerprint holds the probes' vectors one after the other).
    pub fn from_row(row: &repo::EmbedderRow) -> Self {
        Self {
            name: row.name.clone(),
            dim: row.dim,
            probes: row
                .fingerprint
                .chunks(row.dim.max(1))
                .map(<[f32]>::to_vec)
                .collect(),
        }
    }

    /// Whether `other` is the same model: same dimension, and every probe's vectors at
    /// least [`SAME_COSINE`] alike. The name does not count (a folder can be renamed, a
    /// remote server names its model its own way).
    pub fn same_as(&self, other: &Identity) -> bool {
        self.dim == other.dim
            && self.probes.len() == other.probes.len()
            && !self.probes.is_empty()
            && self
                .probes
                .iter()
                .zip(&other.probes)
                .all(|(a, b)| a.len() == self.dim && cosine(a, b) >= SAME_COSINE)
    }

    fn fingerprint(&self) -> Vec<f32> {
        self.probes.concat()
    }

    fn describe(&self) -> String {
        format!("'{}' ({} dimensions)", self.name, self.dim)
    }
}

fn cosine(a: &[f32], b: &[f32]) -> f32 {
    let (mut dot, mut na, mut nb) = (0f64, 0f64, 0f64);
    for (x, y) in a.iter().zip(b) {
        dot += f64::from(*x) * f64::from(*y);
        na += f64::from(*x) * f64::from(*x);
        nb += f64::from(*y) * f64::from(*y);
    }
    if na == 0.0 || nb == 0.0 {
        return 0.0;
    }
    (dot / (na.sqrt() * nb.sqrt())) as f32
}

/// Why searches are refused: chunks hold vectors that another embedder made.
#[derive(Debug, Clone)]
pub struct Stale {
    /// The running embedder.
    pub current: String,
    /// The embedders whose vectors chunks still hold, and how many each.
    pub holders: Vec<repo::Holder>,
}

impl Stale {
    /// The reason, naming both embedders and the fix.
    pub fn message(&self) -> String {
        let held: Vec<String> = self
            .holders
            .iter()
            .map(|h| format!("'{}' ({} dimensions; {} chunks)", h.name, h.dim, h.chunks))
            .collect();
        format!(
            "the knowledge base's vectors were made by {}, not by the running embedder {}; \
             searches are refused until they are re-embedded: {HOW_TO_FIX}",
            held.join(" and "),
            self.current
        )
    }
}

/// What [`resolve`] found.
#[derive(Debug, Clone)]
pub struct Resolved {
    /// Id of the running embedder's identity in the store.
    pub embedder_id: i64,
    /// Set when chunks hold another embedder's vectors.
    pub stale: Option<Stale>,
}

/// Finds the running embedder's identity among the stored ones (recording it when it is
/// new) and whether every chunk's vector is its own. A knowledge base without a recorded
/// identity (new, or made before identities were recorded) adopts the running one; one
/// with no chunks of another embedder adopts it too (there is nothing to mix). Blocking.
pub fn resolve(store: &Store, current: &Identity) -> Result<Resolved> {
    store.write_sync(|tx| {
        let known = repo::all(tx)?;
        let adopted = repo::adopted(tx)?;
        let matching: Vec<i64> = known
            .iter()
            .filter(|row| Identity::from_row(row).same_as(current))
            .map(|row| row.id)
            .collect();
        let embedder_id = match matching.iter().find(|id| Some(**id) == adopted) {
            Some(id) => *id,
            None => match matching.first() {
                Some(id) => *id,
                None => repo::insert(
                    tx,
                    &current.name,
                    current.dim,
                    &current.fingerprint(),
                    &crate::time::now_iso(),
                )?,
            },
        };
        let adopted = match adopted {
            Some(a) => a,
            None => {
                repo::set_adopted(tx, embedder_id)?;
                embedder_id
            }
        };
        let unowned = repo::assign_unowned(tx, adopted)?;
        if unowned > 0 {
            tracing::info!(chunks = unowned, "chunks stored before embedder identities were recorded adopted the knowledge base's");
        }
        let holders = repo::holders_other_than(tx, embedder_id)?;
        if holders.is_empty() {
            if adopted != embedder_id {
                repo::set_adopted(tx, embedder_id)?;
            }
            return Ok(Resolved {
                embedder_id,
                stale: None,
            });
        }
        Ok(Resolved {
            embedder_id,
            stale: Some(Stale {
                current: current.describe(),
                holders,
            }),
        })
    })
}

/// Whether the knowledge base may serve searches now; shared by every search path.
#[derive(Debug)]
pub struct Searchable {
    embedder_id: i64,
    stale: RwLock<Option<Stale>>,
    /// Chunks done and in all, while a reindex task runs.
    progress: RwLock<Option<(u64, u64)>>,
}

impl Searchable {
    /// The state [`resolve`] found.
    pub fn new(r: Resolved) -> Self {
        Self {
            embedder_id: r.embedder_id,
            stale: RwLock::new(r.stale),
            progress: RwLock::new(None),
        }
    }

    /// Records how far a running reindex is (shown with the reason searches are refused).
    pub fn report_progress(&self, done: u64, total: u64) {
        *self.progress.write() = Some((done, total));
    }

    /// Id of the running embedder's identity (what the vectors it writes are recorded as).
    pub fn embedder_id(&self) -> i64 {
        self.embedder_id
    }

    /// `Unavailable` with the reason while chunks hold another embedder's vectors.
    pub fn check(&self) -> Result<()> {
        match self.stale_reason() {
            None => Ok(()),
            Some(reason) => Err(Error::Unavailable(reason)),
        }
    }

    /// The reason searches are refused, if they are (with the progress of a running
    /// reindex).
    pub fn stale_reason(&self) -> Option<String> {
        let mut reason = self.stale.read().as_ref().map(Stale::message)?;
        if let Some((done, total)) = *self.progress.read() {
            reason.push_str(&format!(
                " (re-embedding is under way: {done} of {total} chunks done)"
            ));
        }
        Some(reason)
    }

    /// Serves searches again: every chunk's vector is now the running embedder's.
    pub(super) fn lift(&self) {
        *self.stale.write() = None;
        self.clear_progress();
    }

    /// No reindex is running (any more).
    pub fn clear_progress(&self) {
        *self.progress.write() = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unit(v: &[f32]) -> Vec<f32> {
        let n = v.iter().map(|x| x * x).sum::<f32>().sqrt();
        v.iter().map(|x| x / n).collect()
    }

    fn identity(name: &str, probes: &[&[f32]]) -> Identity {
        Identity {
            name: name.into(),
            dim: probes[0].len(),
            probes: probes.iter().map(|p| unit(p)).collect(),
        }
    }

    #[test]
    fn same_model_within_rounding_is_the_same_other_models_are_not() {
        let a = identity("a", &[&[1.0, 0.0, 0.0], &[0.0, 1.0, 0.0], &[0.0, 0.0, 1.0]]);
        // The same model run in other arithmetic: every probe within rounding, another name.
        let rounded = identity(
            "a-remote",
            &[&[1.0, 0.02, 0.0], &[0.0, 1.0, -0.03], &[0.01, 0.0, 1.0]],
        );
        assert!(a.same_as(&rounded) && rounded.same_as(&a));
        // One probe off (cosine ~0.98) is another model, even if the others agree.
        let one_off = identity("a", &[&[1.0, 0.0, 0.0], &[0.0, 1.0, 0.2], &[0.0, 0.0, 1.0]]);
        assert!(!a.same_as(&one_off));
        // Another dimension is never the same, whatever the values.
        let wider = identity(
            "a",
            &[
                &[1.0, 0.0, 0.0, 0.0],
                &[0.0, 1.0, 0.0, 0.0],
                &[0.0, 0.0, 1.0, 0.0],
            ],
        );
        assert!(!a.same_as(&wider));
        // A fingerprint of fewer probes (or none) matches nothing.
        let mut fewer = a.clone();
        fewer.probes.pop();
        assert!(!a.same_as(&fewer));
        fewer.probes.clear();
        assert!(!fewer.same_as(&fewer));
    }

    #[test]
    fn stored_fingerprints_read_back_and_resolve_adopts_matches_and_flags_others() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("t.sqlite")).unwrap();
        let a = identity("a", &[&[1.0, 0.0, 0.0], &[0.0, 1.0, 0.0], &[0.0, 0.0, 1.0]]);
        let b = identity("b", &[&[0.0, 1.0, 0.0], &[1.0, 0.0, 0.0], &[0.0, 0.0, 1.0]]);
        // A new knowledge base adopts the running embedder and serves.
        let first = resolve(&store, &a).unwrap();
        assert!(first.stale.is_none());
        let rows = store.read_sync(repo::all).unwrap();
        assert_eq!(rows.len(), 1);
        assert!(Identity::from_row(&rows[0]).same_as(&a));
        assert_eq!(Identity::from_row(&rows[0]), a);
        // With no chunks, another embedder is adopted at once (nothing to mix)...
        let empty = resolve(&store, &b).unwrap();
        assert!(empty.stale.is_none());
        assert_ne!(empty.embedder_id, first.embedder_id);
        // ... and the first one, known already, keeps its id when it comes back.
        assert_eq!(resolve(&store, &a).unwrap().embedder_id, first.embedder_id);
        let adopted = store.read_sync(repo::adopted).unwrap();
        assert_eq!(adopted, Some(first.embedder_id));

        // Chunks a's vectors: a start with b is stale and names both; a's own is not.
        seed_chunks(&store, "one.md", 2, Some(first.embedder_id));
        let refused = resolve(&store, &b).unwrap();
        assert_eq!(refused.embedder_id, empty.embedder_id);
        let stale = refused.stale.expect("another embedder's vectors are stale");
        assert_eq!(stale.holders.len(), 1);
        assert_eq!(
            (stale.holders[0].name.as_str(), stale.holders[0].chunks),
            ("a", 2)
        );
        let msg = stale.message();
        assert!(msg.contains("'a' (3 dimensions; 2 chunks)") && msg.contains("'b' (3 dimensions)"));
        assert!(
            msg.contains("ragd reindex") && msg.contains("/api/v1/reindex"),
            "{msg}"
        );
        assert!(resolve(&store, &a).unwrap().stale.is_none());
        let searchable = Searchable::new(resolve(&store, &b).unwrap());
        assert!(matches!(searchable.check(), Err(Error::Unavailable(m)) if m == msg));
        searchable.report_progress(1, 2);
        let under_way = searchable.stale_reason().unwrap();
        assert!(under_way.starts_with(&msg) && under_way.ends_with("1 of 2 chunks done)"));
        searchable.lift();
        assert!(searchable.check().is_ok());
    }

    #[test]
    fn chunks_stored_before_identities_adopt_the_running_embedder() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("t.sqlite")).unwrap();
        seed_chunks(&store, "old.md", 3, None);
        let a = identity("a", &[&[1.0, 0.0], &[0.0, 1.0], &[1.0, 1.0]]);
        let r = resolve(&store, &a).unwrap();
        assert!(r.stale.is_none());
        let owned = store
            .read_sync(|c| repo::count_by(c, r.embedder_id))
            .unwrap();
        assert_eq!(owned, 3);
    }

    fn seed_chunks(store: &Store, name: &str, n: usize, embedder: Option<i64>) {
        use crate::store::chunks;
        let source = crate::store::SourceRow {
            id: format!("id-{name}"),
            source: name.into(),
            source_type: "file".into(),
            title: name.into(),
            file_type: "md".into(),
            section: "s".into(),
            content_hash: format!("hash-{name}"),
            chunk_count: n as i64,
            created_at: "2026-01-01T00:00:00".into(),
            updated_at: "2026-01-01T00:00:00".into(),
        };
        let rows: Vec<crate::store::NewChunk> = (0..n)
            .map(|i| crate::store::NewChunk {
                id: format!("{name}-{i}"),
                position: i as i64,
                text: format!("chunk {i}"),
                text_hash: format!("h{i}"),
                language: "en".into(),
                metadata: Default::default(),
                embedding: vec![1.0, 0.0, 0.0],
            })
            .collect();
        store
            .write_sync(|tx| {
                chunks::upsert_source(tx, &source)?;
                chunks::replace_chunks(tx, &source.id, &rows, embedder)?;
                Ok(())
            })
            .unwrap();
    }
}
