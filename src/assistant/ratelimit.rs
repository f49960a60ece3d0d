//! Per-user rate limits in fixed one-minute windows measured by the server clock
//! (DECISIONS.md): `Scope::Chat` (chat, conversation and onboarding operations,
//! `config.rate_limit_chat`) and `Scope::Tools` (`execute_tool`, `confirm_action`,
//! `config.rate_limit_tools`). Counters live in memory: a restart resets them, which is
//! acceptable for a one-minute window. Every checked request counts, whatever its outcome.
//!
//! Handlers do not call this directly: they take the `RateLimited<Chat>` /
//! `RateLimited<Tools>` extractor of `api::assistant::limits`, which authenticates,
//! checks, and has the `X-RateLimit-*` headers added to the response.

use std::collections::HashMap;

use parking_lot::Mutex;

use super::AssistantError;
use crate::time::Clock;

/// Length of one window.
pub const WINDOW_SECS: i64 = 60;

/// Which budget a request draws from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Scope {
    /// Chat, conversation and onboarding operations.
    Chat,
    /// Tool executions (`execute_tool`, `confirm_action`).
    Tools,
}

/// The state of one user's window after a request was counted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RateInfo {
    /// Requests allowed per window.
    pub limit: u32,
    /// Requests left in this window.
    pub remaining: u32,
    /// When the window resets, Unix seconds.
    pub reset: i64,
}

impl RateInfo {
    /// Seconds until the window resets (at least 1).
    pub fn retry_after(&self, now: i64) -> u64 {
        (self.reset - now).max(1) as u64
    }
}

/// Fixed-window counters for every user and scope.
pub struct RateLimiter {
    clock: Clock,
    chat: u32,
    tools: u32,
    windows: Mutex<HashMap<(String, Scope), (i64, u32)>>,
}

impl RateLimiter {
    /// Limits per minute for each scope, measured by `clock`.
    pub fn new(clock: Clock, chat: u32, tools: u32) -> Self {
        Self {
            clock,
            chat,
            tools,
            windows: Mutex::new(HashMap::new()),
        }
    }

    /// The limit of `scope`.
    pub fn limit(&self, scope: Scope) -> u32 {
        match scope {
            Scope::Chat => self.chat,
            Scope::Tools => self.tools,
        }
    }

    /// Counts one request of `user_id` in `scope`. Over the limit the error carries
    /// the window's state so the caller can still send the headers.
    pub fn check(
        &self,
        user_id: &str,
        scope: Scope,
    ) -> Result<RateInfo, (RateInfo, AssistantError)> {
        let now = self.clock.unix();
        let start = now - now.rem_euclid(WINDOW_SECS);
        let limit = self.limit(scope);
        let mut windows = self.windows.lock();
        if windows.len() > 10_000 {
            // Forget finished windows so the map stays bounded by active users.
            windows.retain(|_, (s, _)| *s == start);
        }
        let entry = windows
            .entry((user_id.to_owned(), scope))
            .or_insert((start, 0));
        if entry.0 != start {
            *entry = (start, 0);
        }
        let reset = start + WINDOW_SECS;
        if entry.1 >= limit {
            let info = RateInfo {
                limit,
                remaining: 0,
                reset,
            };
            tracing::warn!(user_id, ?scope, limit, "rate limit exceeded");
            let err = AssistantError::RateLimited {
                retry_after: info.retry_after(now),
            };
            return Err((info, err));
        }
        entry.1 += 1;
        Ok(RateInfo {
            limit,
            remaining: limit - entry.1,
            reset,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn fixed_windows_per_user_and_scope() {
        let clock = Clock::default();
        let rl = RateLimiter::new(clock.clone(), 3, 2);
        for i in 0..2 {
            assert_eq!(rl.check("u", Scope::Tools).unwrap().remaining, 1 - i);
        }
        let (info, err) = rl.check("u", Scope::Tools).unwrap_err();
        assert_eq!(info.remaining, 0);
        assert!(
            matches!(err, AssistantError::RateLimited { retry_after } if (1..=60).contains(&retry_after))
        );
        // Other scope and other user are independent.
        assert!(rl.check("u", Scope::Chat).is_ok());
        assert!(rl.check("v", Scope::Tools).is_ok());
        clock.advance(Duration::from_secs(60));
        assert_eq!(rl.check("u", Scope::Tools).unwrap().remaining, 1);
    }
}
