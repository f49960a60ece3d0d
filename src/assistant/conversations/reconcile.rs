//! Start-up reconciliation of the conversation index with SQLite: an index whose
//! recorded generation or size differs from the store is rebuilt from the stored
//! conversations and messages, so deleting or damaging it loses nothing.

use crate::retrieval::conversations::{ConvDoc, ConversationIndex};
use crate::retrieval::OnDisk;
use crate::store::conversations as repo;
use crate::store::Store;

const BATCH: usize = 4096;

/// Brings the index in line with the store. Blocking; run at start-up.
pub fn reconcile(
    store: &Store,
    index: &ConversationIndex,
    disk: OnDisk,
) -> crate::error::Result<()> {
    let (generation, count) =
        store.read_sync(|c| Ok((repo::generation(c)?, repo::count_indexable(c)?)))?;
    if disk.generation == Some(generation) && disk.count == count {
        tracing::info!(
            generation,
            docs = count,
            "conversation index matches the store"
        );
        return Ok(());
    }
    let started = std::time::Instant::now();
    if generation == 0 && count == 0 {
        tracing::info!("new data directory: creating an empty conversation index");
    } else {
        tracing::warn!(generation, docs = count, on_disk = ?disk, "rebuilding the conversation index from the store");
    }
    index.clear(generation)?;
    let mut batch: Vec<ConvDoc> = Vec::with_capacity(BATCH);
    let flush = |batch: &mut Vec<ConvDoc>| -> crate::error::Result<()> {
        index.apply(&[], batch, generation)?;
        batch.clear();
        Ok(())
    };
    // Both callbacks fill the one batch; a RefCell lets them share it.
    let shared = std::cell::RefCell::new(&mut batch);
    store.read_sync(|c| {
        repo::for_each_indexable(
            c,
            |conv| {
                let mut b = shared.borrow_mut();
                b.push(ConvDoc {
                    user_id: conv.user_id.clone(),
                    conversation_id: conv.id.clone(),
                    message_id: None,
                    text: conv.title.clone(),
                });
                if b.len() >= BATCH {
                    flush(&mut b)?;
                }
                Ok(())
            },
            |user, m| {
                let mut b = shared.borrow_mut();
                b.push(ConvDoc {
                    user_id: user.to_owned(),
                    conversation_id: m.conversation_id.clone(),
                    message_id: Some(m.id.clone()),
                    text: m.content.clone(),
                });
                if b.len() >= BATCH {
                    flush(&mut b)?;
                }
                Ok(())
            },
        )
    })?;
    flush(&mut batch)?;
    tracing::info!(
        docs = count,
        elapsed_ms = started.elapsed().as_millis() as u64,
        "conversation index rebuilt"
    );
    Ok(())
}
