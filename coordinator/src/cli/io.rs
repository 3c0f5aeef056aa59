//! The command line's contact with the outside: files (book files read and written through
//! [`BookFormat`], every write atomic), standard output, signals and the async runtime.

use anyhow::{Context, anyhow};
use bookfarm_book::{BookFormat, MemBook};
use bookfarm_engine::Move;
use std::io::Write;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// The tokio runtime of a command (two worker threads: the commands' async work is IO).
pub fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("starting the async runtime")
}

/// Resolves at the first Ctrl-C or SIGTERM.
pub async fn shutdown_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        if let Ok(mut term) = signal(SignalKind::terminate()) {
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = term.recv() => {}
            }
            return;
        }
    }
    let _ = tokio::signal::ctrl_c().await;
}

/// Ctrl-C (and SIGTERM) as a flag: installed once, the signal no longer kills the process, so
/// a store write in progress always completes. Returns the flag and the runtime that watches.
pub fn interrupt_flag() -> anyhow::Result<(Arc<AtomicBool>, tokio::runtime::Runtime)> {
    let rt = runtime()?;
    let flag = Arc::new(AtomicBool::new(false));
    let f = flag.clone();
    rt.spawn(async move {
        shutdown_signal().await;
        f.store(true, Ordering::SeqCst);
    });
    Ok((flag, rt))
}

/// Resolves once `flag` is set (by [`interrupt_flag`]'s watcher).
pub async fn flag_set(flag: Arc<AtomicBool>) {
    while !flag.load(Ordering::SeqCst) {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Write `bytes` to `path` through a temporary file in the same directory and a rename: a
/// reader sees the old file or the whole new one, never half of it, and a failed write leaves
/// no file behind.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let mut builder = tempfile::Builder::new();
    builder.prefix(".bookfarm-");
    // The permissions of a plain new file (0666 less the umask), not a temporary file's 0600.
    #[cfg(unix)]
    builder.permissions(std::os::unix::fs::PermissionsExt::from_mode(0o666));
    let mut tmp = builder
        .tempfile_in(dir)
        .with_context(|| format!("writing {}", path.display()))?;
    tmp.write_all(bytes)
        .and_then(|()| tmp.as_file().sync_all())
        .with_context(|| format!("writing {}", path.display()))?;
    tmp.persist(path)
        .map_err(|e| anyhow!("writing {}: {}", path.display(), e.error))?;
    Ok(())
}

/// A file written to `path` readable by its owner only, atomically and durably: written into
/// a temporary file beside it, which [`PrivateAtomic::commit`] syncs, renames over `path` and
/// makes durable by syncing the directory (a kill leaves the old file or none, never part of
/// the new one; a temporary file not committed is removed).
pub struct PrivateAtomic {
    path: std::path::PathBuf,
    dir: std::path::PathBuf,
    tmp: std::io::BufWriter<tempfile::NamedTempFile>,
}

impl PrivateAtomic {
    /// Start writing `path`.
    pub fn create(path: &Path) -> anyhow::Result<Self> {
        let dir = match path.parent() {
            Some(d) if !d.as_os_str().is_empty() => d,
            _ => Path::new("."),
        };
        let tmp = tempfile::Builder::new()
            .prefix(".bookfarm-")
            .tempfile_in(dir)
            .with_context(|| format!("writing {}", path.display()))?;
        Ok(Self {
            path: path.to_path_buf(),
            dir: dir.to_path_buf(),
            tmp: std::io::BufWriter::with_capacity(1 << 20, tmp),
        })
    }

    /// Append `bytes`.
    pub fn write_all(&mut self, bytes: &[u8]) -> anyhow::Result<()> {
        self.tmp
            .write_all(bytes)
            .with_context(|| format!("writing {}", self.path.display()))
    }

    /// Sync, rename into place, sync the directory.
    pub fn commit(self) -> anyhow::Result<()> {
        let path = self.path;
        let tmp = self
            .tmp
            .into_inner()
            .map_err(|e| anyhow!("writing {}: {}", path.display(), e.error()))?;
        tmp.as_file()
            .sync_all()
            .with_context(|| format!("writing {}", path.display()))?;
        tmp.persist(&path)
            .map_err(|e| anyhow!("writing {}: {}", path.display(), e.error))?;
        std::fs::File::open(&self.dir)
            .and_then(|d| d.sync_all())
            .with_context(|| format!("syncing {}", self.dir.display()))?;
        Ok(())
    }
}

/// Create `path` (it must not exist) readable by its owner only, holding `secret` and a newline.
pub fn write_secret(path: &Path, secret: &str) -> anyhow::Result<()> {
    let mut o = std::fs::OpenOptions::new();
    o.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut o, 0o600);
    let mut f = o
        .open(path)
        .with_context(|| format!("creating {}", path.display()))?;
    writeln!(f, "{secret}")
        .and_then(|()| f.sync_all())
        .with_context(|| format!("writing {}", path.display()))
}

/// The format of a book file name, or an error naming the file.
pub fn book_format(path: &Path) -> anyhow::Result<BookFormat> {
    BookFormat::from_path(path).map_err(|e| anyhow!("{}: {e}", path.display()))
}

/// Read a book file in the format of its extension. Errors name the file and the byte offset
/// (book.dat, .egbk3) or line (CSV) of the problem.
pub fn read_book(path: &Path) -> anyhow::Result<MemBook> {
    let format = book_format(path)?;
    let bytes = std::fs::read(path).with_context(|| path.display().to_string())?;
    let read = format
        .read(&bytes)
        .map_err(|e| anyhow!("{}: {e}", path.display()))?;
    if let Some(report) = read.egbk3 {
        tracing::info!(
            records = report.records,
            dropped = report.dropped,
            duplicates = report.duplicates,
            pass_positions = report.pass_positions,
            borrowed = report.borrowed,
            "{}: Egaroucid book read (borrowed: leaves holding Egaroucid's value without a \
             move, searched where growth first needs them or by `book fix`)",
            path.display()
        );
        if report.bad_leaves > 0 {
            tracing::warn!(
                bad_leaves = report.bad_leaves,
                "{}: leaf moves dropped as illegal (their positions borrow their value)",
                path.display()
            );
        }
    }
    Ok(read.book)
}

/// Write `book` to `path` in the format of its extension (atomically; nothing is written for
/// an unknown extension).
pub fn write_book(path: &Path, book: &MemBook) -> anyhow::Result<()> {
    let format = book_format(path)?;
    write_atomic(path, &format.write(book))
}

/// Games of a file: WTHOR by the .wtb extension, else transcripts one per line (empty lines
/// and `#` comments skipped).
pub fn read_games(path: &Path) -> anyhow::Result<Vec<Vec<Move>>> {
    let bytes = std::fs::read(path).with_context(|| path.display().to_string())?;
    let wtb = path
        .extension()
        .and_then(|e| e.to_str())
        .is_some_and(|e| e.eq_ignore_ascii_case("wtb"));
    if wtb {
        let (_, games) = bookfarm_engine::formats::wthor::read_wtb(&bytes)
            .map_err(|e| anyhow!("{}: {e}", path.display()))?;
        return Ok(games.into_iter().map(|g| g.game.moves).collect());
    }
    let text = std::str::from_utf8(&bytes).map_err(|e| {
        anyhow!(
            "{}: at byte {}: not UTF-8 text",
            path.display(),
            e.valid_up_to()
        )
    })?;
    let mut games = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        games.push(
            bookfarm_engine::formats::transcript::parse_moves(line)
                .map_err(|e| anyhow!("{}: line {}: {e}", path.display(), i + 1))?,
        );
    }
    Ok(games)
}

/// Print `text` to standard output; a closed pipe (`| head`) is not an error.
pub fn print(text: &str) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        r => r.context("writing to stdout"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn atomic_writes_replace_whole_files_and_leave_nothing_else() {
        let dir = tempfile::tempdir().expect("tempdir");
        let p = dir.path().join("out.dat");
        write_atomic(&p, b"first").expect("write");
        write_atomic(&p, b"second").expect("replace");
        assert_eq!(std::fs::read(&p).expect("read"), b"second");
        let names: Vec<_> = std::fs::read_dir(dir.path())
            .expect("list")
            .map(|e| e.expect("entry").file_name())
            .collect();
        assert_eq!(names, vec![std::ffi::OsString::from("out.dat")]);
        // A directory in the way: an error naming the file, and no stray temporary file.
        let d = dir.path().join("sub");
        std::fs::create_dir(&d).expect("mkdir");
        let e = write_atomic(&d, b"x").expect_err("a directory");
        assert!(e.to_string().contains("sub"), "{e}");
        assert_eq!(std::fs::read_dir(dir.path()).expect("list").count(), 2);
    }

    #[test]
    fn unknown_book_extensions_are_refused_before_anything_is_written() {
        let dir = tempfile::tempdir().expect("tempdir");
        let p = dir.path().join("book.txt");
        let e = write_book(&p, &MemBook::default()).expect_err("unknown extension");
        assert_eq!(
            e.to_string(),
            format!(
                "{}: unknown book format (expected a .dat, .csv or .egbk3 extension)",
                p.display()
            )
        );
        assert!(!p.exists());
        std::fs::write(&p, "x").expect("write");
        assert!(read_book(&p).is_err());
    }
}
