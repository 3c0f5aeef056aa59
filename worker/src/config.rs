//! Worker configuration: the validated library [`WorkerConfig`], the settings file
//! (`worker.toml`, [`WorkerFile`]) and `bookfarm-worker run`'s flags ([`RunArgs`]).
//!
//! Precedence: flag > environment (`BOOKFARM_*`, read by clap with the flag) > file > the
//! enrolment (`enroll`) > default. The file is `--config FILE` when given, else
//! `<config_dir>/worker.toml` when it exists ([`crate::enrol::config_dir`]: `BOOKFARM_CONFIG_DIR`,
//! else `~/.config/bookfarm` on Linux). Every value in the file is checked when it is loaded,
//! even one a flag overrides: a bad value is an error naming its key and the file.

use crate::enrol::Enrolment;
use crate::polite::{ActiveHours, PoliteSettings, Priority};
pub use bookfarm_runner::AckHook;
use serde::Deserialize;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Settings of one worker process.
#[derive(Debug, Clone)]
pub struct WorkerConfig {
    /// Coordinator URL (`http://host:7700`).
    pub coordinator: String,
    /// Search threads.
    pub threads: usize,
    /// Jobs leased beyond the free threads, so no thread idles between results.
    pub lookahead: usize,
    /// Name shown in the coordinator's status.
    pub name: String,
    /// Authentication token.
    pub token: String,
    /// Fingerprint of the evaluation weights (sent with every RPC).
    pub eval_hash: String,
    /// The search signature of the searchers ([`bookfarm_runner::signature`]; sent with every
    /// RPC).
    pub search_signature: String,
    /// Longest wait between reconnection attempts.
    pub max_backoff: Duration,
    /// Per-RPC timeout.
    pub rpc_timeout: Duration,
    /// Exit instead of retrying when the coordinator cannot be reached for this long
    /// (None: retry forever).
    pub give_up_after: Option<Duration>,
    /// Called for every acknowledgement the coordinator sends (tests log acknowledged job ids).
    pub on_ack: Option<AckHook>,
    /// PEM certificate of the CA that signed the coordinator's certificate (enables TLS; the
    /// URL must then be `https://`).
    pub tls_ca: Option<Vec<u8>>,
    /// Server name to verify (default: the URL's host).
    pub tls_domain: Option<String>,
    /// Priority, CPU share, active hours, battery, progress line.
    pub polite: PoliteSettings,
}

impl Default for WorkerConfig {
    fn default() -> Self {
        WorkerConfig {
            coordinator: "http://127.0.0.1:7700".into(),
            threads: 1,
            lookahead: 1,
            name: "worker".into(),
            token: String::new(),
            eval_hash: String::new(),
            search_signature: String::new(),
            max_backoff: Duration::from_secs(30),
            rpc_timeout: Duration::from_secs(30),
            give_up_after: None,
            on_ack: None,
            tls_ca: None,
            tls_domain: None,
            polite: PoliteSettings::default(),
        }
    }
}

/// The settings file's name in the configuration directory.
pub const CONFIG_FILE: &str = "worker.toml";

/// Search threads a worker may run (flag and file).
pub const THREADS: std::ops::RangeInclusive<usize> = 1..=4096;
/// Jobs leased beyond the free threads (flag and file).
pub const LOOKAHEAD: std::ops::RangeInclusive<usize> = 0..=64;
/// The longest reconnection backoff, seconds (file).
pub const MAX_BACKOFF_SECS: std::ops::RangeInclusive<u64> = 1..=3600;
/// A share of a core (flag and file).
pub const CPU_SHARE: std::ops::RangeInclusive<f64> = 0.01..=1.0;
/// Seconds of the pause grace and the progress period (flag and file).
pub const SECONDS: std::ops::RangeInclusive<u64> = 0..=86_400;

/// The range of a flag that `worker.toml` also sets, as clap takes it: the file's.
fn flag_range(r: &std::ops::RangeInclusive<usize>) -> std::ops::RangeInclusive<i64> {
    let bound = |v: usize| i64::try_from(v).expect("a setting's bound fits an i64");
    bound(*r.start())..=bound(*r.end())
}

/// The `worker.toml` file.
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct WorkerFile {
    /// Coordinator URL.
    pub coordinator: Option<String>,
    /// Search threads (default: all cores).
    pub threads: Option<usize>,
    /// Extra jobs leased ahead (default 1).
    pub lookahead: Option<usize>,
    /// Worker name (default: host name).
    pub name: Option<String>,
    /// Authentication token.
    pub token: Option<String>,
    /// A file holding the authentication token (see [`read_token_file`]).
    pub token_file: Option<PathBuf>,
    /// Evaluation weights file.
    pub eval: Option<PathBuf>,
    /// Longest reconnection backoff, seconds (default 30).
    pub max_backoff_secs: Option<u64>,
    /// CA certificate (PEM) for a TLS coordinator (`https://` URL).
    pub tls_ca: Option<PathBuf>,
    /// Server name to verify instead of the URL's host.
    pub tls_domain: Option<String>,
    /// Scheduling priority of the search threads: idle (default), low or normal.
    pub priority: Option<String>,
    /// Share of each search thread's core the searches may use, 0.01..=1 (default 1).
    pub cpu_share: Option<f64>,
    /// Hours of the day (local time) when the worker may search, e.g. "19:00-07:30"
    /// (default: always).
    pub active_hours: Option<String>,
    /// Pause while the machine runs on its battery (default true).
    pub pause_on_battery: Option<bool>,
    /// A paused worker finishes or hands back its jobs within this many seconds (default 30).
    pub pause_grace_secs: Option<u64>,
    /// Seconds between two progress lines (default 60; 0: none).
    pub progress_secs: Option<u64>,
}

impl WorkerFile {
    /// Parse TOML text (syntax and types only; [`Settings`] checks the values).
    pub fn parse(text: &str) -> Result<WorkerFile, toml::de::Error> {
        toml::from_str(text)
    }
}

/// Why the worker's settings cannot be used. Every variant names the file or flag at fault.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The settings file cannot be read.
    #[error("reading {}: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// The IO error.
        #[source]
        source: std::io::Error,
    },
    /// The settings file is not TOML of the expected keys and types.
    #[error("{}: {message}", path.display())]
    Parse {
        /// The file.
        path: PathBuf,
        /// toml's message: the line, the key and what is wrong.
        message: String,
    },
    /// A value in the settings file is refused.
    #[error("{}: {key}: {message}", path.display())]
    Value {
        /// The file.
        path: PathBuf,
        /// The key.
        key: &'static str,
        /// What is wrong, with what is expected.
        message: String,
    },
    /// A file a flag names cannot be used.
    #[error("{flag}: {message}")]
    Flag {
        /// The flag (`--token-file`, `--tls-ca`).
        flag: &'static str,
        /// What is wrong.
        message: String,
    },
}

/// Why a token file cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum TokenFileError {
    /// Missing or unreadable.
    #[error("cannot read {}: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// The IO error.
        #[source]
        source: std::io::Error,
    },
    /// Other users may read it (unix): the credential may have leaked.
    #[error(
        "{} is readable by other users (mode {mode:04o}): the credential in it is a secret; \
         `chmod 600 {}` (and consider revoking it if others could read it)",
        path.display(),
        path.display()
    )]
    TooOpen {
        /// The file.
        path: PathBuf,
        /// Its permission bits.
        mode: u32,
    },
    /// It holds no token.
    #[error("{} is empty: it should hold the worker's credential", path.display())]
    Empty {
        /// The file.
        path: PathBuf,
    },
}

/// The permission bits of `path` if they expose the credential in it (see [`careless`]: the
/// worker's own user owns it and may write it, and group or others may read it; unix,
/// elsewhere None).
fn exposed(path: &Path) -> std::io::Result<Option<u32>> {
    #[cfg(unix)]
    {
        exposed_to(path, rustix::process::geteuid().as_raw())
    }
    #[cfg(not(unix))]
    {
        std::fs::metadata(path).map(|_| None)
    }
}

/// [`exposed`] for a worker running as user `me`.
#[cfg(unix)]
fn exposed_to(path: &Path, me: u32) -> std::io::Result<Option<u32>> {
    use std::os::unix::fs::MetadataExt;
    let meta = std::fs::metadata(path)?;
    let mode = meta.mode() & 0o7777;
    Ok(careless(meta.uid(), mode, me).then_some(mode))
}

/// The credential-file rule (unix): a file is refused when the worker's user (`me`) owns it,
/// may write it, and lets group or others read it (`mode & 0o044`). That is the file a user
/// made with a umask of 022 (mode 0644) and may fix with `chmod 600`, as OpenSSH refuses a
/// private key its user owns and others may read. Any other file was provisioned for the
/// worker and its mode is the provisioner's choice: a secret another user owns (Docker's and
/// podman's `/run/secrets/NAME`, root's, mode 0444; a Kubernetes Secret), or one nobody may
/// write (a read-only secret mounted for a worker that runs as root, mode 0444 or 0440).
#[cfg(unix)]
fn careless(owner: u32, mode: u32, me: u32) -> bool {
    owner == me && mode & 0o200 != 0 && mode & 0o044 != 0
}

/// The token in `path`: its first line, trimmed. On unix a file the worker's own user owns
/// and may write must not be readable by group or others (mode 0600, as `enroll`, `workers
/// add --token-file` and systemd's `LoadCredential=` make it); a secret provisioned for the
/// worker (another user's, or one nobody may write: container secrets) is read whatever its
/// mode. A token a user left open to others is refused, not sent.
pub fn read_token_file(path: &Path) -> Result<String, TokenFileError> {
    let read = |source| TokenFileError::Read {
        path: path.to_path_buf(),
        source,
    };
    if let Some(mode) = exposed(path).map_err(read)? {
        return Err(TokenFileError::TooOpen {
            path: path.to_path_buf(),
            mode,
        });
    }
    let text = std::fs::read_to_string(path).map_err(read)?;
    let token = text.trim().lines().next().unwrap_or_default().trim();
    if token.is_empty() {
        return Err(TokenFileError::Empty {
            path: path.to_path_buf(),
        });
    }
    Ok(token.to_string())
}

/// The settings file in use: its path (None: no file) and its checked values.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Settings {
    /// Where it was read from.
    pub path: Option<PathBuf>,
    /// Its values, each within its range.
    pub file: WorkerFile,
    /// Its parsed priority.
    priority: Option<Priority>,
    /// Its parsed active hours.
    active_hours: Option<ActiveHours>,
    /// Its permission bits when they expose a token in it (see [`careless`]; None: they do
    /// not, or it was not read from disk).
    readable_by_others: Option<u32>,
}

impl Settings {
    /// The settings file: `explicit` (`--config`; it must exist), else `worker.toml` in
    /// `config_dir` if there is one there, else none.
    pub fn load(
        explicit: Option<&Path>,
        config_dir: Option<&Path>,
    ) -> Result<Settings, ConfigError> {
        let (path, required) = match (explicit, config_dir) {
            (Some(p), _) => (p.to_path_buf(), true),
            (None, Some(d)) => (d.join(CONFIG_FILE), false),
            (None, None) => return Ok(Settings::default()),
        };
        let text = match std::fs::read_to_string(&path) {
            Ok(t) => t,
            Err(e) if !required && e.kind() == std::io::ErrorKind::NotFound => {
                return Ok(Settings::default());
            }
            Err(source) => return Err(ConfigError::Read { path, source }),
        };
        let mut s = Settings::from_text(&path, &text)?;
        s.readable_by_others = exposed(&path).map_err(|source| ConfigError::Read {
            path: path.clone(),
            source,
        })?;
        Ok(s)
    }

    /// Parse and check `text`, the contents of `path`.
    pub fn from_text(path: &Path, text: &str) -> Result<Settings, ConfigError> {
        let mut file = WorkerFile::parse(text).map_err(|e| ConfigError::Parse {
            path: path.to_path_buf(),
            message: e.to_string().trim_end().to_string(),
        })?;
        // Relative paths in the file are relative to the file, wherever the worker starts.
        if let Some(dir) = path.parent() {
            for p in [&mut file.token_file, &mut file.eval, &mut file.tls_ca]
                .into_iter()
                .flatten()
            {
                if p.is_relative() {
                    *p = dir.join(&*p);
                }
            }
        }
        let bad = |key: &'static str, message: String| ConfigError::Value {
            path: path.to_path_buf(),
            key,
            message,
        };
        fn range<T: PartialOrd + std::fmt::Display>(
            v: Option<T>,
            r: &std::ops::RangeInclusive<T>,
        ) -> Result<(), String> {
            match v {
                Some(v) if !r.contains(&v) => Err(format!(
                    "{v} is out of range: expected {} to {}",
                    r.start(),
                    r.end()
                )),
                _ => Ok(()),
            }
        }
        if let Some(c) = &file.coordinator
            && !(c.starts_with("http://") || c.starts_with("https://"))
        {
            return Err(bad(
                "coordinator",
                format!("{c:?}: expected a URL, http://HOST:PORT or https://HOST:PORT"),
            ));
        }
        range(file.threads, &THREADS).map_err(|m| bad("threads", m))?;
        range(file.lookahead, &LOOKAHEAD).map_err(|m| bad("lookahead", m))?;
        range(file.max_backoff_secs, &MAX_BACKOFF_SECS).map_err(|m| bad("max_backoff_secs", m))?;
        range(file.cpu_share, &CPU_SHARE).map_err(|m| bad("cpu_share", m))?;
        range(file.pause_grace_secs, &SECONDS).map_err(|m| bad("pause_grace_secs", m))?;
        range(file.progress_secs, &SECONDS).map_err(|m| bad("progress_secs", m))?;
        for (key, v) in [
            ("name", &file.name),
            ("token", &file.token),
            ("tls_domain", &file.tls_domain),
        ] {
            if v.as_deref().is_some_and(|s| s.trim().is_empty()) {
                return Err(bad(key, "empty: remove the line or give a value".into()));
            }
        }
        if file.token.is_some() && file.token_file.is_some() {
            return Err(bad(
                "token_file",
                "token and token_file both given: keep one".into(),
            ));
        }
        let priority = match &file.priority {
            Some(p) => Some(
                p.parse::<Priority>()
                    .map_err(|e| bad("priority", e.to_string()))?,
            ),
            None => None,
        };
        let active_hours = match &file.active_hours {
            Some(h) => Some(
                h.parse::<ActiveHours>()
                    .map_err(|e| bad("active_hours", e.to_string()))?,
            ),
            None => None,
        };
        Ok(Settings {
            path: Some(path.to_path_buf()),
            file,
            priority,
            active_hours,
            readable_by_others: None,
        })
    }

    /// An error about `key` of this file.
    fn bad(&self, key: &'static str, message: String) -> ConfigError {
        ConfigError::Value {
            path: self.path.clone().unwrap_or_default(),
            key,
            message,
        }
    }
}

fn cpu_share(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(x) if CPU_SHARE.contains(&x) => Ok(x),
        _ => Err(format!("{s:?}: expected a share between 0.01 and 1")),
    }
}

/// `bookfarm-worker run`'s settings on the command line (each over its `BOOKFARM_*` variable,
/// over the settings file).
#[derive(Debug, Clone, Default, clap::Args)]
pub struct RunArgs {
    /// Coordinator URL.
    #[arg(long, env = "BOOKFARM_COORDINATOR")]
    pub coordinator: Option<String>,
    /// Search threads, 1..=4096 (default: all cores).
    #[arg(long, env = "BOOKFARM_THREADS", value_parser = clap::value_parser!(u16).range(flag_range(&THREADS)))]
    pub threads: Option<u16>,
    /// Worker name shown by the coordinator (default: host name).
    #[arg(long, env = "BOOKFARM_NAME")]
    pub name: Option<String>,
    /// Evaluation weights (Edax eval.dat format; default: the coordinator's, fetched and
    /// cached, or the embedded bookfarm weights).
    #[arg(long, env = "BOOKFARM_EVAL")]
    pub eval: Option<PathBuf>,
    /// This worker's credential (`bookfarm-coordinator workers add NAME` prints it); empty
    /// for a coordinator on a loopback address without credentials.
    #[arg(long, env = "BOOKFARM_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
    /// Read the credential from this file (first line), as container secrets and systemd
    /// credentials (`LoadCredential=`) hand it over. On unix a file of the worker's own user
    /// that it may write must not be readable by group or others (chmod 600).
    #[arg(long, env = "BOOKFARM_TOKEN_FILE", conflicts_with = "token")]
    pub token_file: Option<PathBuf>,
    /// Jobs leased beyond the free threads, 0..=64.
    #[arg(long, value_parser = clap::value_parser!(u8).range(flag_range(&LOOKAHEAD)))]
    pub lookahead: Option<u8>,
    /// CA certificate (PEM) of a TLS coordinator (use an https:// URL).
    #[arg(long, env = "BOOKFARM_TLS_CA")]
    pub tls_ca: Option<PathBuf>,
    /// Server name to verify instead of the URL's host.
    #[arg(long)]
    pub tls_domain: Option<String>,
    /// Settings file [default: worker.toml in the configuration directory, if there is one:
    /// $BOOKFARM_CONFIG_DIR, else ~/.config/bookfarm].
    #[arg(long, env = "BOOKFARM_WORKER_CONFIG")]
    pub config: Option<PathBuf>,
    #[command(flatten)]
    pub polite: PoliteArgs,
}

/// The polite settings on the command line (over `worker.toml`).
#[derive(Debug, Clone, Default, clap::Args)]
pub struct PoliteArgs {
    /// Scheduling priority of the search threads: idle (SCHED_IDLE: only when nothing else
    /// wants the CPU), low (nice 19) or normal [default: idle].
    #[arg(long, env = "BOOKFARM_PRIORITY")]
    pub priority: Option<Priority>,
    /// Share of each search thread's core the searches may use, 0.01..=1 [default: 1].
    #[arg(long, env = "BOOKFARM_CPU_SHARE", value_parser = cpu_share)]
    pub cpu_share: Option<f64>,
    /// Local hours when the worker may search, e.g. 19:00-07:30 or 00:00-08:00,12:00-13:00
    /// [default: always].
    #[arg(long, env = "BOOKFARM_ACTIVE_HOURS")]
    pub active_hours: Option<ActiveHours>,
    /// Pause while the machine runs on its battery [default: true].
    #[arg(long, env = "BOOKFARM_PAUSE_ON_BATTERY")]
    pub pause_on_battery: Option<bool>,
    /// A paused worker finishes or hands back its jobs within this many seconds [default: 30].
    #[arg(long, value_parser = clap::value_parser!(u64).range(SECONDS))]
    pub pause_grace: Option<u64>,
    /// Seconds between two progress lines (0: none) [default: 60].
    #[arg(long, value_parser = clap::value_parser!(u64).range(SECONDS))]
    pub progress_secs: Option<u64>,
    /// The power-supply class directory watched for the battery.
    #[arg(long, env = "BOOKFARM_POWER_SUPPLY_DIR", hide = true)]
    pub power_supply_dir: Option<PathBuf>,
}

impl PoliteArgs {
    /// The settings: these flags over the file's over the volunteer defaults.
    pub fn settings(self, s: &Settings) -> PoliteSettings {
        let d = PoliteSettings::volunteer();
        let f = &s.file;
        let secs = |v: Option<u64>| v.map(Duration::from_secs);
        PoliteSettings {
            priority: self.priority.or(s.priority).unwrap_or(d.priority),
            cpu_share: self.cpu_share.or(f.cpu_share).unwrap_or(d.cpu_share),
            active_hours: self.active_hours.or_else(|| s.active_hours.clone()),
            pause_on_battery: self
                .pause_on_battery
                .or(f.pause_on_battery)
                .unwrap_or(d.pause_on_battery),
            pause_grace: secs(self.pause_grace.or(f.pause_grace_secs)).unwrap_or(d.pause_grace),
            power_supply: self.power_supply_dir.unwrap_or(d.power_supply),
            progress_every: match self.progress_secs.or(f.progress_secs) {
                Some(0) => None,
                Some(s) => Some(Duration::from_secs(s)),
                None => d.progress_every,
            },
        }
    }
}

/// What `run` needs besides the [`WorkerConfig`]: where it came from.
#[derive(Debug, Clone)]
pub struct Resolved {
    /// The worker's settings (its search signature and evaluation fingerprint still empty).
    pub config: WorkerConfig,
    /// The evaluation file given (None: the coordinator's).
    pub eval: Option<PathBuf>,
    /// Where the token came from (for the log; never the token itself).
    pub token_from: &'static str,
}

/// The worker's settings: `args` over the file `s` over the enrolment `enrolled` (used only
/// when its coordinator is the one chosen: its token is never sent to another) over the
/// defaults (`cores` threads, `host` as the name). Reads the token file and CA certificate
/// that the winning setting names.
pub fn resolve(
    args: RunArgs,
    s: &Settings,
    enrolled: Option<&Enrolment>,
    cores: usize,
    host: impl FnOnce() -> String,
) -> Result<Resolved, ConfigError> {
    let d = WorkerConfig::default();
    let f = &s.file;
    let RunArgs {
        coordinator,
        threads,
        name,
        eval,
        token,
        token_file,
        lookahead,
        tls_ca,
        tls_domain,
        config: _,
        polite,
    } = args;
    let polite = polite.settings(s);
    let coordinator = coordinator
        .or_else(|| f.coordinator.clone())
        .or_else(|| enrolled.map(|e| e.coordinator.clone()))
        .unwrap_or(d.coordinator);
    let enrolled = enrolled.filter(|e| e.coordinator == coordinator);
    let flag = |flag: &'static str| {
        move |e: TokenFileError| ConfigError::Flag {
            flag,
            message: e.to_string(),
        }
    };
    let (token, token_from) = if let Some(t) = token {
        (t, "--token")
    } else if let Some(p) = token_file {
        (
            read_token_file(&p).map_err(flag("--token-file"))?,
            "--token-file",
        )
    } else if let Some(t) = &f.token {
        // The same rule as a token file: a token others can read is refused, not sent.
        if let Some(mode) = s.readable_by_others {
            let p = s.path.as_deref().unwrap_or(Path::new("")).display();
            return Err(s.bad(
                "token",
                format!(
                    "the file is readable by other users (mode {mode:04o}) and holds the \
                     worker's credential: `chmod 600 {p}`, or move the token to a token_file"
                ),
            ));
        }
        (t.trim().to_string(), "token")
    } else if let Some(p) = &f.token_file {
        (
            read_token_file(p).map_err(|e| s.bad("token_file", e.to_string()))?,
            "token_file",
        )
    } else if let Some(e) = enrolled {
        (e.token.clone(), "enrolment")
    } else {
        (String::new(), "none")
    };
    let read_ca =
        |p: &Path| std::fs::read(p).map_err(|e| format!("cannot read {}: {e}", p.display()));
    let tls_ca = if let Some(p) = tls_ca {
        Some(read_ca(&p).map_err(|message| ConfigError::Flag {
            flag: "--tls-ca",
            message,
        })?)
    } else if let Some(p) = &f.tls_ca {
        Some(read_ca(p).map_err(|m| s.bad("tls_ca", m))?)
    } else if let Some(p) = enrolled.and_then(|e| e.tls_ca.as_ref()) {
        Some(read_ca(p).map_err(|message| ConfigError::Flag {
            flag: "the enrolment's tls_ca",
            message,
        })?)
    } else {
        None
    };
    let config = WorkerConfig {
        coordinator,
        threads: threads
            .map(usize::from)
            .or(f.threads)
            .unwrap_or(cores.max(1)),
        lookahead: lookahead
            .map(usize::from)
            .or(f.lookahead)
            .unwrap_or(d.lookahead),
        name: name.or_else(|| f.name.clone()).unwrap_or_else(host),
        token,
        max_backoff: f
            .max_backoff_secs
            .map_or(d.max_backoff, Duration::from_secs),
        tls_ca,
        tls_domain: tls_domain.or_else(|| f.tls_domain.clone()),
        polite,
        ..d
    };
    Ok(Resolved {
        config,
        eval: eval.or_else(|| f.eval.clone()),
        token_from,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[test]
    fn example_config_parses() {
        let f = WorkerFile::parse(include_str!("../../deploy/worker.toml"))
            .expect("deploy/worker.toml parses");
        assert!(f.coordinator.unwrap().starts_with("http"));
        assert!(f.eval.is_some());
        let p = f
            .priority
            .unwrap()
            .parse::<crate::polite::Priority>()
            .unwrap();
        assert_eq!(p, crate::polite::Priority::Idle);
        assert_eq!(f.active_hours, None, "the example searches at all hours");
        assert_eq!(f.pause_on_battery, Some(true));
        Settings::from_text(
            Path::new("deploy/worker.toml"),
            include_str!("../../deploy/worker.toml"),
        )
        .expect("deploy/worker.toml's values are accepted");
    }

    #[test]
    fn unknown_keys_are_rejected() {
        assert!(WorkerFile::parse("thread = 3\n").is_err());
        let e = Settings::from_text(Path::new("/etc/w.toml"), "thread = 3\n").unwrap_err();
        let m = e.to_string();
        assert!(
            m.starts_with("/etc/w.toml: ") && m.contains("thread"),
            "{m}"
        );
    }

    /// `run`'s flags as clap reads them from `argv` (after `run`).
    fn flags(argv: &[&str]) -> RunArgs {
        #[derive(Parser)]
        struct Run {
            #[command(flatten)]
            args: RunArgs,
        }
        Run::try_parse_from(std::iter::once("run").chain(argv.iter().copied()))
            .unwrap()
            .args
    }

    fn settings(text: &str) -> Result<Settings, ConfigError> {
        Settings::from_text(Path::new("/home/v/.config/bookfarm/worker.toml"), text)
    }

    #[test]
    fn a_bad_value_is_refused_naming_its_key_and_the_file() {
        for (text, key) in [
            ("threads = 0", "threads"),
            ("threads = 5000", "threads"),
            ("lookahead = 65", "lookahead"),
            ("max_backoff_secs = 0", "max_backoff_secs"),
            ("cpu_share = 0.0", "cpu_share"),
            ("cpu_share = 1.5", "cpu_share"),
            ("cpu_share = nan", "cpu_share"),
            ("pause_grace_secs = 100000", "pause_grace_secs"),
            ("progress_secs = 100000", "progress_secs"),
            ("priority = \"nice\"", "priority"),
            ("active_hours = \"7pm-8am\"", "active_hours"),
            ("coordinator = \"book.example.org:7700\"", "coordinator"),
            ("name = \" \"", "name"),
            ("token = \"\"", "token"),
            ("token = \"a\"\ntoken_file = \"/t\"", "token_file"),
            // Wrong types and negative numbers: toml's own message, with the line.
            ("threads = -1", "threads"),
            ("threads = \"4\"", "threads"),
        ] {
            let e = settings(text).expect_err(text);
            let m = e.to_string();
            assert!(
                m.contains("/home/v/.config/bookfarm/worker.toml") && m.contains(key),
                "{text}: {m}"
            );
        }
        let m = settings("threads = 0").unwrap_err().to_string();
        assert_eq!(
            m,
            "/home/v/.config/bookfarm/worker.toml: threads: 0 is out of range: expected 1 to 4096"
        );
        // The limits themselves are accepted.
        let ok = settings(
            "threads = 1\nlookahead = 0\ncpu_share = 0.01\nprogress_secs = 0\n\
             pause_grace_secs = 86400\nmax_backoff_secs = 3600\n",
        )
        .unwrap();
        assert_eq!(ok.file.threads, Some(1));
    }

    /// The flags that `worker.toml` also sets accept exactly the file's ranges.
    #[test]
    fn a_flag_takes_the_range_of_its_file_setting() {
        #[derive(Parser)]
        struct Run {
            #[command(flatten)]
            args: RunArgs,
        }
        let parses =
            |flag: &str, v: u64| Run::try_parse_from(["run", flag, &v.to_string()]).is_ok();
        let usize_bounds =
            |r: &std::ops::RangeInclusive<usize>| (*r.start() as u64, *r.end() as u64);
        for (flag, (lo, hi)) in [
            ("--threads", usize_bounds(&THREADS)),
            ("--lookahead", usize_bounds(&LOOKAHEAD)),
            ("--pause-grace", (*SECONDS.start(), *SECONDS.end())),
            ("--progress-secs", (*SECONDS.start(), *SECONDS.end())),
        ] {
            assert!(parses(flag, lo) && parses(flag, hi), "{flag} {lo}..={hi}");
            assert!(!parses(flag, hi + 1), "{flag} above {hi}");
            if lo > 0 {
                assert!(!parses(flag, lo - 1), "{flag} below {lo}");
            }
        }
    }

    #[test]
    fn the_file_is_the_given_one_else_worker_toml_in_the_config_directory() {
        let dir = tempfile::tempdir().unwrap();
        let conf = dir.path().join("bookfarm");
        // No directory, no file: the defaults.
        assert_eq!(
            Settings::load(None, Some(&conf)).unwrap(),
            Settings::default()
        );
        assert_eq!(Settings::load(None, None).unwrap(), Settings::default());
        std::fs::create_dir(&conf).unwrap();
        std::fs::write(conf.join(CONFIG_FILE), "threads = 3\n").unwrap();
        let auto = Settings::load(None, Some(&conf)).unwrap();
        assert_eq!(auto.path, Some(conf.join(CONFIG_FILE)));
        assert_eq!(auto.file.threads, Some(3));
        // --config wins over the directory's file, and must exist.
        let other = dir.path().join("other.toml");
        std::fs::write(&other, "threads = 5\n").unwrap();
        let given = Settings::load(Some(&other), Some(&conf)).unwrap();
        assert_eq!(given.file.threads, Some(5));
        let missing = dir.path().join("missing.toml");
        let e = Settings::load(Some(&missing), Some(&conf)).unwrap_err();
        assert!(matches!(e, ConfigError::Read { .. }), "{e}");
        assert!(e.to_string().contains("missing.toml"), "{e}");
        // A file in the directory that cannot be read is an error, not the defaults.
        std::fs::remove_file(conf.join(CONFIG_FILE)).unwrap();
        std::fs::create_dir(conf.join(CONFIG_FILE)).unwrap();
        let e = Settings::load(None, Some(&conf)).unwrap_err();
        assert!(e.to_string().contains("worker.toml"), "{e}");
    }

    fn enrolment() -> Enrolment {
        Enrolment {
            coordinator: "https://book.example.org:7700".into(),
            credential: "pc-1a2b".into(),
            owner: "pc-1a2b".into(),
            token: "bfw_enrolled".into(),
            tls_ca: None,
        }
    }

    #[test]
    fn flags_override_the_file_which_overrides_the_enrolment_and_defaults() {
        let host = || "host".to_string();
        let file = settings(
            "coordinator = \"http://file:7700\"\nthreads = 3\nlookahead = 2\nname = \"from-file\"\n\
             token = \"bfw_file\"\neval = \"/file/eval.dat\"\nmax_backoff_secs = 9\n\
             tls_domain = \"file.example\"\npriority = \"low\"\ncpu_share = 0.5\n\
             active_hours = \"19:00-07:00\"\npause_on_battery = false\npause_grace_secs = 5\n\
             progress_secs = 0\n",
        )
        .unwrap();
        // The file alone.
        let r = resolve(flags(&[]), &file, Some(&enrolment()), 8, host).unwrap();
        let c = &r.config;
        assert_eq!(c.coordinator, "http://file:7700");
        assert_eq!((c.threads, c.lookahead), (3, 2));
        assert_eq!(
            (c.name.as_str(), c.token.as_str()),
            ("from-file", "bfw_file")
        );
        assert_eq!(r.token_from, "token");
        assert_eq!(r.eval.as_deref(), Some(Path::new("/file/eval.dat")));
        assert_eq!(c.max_backoff, Duration::from_secs(9));
        assert_eq!(c.tls_domain.as_deref(), Some("file.example"));
        assert_eq!(c.polite.priority, Priority::Low);
        assert_eq!(c.polite.cpu_share, 0.5);
        assert_eq!(
            c.polite.active_hours.as_ref().unwrap().to_string(),
            "19:00-07:00"
        );
        assert!(!c.polite.pause_on_battery);
        assert_eq!(c.polite.pause_grace, Duration::from_secs(5));
        assert_eq!(c.polite.progress_every, None);
        // Every flag over it.
        let argv = [
            "--coordinator",
            "http://flag:7700",
            "--threads",
            "2",
            "--lookahead",
            "0",
            "--name",
            "from-flag",
            "--token",
            "bfw_flag",
            "--eval",
            "/flag/eval.dat",
            "--tls-domain",
            "flag.example",
            "--priority",
            "normal",
            "--cpu-share",
            "0.25",
            "--active-hours",
            "01:00-02:00",
            "--pause-on-battery",
            "true",
            "--pause-grace",
            "7",
            "--progress-secs",
            "11",
        ];
        let r = resolve(flags(&argv), &file, Some(&enrolment()), 8, host).unwrap();
        let c = &r.config;
        assert_eq!(c.coordinator, "http://flag:7700");
        assert_eq!((c.threads, c.lookahead), (2, 0));
        assert_eq!(
            (c.name.as_str(), c.token.as_str()),
            ("from-flag", "bfw_flag")
        );
        assert_eq!(r.token_from, "--token");
        assert_eq!(r.eval.as_deref(), Some(Path::new("/flag/eval.dat")));
        assert_eq!(c.tls_domain.as_deref(), Some("flag.example"));
        assert_eq!(c.polite.priority, Priority::Normal);
        assert_eq!(c.polite.cpu_share, 0.25);
        assert_eq!(
            c.polite.active_hours.as_ref().unwrap().to_string(),
            "01:00-02:00"
        );
        assert!(c.polite.pause_on_battery);
        assert_eq!(c.polite.pause_grace, Duration::from_secs(7));
        assert_eq!(c.polite.progress_every, Some(Duration::from_secs(11)));
        // No flag, no file: the enrolment, then the defaults.
        let none = Settings::default();
        let r = resolve(flags(&[]), &none, Some(&enrolment()), 8, host).unwrap();
        let c = &r.config;
        assert_eq!(c.coordinator, "https://book.example.org:7700");
        assert_eq!(
            (c.token.as_str(), r.token_from),
            ("bfw_enrolled", "enrolment")
        );
        assert_eq!((c.threads, c.lookahead, c.name.as_str()), (8, 1, "host"));
        assert_eq!(c.polite, PoliteSettings::volunteer());
        assert_eq!(r.eval, None);
        // The enrolled token never goes to another coordinator.
        let r = resolve(
            flags(&["--coordinator", "http://other:7700"]),
            &none,
            Some(&enrolment()),
            8,
            host,
        )
        .unwrap();
        assert_eq!((r.config.token.as_str(), r.token_from), ("", "none"));
    }

    #[cfg(unix)]
    fn write_mode(path: &Path, text: &str, mode: u32) {
        use std::os::unix::fs::PermissionsExt;
        std::fs::write(path, text).unwrap();
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
    }

    /// The rule on real files: a file the worker's user owns and may write is refused when
    /// group or others may read it; a secret mounted for it is read whatever its mode: one
    /// nobody may write (Docker's and podman's 0444, 0440, for a worker running as root) or one
    /// another user owns (root's secret for the image's user 65532; Kubernetes' 0644).
    #[cfg(unix)]
    #[test]
    fn a_mounted_secret_is_read_and_a_careless_users_file_refused() {
        let dir = tempfile::tempdir().unwrap();
        let t = dir.path().join("token");
        let me = rustix::process::geteuid().as_raw();
        for (mode, refused) in [
            (0o600, false),
            (0o400, false),
            (0o444, false),
            (0o440, false),
            (0o640, true),
            (0o604, true),
            (0o644, true),
            (0o664, true),
            (0o666, true),
        ] {
            write_mode(&t, "bfw_secret\n", mode);
            assert_eq!(
                exposed_to(&t, me).unwrap(),
                refused.then_some(mode),
                "{mode:04o}"
            );
            match read_token_file(&t) {
                Ok(token) => assert!(!refused && token == "bfw_secret", "{mode:04o}"),
                Err(e) => assert!(
                    refused && matches!(e, TokenFileError::TooOpen { .. }),
                    "{mode:04o}: {e}"
                ),
            }
            // Another user's file (the worker is not its owner): its mode is its owner's.
            assert_eq!(exposed_to(&t, me + 1).unwrap(), None, "{mode:04o}");
        }
        if me == 0 {
            // Root can hand the file to another user: the image's user 65532 owns it, mode
            // 0644 (as a Kubernetes Secret without defaultMode), and the worker (root) reads it.
            write_mode(&t, "bfw_secret\n", 0o644);
            std::os::unix::fs::chown(&t, Some(65532), Some(65532)).unwrap();
            assert_eq!(read_token_file(&t).unwrap(), "bfw_secret");
        }
        // The settings file's own token line follows the same rule.
        let conf = dir.path().join("worker.toml");
        write_mode(&conf, "token = \"bfw_in_file\"\n", 0o444);
        let s = Settings::load(Some(&conf), None).unwrap();
        let r = resolve(flags(&[]), &s, None, 1, String::new).unwrap();
        assert_eq!(r.config.token, "bfw_in_file");
    }

    #[cfg(unix)]
    #[test]
    fn a_token_file_is_read_trimmed_and_refused_when_others_may_read_it() {
        let dir = tempfile::tempdir().unwrap();
        let t = dir.path().join("token");
        write_mode(&t, "  bfw_secret  \n", 0o600);
        assert_eq!(read_token_file(&t).unwrap(), "bfw_secret");
        write_mode(&t, "bfw_secret\n", 0o400);
        assert_eq!(read_token_file(&t).unwrap(), "bfw_secret");
        for mode in [0o640, 0o604, 0o644] {
            write_mode(&t, "bfw_secret\n", mode);
            let e = read_token_file(&t).unwrap_err();
            assert!(matches!(e, TokenFileError::TooOpen { .. }), "{mode:o}: {e}");
            assert!(e.to_string().contains("chmod 600"), "{e}");
        }
        write_mode(&t, " \n\n", 0o600);
        assert!(matches!(
            read_token_file(&t),
            Err(TokenFileError::Empty { .. })
        ));
        let missing = dir.path().join("missing");
        assert!(matches!(
            read_token_file(&missing),
            Err(TokenFileError::Read { .. })
        ));

        // From the file's token_file key: errors name the key and the settings file.
        let conf = dir.path().join("worker.toml");
        let text = format!("token_file = {:?}\n", t.display().to_string());
        let s = Settings::from_text(&conf, &text).unwrap();
        write_mode(&t, "bfw_secret\n", 0o644);
        let e = resolve(flags(&[]), &s, None, 1, String::new).unwrap_err();
        let m = e.to_string();
        assert!(
            m.contains("worker.toml: token_file: ") && m.contains("readable by other users"),
            "{m}"
        );
        write_mode(&t, "bfw_secret\n", 0o600);
        let r = resolve(flags(&[]), &s, None, 1, String::new).unwrap();
        assert_eq!(
            (r.config.token.as_str(), r.token_from),
            ("bfw_secret", "token_file")
        );
        // --token-file over the file's; its errors name the flag.
        let t2 = dir.path().join("token2");
        write_mode(&t2, "bfw_flag\n", 0o600);
        let r = resolve(
            flags(&["--token-file", t2.to_str().unwrap()]),
            &s,
            None,
            1,
            String::new,
        )
        .unwrap();
        assert_eq!(
            (r.config.token.as_str(), r.token_from),
            ("bfw_flag", "--token-file")
        );
        write_mode(&t2, "bfw_flag\n", 0o644);
        let m = resolve(
            flags(&["--token-file", t2.to_str().unwrap()]),
            &s,
            None,
            1,
            String::new,
        )
        .unwrap_err()
        .to_string();
        assert!(
            m.starts_with("--token-file: ") && m.contains("token2"),
            "{m}"
        );
        // A relative token_file is beside the settings file.
        let s = Settings::from_text(&conf, "token_file = \"token\"\n").unwrap();
        assert_eq!(s.file.token_file.as_deref(), Some(t.as_path()));
        let r = resolve(flags(&[]), &s, None, 1, String::new).unwrap();
        assert_eq!(r.config.token, "bfw_secret");
        // A token in a settings file others may read is refused when it is the one used.
        write_mode(&conf, "token = \"bfw_in_file\"\n", 0o644);
        let s = Settings::load(Some(&conf), None).unwrap();
        let m = resolve(flags(&[]), &s, None, 1, String::new)
            .unwrap_err()
            .to_string();
        assert!(
            m.contains("worker.toml: token: ") && m.contains("chmod 600"),
            "{m}"
        );
        let r = resolve(flags(&["--token", "bfw_flag"]), &s, None, 1, String::new).unwrap();
        assert_eq!(
            r.config.token, "bfw_flag",
            "a flag's token is not the file's"
        );
        write_mode(&conf, "token = \"bfw_in_file\"\n", 0o600);
        let s = Settings::load(Some(&conf), None).unwrap();
        let r = resolve(flags(&[]), &s, None, 1, String::new).unwrap();
        assert_eq!(
            (r.config.token.as_str(), r.token_from),
            ("bfw_in_file", "token")
        );
        // A missing CA certificate named by the file.
        let s = Settings::from_text(&conf, "tls_ca = \"/nonexistent/ca.pem\"\n").unwrap();
        let m = resolve(flags(&[]), &s, None, 1, String::new)
            .unwrap_err()
            .to_string();
        assert!(
            m.contains("worker.toml: tls_ca: ") && m.contains("/nonexistent/ca.pem"),
            "{m}"
        );
    }
}
