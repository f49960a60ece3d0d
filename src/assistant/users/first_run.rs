//! The first-run credentials file: written with mode 0600 before the admin's insert
//! commits, so credentials are never lost to a crash between the two.

use std::io::Write as _;
use std::path::Path;

use super::CreatedUser;

/// Writes `c`'s credentials to `path` (mode 0600, replacing any stale file).
pub(super) fn write_credentials(path: &Path, c: &CreatedUser) -> anyhow::Result<()> {
    let mut opts = std::fs::OpenOptions::new();
    opts.write(true).create(true).truncate(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut opts, 0o600);
    let mut f = opts.open(path)?;
    #[cfg(unix)]
    std::fs::set_permissions(path, std::os::unix::fs::PermissionsExt::from_mode(0o600))?;
    write!(
        f,
        "# ragd initial administrator (written once; delete this file after reading)\n\
         email: {}\npassword: {}\napi_key: {}\napi_secret: {}\n\
         # Authorization: token {}:{}\n",
        c.user.email, c.password, c.api_key, c.api_secret, c.api_key, c.api_secret
    )?;
    f.sync_all()?;
    Ok(())
}
