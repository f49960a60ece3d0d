//! Helpers of the re-embedding tests: random-weight embedders in the real file layout, a
//! corpus with section paths, and the stored vectors read straight from SQLite.

use std::path::{Path, PathBuf};

use ragd::ml::reranker::{write_random_cross_encoder_shaped, CrossEncoderShape};

/// Writes a BERT with random (seeded) weights of `shape` and MiniLM's tokenizer into
/// `dir/name`: an embedder the server loads like any other, named `name`, whose vectors
/// are nothing like MiniLM's.
pub fn write_random_embedder(dir: &Path, name: &str, shape: CrossEncoderShape) -> PathBuf {
    let path = dir.join(name);
    let tokenizer = super::models_dir().join("all-MiniLM-L6-v2/tokenizer.json");
    write_random_cross_encoder_shaped(&path, &tokenizer, shape).expect("write random embedder");
    path
}

const WORDS: &[&str] = &[
    "invoice",
    "delivery",
    "warehouse",
    "customer",
    "refund",
    "policy",
    "shipment",
    "carrier",
    "pallet",
    "order",
    "account",
    "payment",
    "supplier",
    "contract",
    "audit",
    "ledger",
    "inventory",
    "courier",
    "return",
    "label",
    "parcel",
    "freight",
    "customs",
    "tariff",
];

/// A Markdown document of `sections` sections under two heading levels (so stored chunks
/// have section paths), each about `words` words: one chunk per section.
pub fn document(doc: usize, sections: usize, words: usize) -> Vec<u8> {
    let mut x = (doc as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let mut out = format!("# Handbook {doc}\n\n");
    for s in 0..sections {
        out.push_str(&format!("## Topic {doc}-{s}\n\n"));
        let body: Vec<&str> = (0..words)
            .map(|_| WORDS[(next() % WORDS.len() as u64) as usize])
            .collect();
        out.push_str(&format!("Note {doc}-{s}: {}.\n\n", body.join(" ")));
    }
    out.into_bytes()
}

/// One stored chunk as the tests check it.
pub struct StoredChunk {
    pub text: String,
    pub section_path: String,
    pub embedding: Vec<f32>,
    /// Name of the embedder its vector is recorded as made by.
    pub embedder: Option<String>,
}

/// Every stored chunk, in key order, read from `data`'s database.
pub fn stored_chunks(data: &Path) -> Vec<StoredChunk> {
    let c = rusqlite::Connection::open_with_flags(
        data.join("ragd.sqlite"),
        rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY,
    )
    .unwrap();
    let mut st = c
        .prepare(
            "SELECT c.text, COALESCE(json_extract(c.metadata, '$.section_path'), ''), c.embedding, e.name
             FROM chunks c LEFT JOIN embedders e ON e.id = c.embedder_id ORDER BY c.key",
        )
        .unwrap();
    let rows = st
        .query_map([], |r| {
            let blob: Vec<u8> = r.get(2)?;
            Ok(StoredChunk {
                text: r.get(0)?,
                section_path: r.get(1)?,
                embedding: ragd::store::chunks::decode_vector(&blob),
                embedder: r.get(3)?,
            })
        })
        .unwrap();
    rows.collect::<Result<_, _>>().unwrap()
}

/// What ingestion embedded for a stored chunk.
pub fn embedding_input(c: &StoredChunk) -> String {
    ragd::kb::search::searchable(&ragd::chunk::retrieval::embed_input(
        &c.section_path,
        &c.text,
    ))
}

pub fn cosine(a: &[f32], b: &[f32]) -> f32 {
    let dot: f32 = a.iter().zip(b).map(|(x, y)| x * y).sum();
    let na = a.iter().map(|x| x * x).sum::<f32>().sqrt();
    let nb = b.iter().map(|x| x * x).sum::<f32>().sqrt();
    dot / (na * nb)
}
