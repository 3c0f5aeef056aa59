//! A volunteer's enrolment: the credential `bookfarm-worker enroll` obtains from the
//! coordinator, kept in the user's configuration directory (`credential.toml`, mode 0600 in a
//! 0700 directory), and the directories the worker uses.

use serde::{Deserialize, Serialize};
use std::io::Write;
use std::path::{Path, PathBuf};

/// The credential file's name in the configuration directory.
pub const CREDENTIAL_FILE: &str = "credential.toml";

/// Why the enrolment could not be kept or read.
#[derive(Debug, thiserror::Error)]
pub enum EnrolmentFileError {
    /// A credential is stored already (a volunteer's credit is tied to it).
    #[error(
        "{0} holds this machine's credential already; pass --force to replace it (the credit earned with it stays with it)"
    )]
    Exists(PathBuf),
    /// No home directory to keep it in.
    #[error("no configuration directory: set BOOKFARM_CONFIG_DIR")]
    NoDir,
    /// Reading or writing failed.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The IO error.
        #[source]
        source: std::io::Error,
    },
    /// The file is not a credential file.
    #[error("{path}: {message}")]
    Parse {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
}

/// What `enroll` stores.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Enrolment {
    /// The coordinator's URL.
    pub coordinator: String,
    /// The credential's name.
    pub credential: String,
    /// Its owner.
    pub owner: String,
    /// Its token (the secret).
    pub token: String,
    /// CA certificate of a TLS coordinator.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls_ca: Option<PathBuf>,
}

fn project() -> Option<directories::ProjectDirs> {
    directories::ProjectDirs::from("org", "bookfarm", "bookfarm")
}

/// The configuration directory: `BOOKFARM_CONFIG_DIR`, else the platform's
/// (`~/.config/bookfarm` on Linux).
pub fn config_dir() -> Result<PathBuf, EnrolmentFileError> {
    match std::env::var_os("BOOKFARM_CONFIG_DIR").filter(|s| !s.is_empty()) {
        Some(d) => Ok(PathBuf::from(d)),
        None => project()
            .map(|p| p.config_dir().to_path_buf())
            .ok_or(EnrolmentFileError::NoDir),
    }
}

/// The cache directory: `BOOKFARM_CACHE_DIR`, else the platform's (`~/.cache/bookfarm` on
/// Linux).
pub fn cache_dir() -> Result<PathBuf, EnrolmentFileError> {
    match std::env::var_os("BOOKFARM_CACHE_DIR").filter(|s| !s.is_empty()) {
        Some(d) => Ok(PathBuf::from(d)),
        None => project()
            .map(|p| p.cache_dir().to_path_buf())
            .ok_or(EnrolmentFileError::NoDir),
    }
}

/// The stored enrolment in `dir`, if any.
pub fn load(dir: &Path) -> Result<Option<Enrolment>, EnrolmentFileError> {
    let path = dir.join(CREDENTIAL_FILE);
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(source) => return Err(EnrolmentFileError::Io { path, source }),
    };
    toml::from_str(&text)
        .map(Some)
        .map_err(|e| EnrolmentFileError::Parse {
            path,
            message: e.message().to_string(),
        })
}

/// Keep `e` in `dir` (created 0700): written to a new 0600 file beside it, synced, then renamed
/// into place. An existing enrolment is replaced only with `force`.
pub fn save(dir: &Path, e: &Enrolment, force: bool) -> Result<PathBuf, EnrolmentFileError> {
    let path = dir.join(CREDENTIAL_FILE);
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| EnrolmentFileError::Io { path, source }
    };
    if !force && path.exists() {
        return Err(EnrolmentFileError::Exists(path));
    }
    let mut b = std::fs::DirBuilder::new();
    b.recursive(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::DirBuilderExt;
        b.mode(0o700);
    }
    b.create(dir).map_err(io(dir))?;
    let text = format!(
        "# This machine's bookfarm credential, from `bookfarm-worker enroll`. Keep it secret.\n{}",
        toml::to_string(e).map_err(|err| EnrolmentFileError::Parse {
            path: path.clone(),
            message: err.to_string(),
        })?
    );
    // tempfile creates its files with mode 0600.
    let mut tmp = tempfile::NamedTempFile::new_in(dir).map_err(io(dir))?;
    tmp.write_all(text.as_bytes()).map_err(io(tmp.path()))?;
    tmp.as_file().sync_all().map_err(io(tmp.path()))?;
    tmp.persist(&path).map_err(|err| EnrolmentFileError::Io {
        path: path.clone(),
        source: err.error,
    })?;
    Ok(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Enrolment {
        Enrolment {
            coordinator: "https://book.example.org:7700".into(),
            credential: "laptop-1a2b".into(),
            owner: "laptop-1a2b".into(),
            token: "bfw_0123".into(),
            tls_ca: None,
        }
    }

    #[test]
    fn the_credential_is_private_and_never_overwritten_by_accident() {
        let home = tempfile::tempdir().unwrap();
        let dir = home.path().join("config/bookfarm");
        assert_eq!(load(&dir).unwrap(), None);
        let p = save(&dir, &sample(), false).unwrap();
        assert_eq!(load(&dir).unwrap(), Some(sample()));
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode(&p), 0o600, "the file");
            assert_eq!(mode(&dir), 0o700, "its directory");
        }
        let other = Enrolment {
            token: "bfw_4567".into(),
            ..sample()
        };
        let e = save(&dir, &other, false).unwrap_err();
        assert!(matches!(e, EnrolmentFileError::Exists(_)), "{e}");
        assert_eq!(load(&dir).unwrap(), Some(sample()), "unchanged");
        save(&dir, &other, true).unwrap();
        assert_eq!(load(&dir).unwrap(), Some(other));
        // Only the file is left: no temporary beside it.
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 1);
        std::fs::write(&p, "token = 3\n").unwrap();
        assert!(matches!(load(&dir), Err(EnrolmentFileError::Parse { .. })));
    }
}
