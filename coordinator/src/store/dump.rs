//! A store directory as text, and back: the committed fixtures of the format tests (sled's own
//! files depend on sled's version and are large; this text depends only on the store's keys and
//! values).
//!
//! One line per record, in order: `tree <name> <key> <value>` for every key of every sled tree
//! (the default one is `__sled__default`), and `file <path> <contents>` for every base book file
//! (`base/…`, relative to the store directory); names, keys, values and contents are lowercase
//! hex. Lines starting with `#` and empty lines are comments.
//!
//! `cargo run -p bookfarm-coordinator --example store_dump -- DIR` prints a store's dump.

use super::StoreError;
use super::generations::BASE_DIR;
use super::keys::hex;
use super::sled_repair::open_sled;
use std::fmt::Write as _;
use std::path::Path;

/// A small page cache: dumps are of small stores.
const CACHE_BYTES: u64 = 8 << 20;

/// The text of the store in `dir` (which nothing else may hold open; nothing is written).
pub fn dump(dir: &Path) -> Result<String, StoreError> {
    let db = open_sled(dir, CACHE_BYTES)?;
    let mut out = String::new();
    let mut names = db.tree_names();
    names.sort();
    for name in names {
        let tree = db.open_tree(&name)?;
        for kv in tree.iter() {
            let (k, v) = kv?;
            let _ = writeln!(out, "tree {} {} {}", hex(&name), hex(&k), hex(&v));
        }
    }
    let base = dir.join(BASE_DIR);
    let io = |path: &Path| {
        let path = path.display().to_string();
        move |source| StoreError::Io { path, source }
    };
    let mut files = Vec::new();
    match std::fs::read_dir(&base) {
        Ok(entries) => {
            for e in entries {
                let e = e.map_err(io(&base))?;
                files.push(e.file_name().to_string_lossy().into_owned());
            }
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(io(&base)(e)),
    }
    files.sort();
    for name in files {
        let path = base.join(&name);
        let bytes = std::fs::read(&path).map_err(io(&path))?;
        let rel = format!("{BASE_DIR}/{name}");
        let _ = writeln!(out, "file {} {}", hex(rel.as_bytes()), hex(&bytes));
    }
    Ok(out)
}

/// Write the store of `text` (a [`dump`]) into `dir`, which must hold no store; durable on
/// return. Nothing is checked but the text's syntax: the result is the store as dumped.
pub fn restore(text: &str, dir: &Path) -> Result<(), StoreError> {
    restore_lines(text.lines().map(|l| Ok(l.to_string())), dir)
}

/// [`restore`] of the lines of a dump read one at a time (a backup's body), so the text is
/// never held whole.
pub fn restore_lines(
    lines: impl Iterator<Item = Result<String, StoreError>>,
    dir: &Path,
) -> Result<(), StoreError> {
    let db = open_sled(dir, CACHE_BYTES)?;
    if !db
        .tree_names()
        .iter()
        .all(|n| db.open_tree(n).map(|t| t.is_empty()).unwrap_or(false))
    {
        return Err(StoreError::Dump {
            line: 0,
            reason: format!("{} already holds a store", dir.display()),
        });
    }
    for (i, line) in lines.enumerate() {
        let line = line?;
        let line = line.strip_suffix('\r').unwrap_or(&line);
        if line.trim().is_empty() || line.starts_with('#') {
            continue;
        }
        let bad = |reason: &str| StoreError::Dump {
            line: i + 1,
            reason: reason.to_string(),
        };
        let fields: Vec<&str> = line.split(' ').collect();
        match fields[..] {
            ["tree", name, key, value] => {
                let name = unhex(name).ok_or_else(|| bad("tree name is not hex"))?;
                let key = unhex(key).ok_or_else(|| bad("key is not hex"))?;
                let value = unhex(value).ok_or_else(|| bad("value is not hex"))?;
                db.open_tree(name)?.insert(key, value)?;
            }
            ["file", path, contents] => {
                let path = unhex(path)
                    .and_then(|p| String::from_utf8(p).ok())
                    .ok_or_else(|| bad("path is not hex UTF-8"))?;
                let rel = Path::new(&path);
                if !rel.starts_with(BASE_DIR)
                    || rel
                        .components()
                        .any(|c| !matches!(c, std::path::Component::Normal(_)))
                {
                    return Err(bad("a file outside base/"));
                }
                let contents = unhex(contents).ok_or_else(|| bad("contents are not hex"))?;
                let path = dir.join(rel);
                let io = |source| StoreError::Io {
                    path: path.display().to_string(),
                    source,
                };
                if let Some(parent) = path.parent() {
                    std::fs::create_dir_all(parent).map_err(io)?;
                }
                std::fs::write(&path, contents).map_err(io)?;
            }
            _ => {
                return Err(bad(
                    "neither `tree NAME KEY VALUE` nor `file PATH CONTENTS`",
                ));
            }
        }
    }
    super::sled_gate::flush(&db)?;
    Ok(())
}

/// The bytes of lowercase or uppercase hex (`None`: not hex).
fn unhex(s: &str) -> Option<Vec<u8>> {
    if !s.len().is_multiple_of(2) || !s.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok())
        .collect()
}
