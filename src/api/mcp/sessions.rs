//! Sessions of the handshake revisions: `initialize` opens one (its id goes back as
//! `Mcp-Session-Id`), every later request names it, `DELETE /mcp` ends it. A session
//! belongs to the caller that opened it (another credential gets "not found") and keeps
//! the negotiated protocol version. Held in memory, bounded, and forgotten after an hour
//! unused: a client that finds its session gone initializes again, as the transport
//! specifies for a 404.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

/// Most sessions held at once.
const MAX_SESSIONS: usize = 10_000;
/// A session unused this long is forgotten.
const IDLE: Duration = Duration::from_secs(3600);

struct Session {
    owner: String,
    version: String,
    last_seen: Instant,
}

/// The open sessions.
#[derive(Default)]
pub struct Sessions {
    map: Mutex<HashMap<String, Session>>,
}

impl Sessions {
    /// Opens a session for `owner` at `version`; `None` when the table is full of live
    /// sessions.
    pub fn open(&self, owner: &str, version: &str) -> Option<String> {
        let mut map = self.map.lock();
        if map.len() >= MAX_SESSIONS {
            map.retain(|_, s| s.last_seen.elapsed() < IDLE);
            if map.len() >= MAX_SESSIONS {
                tracing::warn!(sessions = map.len(), "MCP session table full");
                return None;
            }
        }
        let id = uuid::Uuid::new_v4().simple().to_string();
        map.insert(
            id.clone(),
            Session {
                owner: owner.to_owned(),
                version: version.to_owned(),
                last_seen: Instant::now(),
            },
        );
        tracing::info!(session = %id, %owner, %version, "MCP session opened");
        Some(id)
    }

    /// The version of `owner`'s live session `id` (touching it), if there is one.
    pub fn version(&self, id: &str, owner: &str) -> Option<String> {
        let mut map = self.map.lock();
        let s = map.get_mut(id)?;
        if s.owner != owner {
            return None;
        }
        if s.last_seen.elapsed() >= IDLE {
            map.remove(id);
            return None;
        }
        s.last_seen = Instant::now();
        Some(s.version.clone())
    }

    /// Ends `owner`'s session `id`; whether there was one.
    pub fn close(&self, id: &str, owner: &str) -> bool {
        let mut map = self.map.lock();
        if map.get(id).is_some_and(|s| s.owner == owner) {
            map.remove(id);
            tracing::info!(session = %id, "MCP session closed");
            return true;
        }
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_session_belongs_to_its_owner() {
        let s = Sessions::default();
        let id = s.open("user:1", "2025-11-25").unwrap();
        assert_eq!(s.version(&id, "user:1").as_deref(), Some("2025-11-25"));
        assert_eq!(s.version(&id, "user:2"), None);
        assert!(!s.close(&id, "user:2"));
        assert!(s.close(&id, "user:1"));
        assert_eq!(s.version(&id, "user:1"), None);
    }
}
