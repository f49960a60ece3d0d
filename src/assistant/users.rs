//! Users of the assistant API and how a request proves who it is: cookie sessions
//! (`login`), `token <api_key>:<api_secret>` and HS256 bearer tokens. Passwords are
//! stored as argon2 hashes, API secrets as SHA-256; both are compared in constant time.
//! On first start with no users an admin is created and its credentials are written once
//! to `<data_dir>/initial-admin.txt` (mode 0600).

mod first_run;
pub mod jwt;
pub mod secrets;

use std::path::{Path, PathBuf};

use serde::Serialize;

use super::AssistantError;
use crate::store::users::{self as repo, UserRow};
use crate::store::Store;
use crate::time::Clock;

type Result<T, E = AssistantError> = std::result::Result<T, E>;

/// A step run inside the user's insert transaction (a failure rolls the insert back).
type AfterInsert<'a> = dyn Fn(&CreatedUser) -> anyhow::Result<()> + 'a;

/// How long a login session lasts.
pub const SESSION_TTL_SECS: i64 = 7 * 24 * 3600;

/// Name of the first-run credentials file in the data directory.
pub const INITIAL_ADMIN_FILE: &str = "initial-admin.txt";

/// The authenticated caller of a request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CurrentUser {
    /// Stable user id.
    pub id: String,
    /// Login email (the JWT `sub`).
    pub email: String,
    /// Whether the user may use admin-only operations.
    pub is_admin: bool,
}

impl CurrentUser {
    /// `Forbidden` unless the user is an admin.
    pub fn require_admin(&self) -> Result<()> {
        if self.is_admin {
            Ok(())
        } else {
            Err(AssistantError::Forbidden(
                "this operation is restricted to administrators".into(),
            ))
        }
    }
}

impl From<&UserRow> for CurrentUser {
    fn from(u: &UserRow) -> Self {
        Self {
            id: u.id.clone(),
            email: u.email.clone(),
            is_admin: u.is_admin,
        }
    }
}

/// A user as listed (no secrets).
#[derive(Debug, Clone, Serialize)]
pub struct UserInfo {
    pub id: String,
    pub email: String,
    pub name: String,
    pub is_admin: bool,
    pub api_key: String,
    pub created_at: String,
}

impl From<UserRow> for UserInfo {
    fn from(u: UserRow) -> Self {
        Self {
            id: u.id,
            email: u.email,
            name: u.name,
            is_admin: u.is_admin,
            api_key: u.api_key,
            created_at: u.created_at,
        }
    }
}

/// What `create` needs.
#[derive(Debug, Clone, Default)]
pub struct NewUser {
    pub email: String,
    /// Display name; defaults to the part of the email before `@`.
    pub name: Option<String>,
    /// At least 8 characters; a random one is generated when absent.
    pub password: Option<String>,
    pub is_admin: bool,
}

/// A freshly created user with its credentials, shown once.
#[derive(Debug, Clone)]
pub struct CreatedUser {
    pub user: UserInfo,
    /// The password (as given, or generated).
    pub password: String,
    pub api_key: String,
    pub api_secret: String,
}

/// A new login session: the cookie value and its expiry (Unix seconds).
#[derive(Debug, Clone)]
pub struct LoginSession {
    pub sid: String,
    pub expires_at: i64,
    pub user: UserInfo,
}

/// The users service; cheap to clone.
#[derive(Clone)]
pub struct Users {
    store: Store,
    clock: Clock,
    jwt_secret: Option<String>,
}

impl Users {
    /// The service over `store`; `jwt_secret` unset turns bearer tokens off.
    pub fn new(store: Store, clock: Clock, jwt_secret: Option<String>) -> Self {
        Self {
            store,
            clock,
            jwt_secret,
        }
    }

    /// Creates a user with a fresh API key and secret.
    pub async fn create(&self, new: NewUser) -> Result<CreatedUser> {
        let this = self.clone();
        tokio::task::spawn_blocking(move || this.create_sync(new, None))
            .await
            .map_err(|e| AssistantError::Internal(e.into()))?
    }

    /// [`create`](Self::create) on the calling thread; `then` runs inside the transaction
    /// after the insert (a failure rolls the user back).
    fn create_sync(&self, new: NewUser, then: Option<&AfterInsert<'_>>) -> Result<CreatedUser> {
        let email = normalize_email(&new.email)?;
        let password = match new.password {
            Some(p) if p.chars().count() < 8 => {
                return Err(AssistantError::BadRequest(
                    "the password must be at least 8 characters".into(),
                ))
            }
            Some(p) => p,
            None => secrets::random_token(1),
        };
        let name = new
            .name
            .filter(|n| !n.trim().is_empty())
            .unwrap_or_else(|| email.split('@').next().unwrap_or_default().to_owned());
        let (api_key, api_secret) = (secrets::random_token(1), secrets::random_token(2));
        let now = self.clock.now_iso();
        let row = UserRow {
            id: uuid::Uuid::new_v4().to_string(),
            email: email.clone(),
            name,
            password_hash: secrets::hash_password(&password)?,
            is_admin: new.is_admin,
            api_key: api_key.clone(),
            api_secret_hash: secrets::sha256_hex(&api_secret),
            created_at: now.clone(),
            updated_at: now,
        };
        let created = CreatedUser {
            user: row.clone().into(),
            password,
            api_key,
            api_secret,
        };
        let out = self.store.write_sync(|tx| {
            if repo::by_email(tx, &email)?.is_some() {
                return Ok(Err(AssistantError::Conflict(format!(
                    "a user with email '{email}' already exists"
                ))));
            }
            repo::insert(tx, &row)?;
            if let Some(f) = then {
                f(&created)?;
            }
            Ok(Ok(()))
        })?;
        out?;
        tracing::info!(user_id = %created.user.id, email = %created.user.email, is_admin = new.is_admin, "user created");
        Ok(created)
    }

    /// Every user.
    pub async fn list(&self) -> Result<Vec<UserInfo>> {
        let rows = self.store.read(repo::list).await?;
        Ok(rows.into_iter().map(UserInfo::from).collect())
    }

    /// Removes a user (its sessions go with it).
    pub async fn remove(&self, email: &str) -> Result<()> {
        let email = normalize_email(email)?;
        let e = email.clone();
        if !self.store.write(move |tx| repo::delete(tx, &e)).await? {
            return Err(AssistantError::NotFound(format!("no user '{email}'")));
        }
        tracing::info!(%email, "user removed");
        Ok(())
    }

    /// Issues a new API key and secret, invalidating the old pair; returns `(key, secret)`.
    pub async fn reset_key(&self, email: &str) -> Result<(String, String)> {
        let email = normalize_email(email)?;
        let (key, secret) = (secrets::random_token(1), secrets::random_token(2));
        let (e, k, h, now) = (
            email.clone(),
            key.clone(),
            secrets::sha256_hex(&secret),
            self.clock.now_iso(),
        );
        let found = self
            .store
            .write(move |tx| repo::set_api_credentials(tx, &e, &k, &h, &now))
            .await?;
        if !found {
            return Err(AssistantError::NotFound(format!("no user '{email}'")));
        }
        tracing::info!(%email, "API key reset");
        Ok((key, secret))
    }

    /// Checks `email` / `password` and opens a login session.
    pub async fn login(&self, email: &str, password: &str) -> Result<LoginSession> {
        let email = email.trim().to_lowercase();
        let row = self
            .store
            .read({
                let e = email.clone();
                move |c| repo::by_email(c, &e)
            })
            .await?;
        let password = password.to_owned();
        let stored = row.as_ref().map(|r| r.password_hash.clone());
        // Verify against a dummy hash for unknown users so timing does not reveal them.
        let ok = tokio::task::spawn_blocking(move || match stored {
            Some(h) => secrets::verify_password(&h, &password),
            None => {
                let _ = secrets::verify_password(dummy_hash(), &password);
                false
            }
        })
        .await
        .map_err(|e| AssistantError::Internal(e.into()))?;
        let Some(user) = row.filter(|_| ok) else {
            tracing::warn!(%email, "failed login");
            return Err(AssistantError::Unauthorized(
                "invalid email or password".into(),
            ));
        };
        let sid = secrets::random_token(2);
        let expires_at = self.clock.unix() + SESSION_TTL_SECS;
        let (h, uid, now) = (
            secrets::sha256_hex(&sid),
            user.id.clone(),
            self.clock.now_iso(),
        );
        self.store
            .write(move |tx| repo::insert_session(tx, &h, &uid, &now, expires_at))
            .await?;
        tracing::info!(user_id = %user.id, "logged in");
        Ok(LoginSession {
            sid,
            expires_at,
            user: user.into(),
        })
    }

    /// Ends the session with this cookie value; whether it existed.
    pub async fn logout(&self, sid: &str) -> Result<bool> {
        let (h, now) = (secrets::sha256_hex(sid), self.clock.unix());
        Ok(self
            .store
            .write(move |tx| repo::delete_session(tx, &h, now))
            .await?)
    }

    /// The user of an unexpired session cookie.
    pub async fn by_session(&self, sid: &str) -> Result<CurrentUser> {
        let (h, now) = (secrets::sha256_hex(sid), self.clock.unix());
        self.store
            .read(move |c| repo::session_user(c, &h, now))
            .await?
            .map(|u| CurrentUser::from(&u))
            .ok_or_else(|| {
                AssistantError::Unauthorized("session expired or invalid; log in again".into())
            })
    }

    /// The user of an `api_key:api_secret` pair.
    pub async fn by_api_key(&self, key: &str, secret: &str) -> Result<CurrentUser> {
        let k = key.to_owned();
        let row = self.store.read(move |c| repo::by_api_key(c, &k)).await?;
        match row {
            Some(u) if secrets::secret_matches(&u.api_secret_hash, secret) => {
                Ok(CurrentUser::from(&u))
            }
            _ => {
                tracing::warn!("rejected an invalid API key");
                Err(AssistantError::Unauthorized(
                    "invalid API key or secret".into(),
                ))
            }
        }
    }

    /// The user named by a valid HS256 bearer token.
    pub async fn by_jwt(&self, token: &str) -> Result<CurrentUser> {
        let Some(secret) = &self.jwt_secret else {
            return Err(AssistantError::Unauthorized(
                "bearer tokens are not enabled on this server (JWT_SECRET is unset)".into(),
            ));
        };
        let claims = jwt::verify(token, secret.as_bytes(), self.clock.unix()).map_err(|e| {
            tracing::warn!(reason = %e, "rejected a bearer token");
            AssistantError::Unauthorized(format!("invalid bearer token: {e}"))
        })?;
        let email = claims.sub.to_lowercase();
        self.store
            .read(move |c| repo::by_email(c, &email))
            .await?
            .map(|u| CurrentUser::from(&u))
            .ok_or_else(|| AssistantError::Unauthorized("the token's user does not exist".into()))
    }

    /// On a database with no users, creates `admin@localhost` (admin) and writes its
    /// credentials to `<data_dir>/initial-admin.txt` (mode 0600); returns the file's path.
    /// Blocking: call at start-up or from a blocking thread.
    pub fn ensure_initial_admin(&self, data_dir: &Path) -> Result<Option<PathBuf>> {
        if self.store.read_sync(repo::count)? > 0 {
            return Ok(None);
        }
        let path = data_dir.join(INITIAL_ADMIN_FILE);
        let write = |c: &CreatedUser| first_run::write_credentials(&path, c);
        let created = self.create_sync(
            NewUser {
                email: "admin@localhost".into(),
                name: Some("Administrator".into()),
                password: None,
                is_admin: true,
            },
            Some(&write),
        )?;
        tracing::warn!(email = %created.user.email, file = %path.display(),
            "no users existed: created an admin; its credentials are in the file (delete it once read)");
        Ok(Some(path))
    }
}

/// Lower-cased, trimmed, and shaped like an email.
fn normalize_email(email: &str) -> Result<String> {
    let e = email.trim().to_lowercase();
    let valid = e.len() <= 254
        && !e.chars().any(char::is_whitespace)
        && e.split_once('@')
            .is_some_and(|(l, d)| !l.is_empty() && !d.is_empty() && !d.contains('@'));
    if !valid {
        return Err(AssistantError::BadRequest(format!(
            "'{email}' is not a valid email"
        )));
    }
    Ok(e)
}

/// A fixed argon2 hash used to spend the same time on unknown users.
fn dummy_hash() -> &'static str {
    static H: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    H.get_or_init(|| secrets::hash_password("ragd-dummy-password").unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn emails_are_normalised() {
        assert_eq!(normalize_email(" A@B.c ").unwrap(), "a@b.c");
        assert!(normalize_email("nope").is_err());
        assert!(normalize_email("a@b@c").is_err());
    }
}
