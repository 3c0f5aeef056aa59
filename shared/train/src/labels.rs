//! Committed training labels: the persistent, append-only label store of `shared/train/labels`.
//!
//! A **label set** is one position draw labelled with one search spec by one evaluation; it lives
//! in its own directory `labels/<set>/`:
//!
//! * `SET.txt` — written once when the set is created: the draw, the spec, the evaluation that
//!   labels it and the command; a later run of the same set must match it exactly;
//! * `part-NNNNN.bfl.gz` — the labels, in draw order. Part `k` covers the draw positions
//!   `first .. first + count` and part `k + 1` starts where part `k` ends. A part, once written,
//!   never changes: a set grows by new parts only;
//! * `part-NNNNN.txt` — the part's metadata (the same `key=value` lines as its header: range,
//!   CPU seconds, weights, engine, command), readable without the tool;
//! * `quality-NNN.txt` — a label-quality measurement (error against exact solves of a sample),
//!   one new file per measurement.
//!
//! Part file, format version 1 (a gzip stream, little endian):
//!
//! ```text
//! magic "BFLABELS" | u32 version | u32 meta length | meta (UTF-8 `key=value` lines)
//! | u64 n | n × u64 player | n × u64 opponent | n × i8 score | u64 FNV-1a 64 of all the above
//! ```
//!
//! Boards are canonical ([`bookfarm_engine::symmetry::canonical`]), scores are in discs for the
//! side to move. Columns (all players, then all opponents, then the scores) compress better than
//! records.
//!
//! [`run_set`] labels a draw into a set, resumably: it reads the committed parts first and labels
//! only the positions after them; positions whose label with the same spec is already in *any*
//! committed set are copied, not searched (no label is computed twice). Work in progress goes to
//! a checkpoint file outside the set (rewritten after every chunk), so a run killed at any moment
//! loses at most one chunk; a part is cut when it reaches `part_max` labels or `part_secs` seconds.

use crate::dataset::{self, DatasetError, Sample};
use crate::label::{LabelSpec, label_one};
use bookfarm_engine::Board;
use bookfarm_engine::eval::Eval;
use bookfarm_engine::eval::default::fnv1a64;
use bookfarm_engine::search::Searcher;
use flate2::Compression;
use flate2::read::GzDecoder;
use flate2::write::GzEncoder;
use rayon::prelude::*;
use std::collections::{BTreeMap, HashMap};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;
use tracing::info;

/// Magic of a part file (inside the gzip stream).
pub const MAGIC: &[u8; 8] = b"BFLABELS";
/// Current part format version.
pub const FORMAT_VERSION: u32 = 1;
/// Largest part file the store accepts (issue budget: ≤ ~10 MB a file).
pub const MAX_PART_BYTES: u64 = 10_000_000;
/// Budget of the whole committed store (≤ ~80 MB).
pub const MAX_STORE_BYTES: u64 = 80_000_000;
/// Name of a set's description file.
pub const SET_FILE: &str = "SET.txt";

/// `key=value` metadata, sorted by key.
pub type Meta = BTreeMap<String, String>;

/// Errors of the label store.
#[derive(Debug, thiserror::Error)]
pub enum LabelStoreError {
    /// Reading or writing a file failed.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// The cause.
        source: std::io::Error,
    },
    /// A part or set file is not in the expected format.
    #[error("{path}: {msg}")]
    Format {
        /// The file.
        path: String,
        /// What is wrong.
        msg: String,
    },
    /// A run's parameters differ from the set's `SET.txt`.
    #[error("{path}: the set was made with {key}={have}, this run asks for {want}")]
    Mismatch {
        /// The set file.
        path: String,
        /// Differing key.
        key: String,
        /// Value in the set.
        have: String,
        /// Value of this run.
        want: String,
    },
    /// A work cache could not be read or written.
    #[error(transparent)]
    Dataset(#[from] DatasetError),
}

fn io_err(path: &Path) -> impl FnOnce(std::io::Error) -> LabelStoreError + '_ {
    move |source| LabelStoreError::Io {
        path: path.display().to_string(),
        source,
    }
}

fn format_err(path: &Path, msg: impl Into<String>) -> LabelStoreError {
    LabelStoreError::Format {
        path: path.display().to_string(),
        msg: msg.into(),
    }
}

/// One labelled position of a part.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Label {
    /// Canonical board, side to move first.
    pub board: Board,
    /// Score in discs for the side to move.
    pub score: i8,
}

/// A decoded part file.
#[derive(Debug, Clone, PartialEq)]
pub struct Part {
    /// Header metadata.
    pub meta: Meta,
    /// Labels in draw order.
    pub labels: Vec<Label>,
}

impl Part {
    /// Integer metadata value.
    pub fn meta_u64(&self, key: &str) -> Option<u64> {
        self.meta.get(key).and_then(|v| v.parse().ok())
    }
}

/// Render metadata as `key=value` lines (values must not contain newlines).
pub fn meta_text(meta: &Meta) -> String {
    meta.iter()
        .map(|(k, v)| format!("{k}={}\n", v.replace('\n', " ")))
        .collect()
}

/// Parse `key=value` lines (blank lines and `#` comments ignored).
pub fn parse_meta(text: &str) -> Option<Meta> {
    let mut m = Meta::new();
    for line in text.lines() {
        let line = line.trim_end();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let (k, v) = line.split_once('=')?;
        m.insert(k.trim().to_string(), v.to_string());
    }
    Some(m)
}

/// Encode a part (gzip, format version 1).
pub fn encode_part(meta: &Meta, labels: &[Label]) -> Vec<u8> {
    let text = meta_text(meta);
    let mut raw = Vec::with_capacity(32 + text.len() + labels.len() * 17);
    raw.extend_from_slice(MAGIC);
    raw.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
    raw.extend_from_slice(&(text.len() as u32).to_le_bytes());
    raw.extend_from_slice(text.as_bytes());
    raw.extend_from_slice(&(labels.len() as u64).to_le_bytes());
    for l in labels {
        raw.extend_from_slice(&l.board.player.to_le_bytes());
    }
    for l in labels {
        raw.extend_from_slice(&l.board.opponent.to_le_bytes());
    }
    raw.extend(labels.iter().map(|l| l.score as u8));
    let h = fnv1a64(&raw);
    raw.extend_from_slice(&h.to_le_bytes());
    let mut gz = GzEncoder::new(Vec::new(), Compression::best());
    gz.write_all(&raw).expect("writing into a Vec cannot fail");
    gz.finish().expect("writing into a Vec cannot fail")
}

/// Decode a part; `path` only names the file in errors. Every board must be legal (no shared
/// square) and every score within ±64.
pub fn decode_part(bytes: &[u8], path: &Path) -> Result<Part, LabelStoreError> {
    let mut raw = Vec::new();
    GzDecoder::new(bytes)
        .read_to_end(&mut raw)
        .map_err(|e| format_err(path, format!("not a gzip stream: {e}")))?;
    let bad = |m: &str| format_err(path, m);
    if raw.len() < 8 + 4 + 4 + 8 + 8 || &raw[0..8] != MAGIC {
        return Err(bad("not a bookfarm label part (magic)"));
    }
    let u32_at = |o: usize| u32::from_le_bytes(raw[o..o + 4].try_into().expect("4 bytes"));
    let version = u32_at(8);
    if version != FORMAT_VERSION {
        return Err(format_err(
            path,
            format!("format version {version}, this build reads {FORMAT_VERSION}"),
        ));
    }
    let body = raw.len() - 8;
    let stored = u64::from_le_bytes(raw[body..].try_into().expect("8 bytes"));
    if fnv1a64(&raw[..body]) != stored {
        return Err(bad("checksum mismatch (corrupt part)"));
    }
    let mlen = u32_at(12) as usize;
    let meta_end = 16usize
        .checked_add(mlen)
        .filter(|&e| e + 8 <= body)
        .ok_or_else(|| bad("truncated metadata"))?;
    let text = std::str::from_utf8(&raw[16..meta_end]).map_err(|_| bad("metadata not UTF-8"))?;
    let meta = parse_meta(text).ok_or_else(|| bad("metadata lines must be key=value"))?;
    let n = u64::from_le_bytes(raw[meta_end..meta_end + 8].try_into().expect("8 bytes")) as usize;
    let start = meta_end + 8;
    if n.checked_mul(17).and_then(|x| x.checked_add(start)) != Some(body) {
        return Err(bad("record count does not match the data length"));
    }
    let word = |o: usize| u64::from_le_bytes(raw[o..o + 8].try_into().expect("8 bytes"));
    let mut labels = Vec::with_capacity(n);
    for i in 0..n {
        let player = word(start + 8 * i);
        let opponent = word(start + 8 * n + 8 * i);
        let board = Board::new(player, opponent).map_err(|e| format_err(path, e.to_string()))?;
        let score = raw[start + 16 * n + i] as i8;
        if !(-64..=64).contains(&score) {
            return Err(bad("score outside ±64"));
        }
        labels.push(Label { board, score });
    }
    if meta.get("count").and_then(|c| c.parse::<usize>().ok()) != Some(n) {
        return Err(bad("metadata count differs from the records"));
    }
    Ok(Part { meta, labels })
}

/// Read and decode a part file.
pub fn read_part(path: &Path) -> Result<Part, LabelStoreError> {
    let bytes = std::fs::read(path).map_err(io_err(path))?;
    decode_part(&bytes, path)
}

/// Path of part `k` of a set directory.
pub fn part_path(set_dir: &Path, k: usize) -> PathBuf {
    set_dir.join(format!("part-{k:05}.bfl.gz"))
}

/// Write `bytes` to `path` through a temporary file and a rename (never a half-written file).
fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), LabelStoreError> {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, bytes).map_err(io_err(&tmp))?;
    std::fs::rename(&tmp, path).map_err(io_err(path))
}

/// The spec keys of a set that a run must match (the rest of `SET.txt` is informational).
pub const SPEC_KEYS: [&str; 5] = ["draw", "depth", "selectivity", "level", "eval"];

/// The search that labels a position of empties `empties` in a set described by `info`: the
/// set's depth and selectivity, or for a level set (`level=L`, what `book search --level L` and a
/// farm's leaf searches run) Edax's `level_params(L, empties)`.
pub fn spec_of(info: &Meta, empties: u32) -> LabelSpec {
    if let Some(level) = info.get("level").and_then(|l| l.parse::<u8>().ok()) {
        let (depth, selectivity) = bookfarm_engine::level::level_params(level, empties);
        return LabelSpec { depth, selectivity };
    }
    LabelSpec {
        depth: info.get("depth").and_then(|d| d.parse().ok()).unwrap_or(60),
        selectivity: info
            .get("selectivity")
            .and_then(|d| d.parse().ok())
            .unwrap_or(bookfarm_engine::level::NO_SELECTIVITY),
    }
}

/// The training samples of labels described by `info` (kind per position from [`spec_of`]).
fn samples_of<'a>(info: &Meta, labels: impl Iterator<Item = &'a Label>) -> Vec<Sample> {
    labels
        .map(|l| Sample {
            board: l.board,
            label: f32::from(l.score),
            count: 1,
            kind: spec_of(info, l.board.empties()).kind(l.board.empties()),
        })
        .collect()
}

/// A set read from disk: its description and parts, in order.
#[derive(Debug, Clone)]
pub struct LabelSet {
    /// Directory of the set.
    pub dir: PathBuf,
    /// `SET.txt`.
    pub info: Meta,
    /// Parts `0..n`, contiguous.
    pub parts: Vec<Part>,
}

impl LabelSet {
    /// Number of labelled draw positions (the parts cover `0..covered`).
    pub fn covered(&self) -> usize {
        self.parts.iter().map(|p| p.labels.len()).sum()
    }

    /// Every label as a training sample (kind from the spec: exact where the search reached the
    /// end with no selectivity).
    pub fn samples(&self) -> Vec<Sample> {
        samples_of(&self.info, self.parts.iter().flat_map(|p| &p.labels))
    }

    /// The spec identity used to share labels between sets: exact labels are shared whatever
    /// the evaluation; search labels only between sets of the same depth, selectivity and eval.
    pub fn spec_key(&self) -> String {
        spec_key(&self.info)
    }
}

fn spec_key(info: &Meta) -> String {
    let get = |k: &str| info.get(k).map_or("", String::as_str);
    if get("kind") == "exact" {
        "exact".to_string()
    } else if info.contains_key("level") {
        format!("level {} {}", get("level"), get("eval"))
    } else {
        format!("d{} s{} {}", get("depth"), get("selectivity"), get("eval"))
    }
}

/// Read a set directory: `SET.txt` and every `part-NNNNN.bfl.gz`, which must be numbered
/// `0..n` without gaps and cover consecutive draw ranges.
pub fn read_set(dir: &Path) -> Result<LabelSet, LabelStoreError> {
    let set_file = dir.join(SET_FILE);
    let text = std::fs::read_to_string(&set_file).map_err(io_err(&set_file))?;
    let info = parse_meta(&text).ok_or_else(|| format_err(&set_file, "not key=value lines"))?;
    let mut numbers = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(io_err(dir))? {
        let entry = entry.map_err(io_err(dir))?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if let Some(k) = name
            .strip_prefix("part-")
            .and_then(|r| r.strip_suffix(".bfl.gz"))
        {
            let k: usize = k
                .parse()
                .map_err(|_| format_err(&entry.path(), "part number is not an integer"))?;
            numbers.push(k);
        }
    }
    numbers.sort_unstable();
    let mut parts = Vec::with_capacity(numbers.len());
    let mut next = 0usize;
    for (i, &k) in numbers.iter().enumerate() {
        let p = part_path(dir, k);
        if k != i {
            return Err(format_err(
                &p,
                format!("expected part {i} (parts must be 0..n)"),
            ));
        }
        let part = read_part(&p)?;
        if part.meta.get("set") != info.get("set") {
            return Err(format_err(&p, "part of another set"));
        }
        if part.meta_u64("first") != Some(next as u64) {
            return Err(format_err(
                &p,
                format!(
                    "first position {:?}, expected {next}",
                    part.meta.get("first")
                ),
            ));
        }
        next += part.labels.len();
        parts.push(part);
    }
    Ok(LabelSet {
        dir: dir.to_path_buf(),
        info,
        parts,
    })
}

/// Every set directory (one holding `SET.txt`) directly under `root`, sorted by name.
pub fn set_dirs(root: &Path) -> Result<Vec<PathBuf>, LabelStoreError> {
    let mut out = Vec::new();
    if !root.exists() {
        return Ok(out);
    }
    for entry in std::fs::read_dir(root).map_err(io_err(root))? {
        let p = entry.map_err(io_err(root))?.path();
        if p.join(SET_FILE).is_file() {
            out.push(p);
        }
    }
    out.sort();
    Ok(out)
}

/// True when `path` is a label set directory or a part file (rather than a sample cache).
pub fn is_label_path(path: &Path) -> bool {
    path.join(SET_FILE).is_file()
        || path
            .file_name()
            .is_some_and(|n| n.to_string_lossy().ends_with(".bfl.gz"))
}

/// Training samples of a set directory or of one part file.
pub fn read_samples(path: &Path) -> Result<Vec<Sample>, LabelStoreError> {
    if path.is_dir() {
        return Ok(read_set(path)?.samples());
    }
    let part = read_part(path)?;
    Ok(samples_of(&part.meta, part.labels.iter()))
}

/// What a run labels and how.
#[derive(Debug, Clone)]
pub struct RunParams {
    /// The store root (`shared/train/labels`).
    pub root: PathBuf,
    /// Set name (directory under `root`).
    pub set: String,
    /// Canonical description of the draw (same draw ⇔ same text).
    pub draw: String,
    /// Search spec (ignored when `level` is set).
    pub spec: LabelSpec,
    /// Label with the leaf search of this Edax level instead (depth and selectivity per empties
    /// from `level_params`): what `book search --level L` returns for the same weights.
    pub level: Option<u8>,
    /// Labels come from these results (canonical position → score, e.g. `book search` output)
    /// instead of searches; the run stops at the first draw position without a result.
    pub results: Option<HashMap<(u64, u64), i8>>,
    /// CPU seconds per label to record for imported results (the farm's report).
    pub results_cpu_per_label: f64,
    /// Identity of the labelling evaluation (e.g. `bookfarm-eval 1.1.0 fnv1a64=…`); `-` for
    /// exact labels, which do not depend on it.
    pub eval: String,
    /// Engine build that searched (`bookfarm-engine/VERSION rREVISION`).
    pub engine: String,
    /// The command line, for the record.
    pub command: String,
    /// Directory of the work checkpoints (outside version control).
    pub work: PathBuf,
    /// Positions per checkpoint.
    pub chunk: usize,
    /// A part is cut after this many labels …
    pub part_max: usize,
    /// … or after this many seconds of wall time, whichever comes first.
    pub part_secs: u64,
    /// The run stops after this many seconds, cutting the part in progress (0 = no limit).
    pub run_secs: u64,
}

impl RunParams {
    /// The `SET.txt` content of this run.
    pub fn set_meta(&self) -> Meta {
        let mut m = Meta::new();
        m.insert("set".into(), self.set.clone());
        m.insert("format".into(), format!("bookfarm-labels {FORMAT_VERSION}"));
        m.insert("draw".into(), self.draw.clone());
        match self.level {
            Some(level) => {
                m.insert("kind".into(), "level".into());
                m.insert("level".into(), level.to_string());
                m.insert("depth".into(), "level".into());
                m.insert("selectivity".into(), "level".into());
            }
            None => {
                let kind = if self.spec == LabelSpec::EXACT {
                    "exact"
                } else {
                    "search"
                };
                m.insert("kind".into(), kind.into());
                m.insert("depth".into(), self.spec.depth.to_string());
                m.insert("selectivity".into(), self.spec.selectivity.to_string());
            }
        }
        m.insert("eval".into(), self.eval.clone());
        m.insert("engine".into(), self.engine.clone());
        m.insert("command".into(), self.command.clone());
        m
    }
}

/// Summary of a run.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RunReport {
    /// Positions covered by committed parts when the run started.
    pub had: usize,
    /// Parts written by this run.
    pub parts_written: usize,
    /// Positions labelled by search in this run (including those of a resumed checkpoint).
    pub searched: usize,
    /// Positions whose label was copied from another committed set.
    pub copied: usize,
    /// Positions covered when the run ended.
    pub covered: usize,
}

/// Create the set (its `SET.txt`) or check that the existing one has this run's spec.
pub fn open_set(p: &RunParams) -> Result<LabelSet, LabelStoreError> {
    let dir = p.root.join(&p.set);
    let set_file = dir.join(SET_FILE);
    if !set_file.exists() {
        std::fs::create_dir_all(&dir).map_err(io_err(&dir))?;
        write_atomic(&set_file, meta_text(&p.set_meta()).as_bytes())?;
    }
    let set = read_set(&dir)?;
    let want = p.set_meta();
    for key in SPEC_KEYS {
        let have = set.info.get(key).cloned().unwrap_or_default();
        let w = want.get(key).cloned().unwrap_or_default();
        if have != w {
            return Err(LabelStoreError::Mismatch {
                path: set_file.display().to_string(),
                key: key.to_string(),
                have,
                want: w,
            });
        }
    }
    Ok(set)
}

/// The positions a run of `p` over `boards` would search: the draw after the set's committed
/// parts, without the positions whose label another committed set already has, with their draw
/// index. What `labels run --export` writes for `book search` (labelling on a farm).
pub fn missing(p: &RunParams, boards: &[Board]) -> Result<Vec<(usize, Board)>, LabelStoreError> {
    let set = open_set(p)?;
    let known = known_labels(&p.root, &set.spec_key(), &set.dir)?;
    Ok(boards
        .iter()
        .enumerate()
        .skip(set.covered())
        .filter(|(_, b)| !known.contains_key(&(b.player, b.opponent)))
        .map(|(i, b)| (i, *b))
        .collect())
}

/// Labels with the spec key `key` in every committed set under `root` except `skip`.
pub fn known_labels(
    root: &Path,
    key: &str,
    skip: &Path,
) -> Result<HashMap<(u64, u64), i8>, LabelStoreError> {
    let mut known = HashMap::new();
    for dir in set_dirs(root)? {
        if dir == skip {
            continue;
        }
        let set = read_set(&dir)?;
        if set.spec_key() != key {
            continue;
        }
        for l in set.parts.iter().flat_map(|p| &p.labels) {
            known.insert((l.board.player, l.board.opponent), l.score);
        }
    }
    Ok(known)
}

/// Work checkpoint of `set` starting at draw position `first`, and its CPU-seconds companion.
fn work_paths(work: &Path, set: &str, first: usize) -> (PathBuf, PathBuf) {
    (
        work.join(format!("{set}.from-{first}.bin")),
        work.join(format!("{set}.from-{first}.cpu")),
    )
}

/// Remove the work checkpoints of `set` that do not start at `first` (left over from a run cut
/// between writing a part and removing its checkpoint: their labels are in the part).
fn drop_stale_work(work: &Path, set: &str, first: usize) -> Result<(), LabelStoreError> {
    if !work.exists() {
        return Ok(());
    }
    let keep = format!("{set}.from-{first}.");
    let prefix = format!("{set}.from-");
    for entry in std::fs::read_dir(work).map_err(io_err(work))? {
        let p = entry.map_err(io_err(work))?.path();
        let name = p
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        if name.starts_with(&prefix) && !name.starts_with(&keep) {
            std::fs::remove_file(&p).map_err(io_err(&p))?;
        }
    }
    Ok(())
}

/// Label `boards` (the set's draw, in order) into the set of `p`, starting after its committed
/// parts, until the draw is covered or `should_stop()` says so between chunks (the labels of the
/// unfinished part then stay in the work checkpoint, as after a kill). Cuts a part every
/// `part_max` labels or `part_secs` seconds; `progress(covered, total)` after every chunk.
pub fn run_set(
    p: &RunParams,
    boards: &[Board],
    eval: &Arc<Eval>,
    should_stop: impl Fn() -> bool,
    progress: impl Fn(usize, usize),
) -> Result<RunReport, LabelStoreError> {
    let set = open_set(p)?;
    let mut covered = set.covered();
    if covered > boards.len() {
        return Err(format_err(
            &set.dir,
            format!(
                "the set covers {covered} positions, the draw has {}",
                boards.len()
            ),
        ));
    }
    for (i, l) in set.parts.iter().flat_map(|x| &x.labels).enumerate() {
        if l.board != boards[i] {
            return Err(format_err(
                &set.dir,
                format!("committed position {i} is not position {i} of this draw"),
            ));
        }
    }
    let mut report = RunReport {
        had: covered,
        covered,
        ..RunReport::default()
    };
    let mut known = known_labels(&p.root, &set.spec_key(), &set.dir)?;
    let importing = p.results.is_some();
    if let Some(r) = &p.results {
        known.extend(r.iter().map(|(k, v)| (*k, *v)));
    }
    let info = p.set_meta();
    std::fs::create_dir_all(&p.work).map_err(io_err(&p.work))?;
    let mut next_part = set.parts.len();
    let run_started = Instant::now();
    let out_of_time = || p.run_secs > 0 && run_started.elapsed().as_secs() >= p.run_secs;
    while covered < boards.len() && !should_stop() && !out_of_time() {
        drop_stale_work(&p.work, &p.set, covered)?;
        let (work, cpu_file) = work_paths(&p.work, &p.set, covered);
        let mut done: Vec<Sample> = if work.exists() {
            dataset::read_samples(&work)?
        } else {
            Vec::new()
        };
        if done.len() > boards.len() - covered
            || done
                .iter()
                .zip(&boards[covered..])
                .any(|(s, b)| s.board != *b)
        {
            return Err(format_err(
                &work,
                "work checkpoint does not continue this draw; delete it",
            ));
        }
        let mut cpu_before: f64 = std::fs::read_to_string(&cpu_file)
            .ok()
            .and_then(|t| t.trim().parse().ok())
            .unwrap_or(0.0);
        let mut copied = 0usize;
        let mut exhausted = false;
        let started = Instant::now();
        let limit = (covered + p.part_max.max(1)).min(boards.len());
        while covered + done.len() < limit
            && started.elapsed().as_secs() < p.part_secs
            && !out_of_time()
        {
            if should_stop() {
                // Like a kill: the labels stay in the work checkpoint for the next run.
                return Ok(report);
            }
            let from = covered + done.len();
            let mut to = (from + p.chunk.max(1)).min(limit);
            if importing {
                // Imported results only: stop before the first position without one.
                if let Some(gap) = boards[from..to]
                    .iter()
                    .position(|b| !known.contains_key(&(b.player, b.opponent)))
                {
                    to = from + gap;
                    exhausted = true;
                }
            }
            let cpu0 = cpu_time::ProcessTime::now();
            let labelled: Vec<(Sample, bool)> = boards[from..to]
                .par_iter()
                .map_init(
                    || None::<Searcher>,
                    |s, b| {
                        let spec = spec_of(&info, b.empties());
                        match known.get(&(b.player, b.opponent)) {
                            Some(&score) => (
                                Sample {
                                    board: *b,
                                    label: f32::from(score),
                                    count: 1,
                                    kind: spec.kind(b.empties()),
                                },
                                true,
                            ),
                            None => {
                                let searcher =
                                    s.get_or_insert_with(|| Searcher::new(Arc::clone(eval)));
                                (label_one(searcher, b, spec), false)
                            }
                        }
                    },
                )
                .collect();
            copied += labelled.iter().filter(|x| x.1).count();
            done.extend(labelled.into_iter().map(|x| x.0));
            dataset::write_samples(&work.with_extension("tmp"), &done)?;
            std::fs::rename(work.with_extension("tmp"), &work).map_err(io_err(&work))?;
            cpu_before += if importing {
                p.results_cpu_per_label * (to - from) as f64
            } else {
                cpu0.elapsed().as_secs_f64()
            };
            write_atomic(&cpu_file, format!("{cpu_before:.1}\n").as_bytes())?;
            progress(covered + done.len(), boards.len());
            if exhausted {
                break;
            }
        }
        if done.is_empty() {
            break;
        }
        let mut meta = p.set_meta();
        meta.remove("format");
        meta.insert("part".into(), next_part.to_string());
        meta.insert("first".into(), covered.to_string());
        meta.insert("count".into(), done.len().to_string());
        meta.insert("copied".into(), copied.to_string());
        meta.insert("cpu_s".into(), format!("{cpu_before:.1}"));
        let labels: Vec<Label> = done
            .iter()
            .map(|s| Label {
                board: s.board,
                score: s.label as i8,
            })
            .collect();
        let bytes = encode_part(&meta, &labels);
        let dir = p.root.join(&p.set);
        let path = part_path(&dir, next_part);
        meta.insert("bytes".into(), bytes.len().to_string());
        meta.insert("fnv1a64".into(), format!("{:016x}", fnv1a64(&bytes)));
        write_atomic(
            &path.with_extension("").with_extension("txt"),
            meta_text(&meta).as_bytes(),
        )?;
        write_atomic(&path, &bytes)?;
        info!(part = %path.display(), labels = done.len(), copied, cpu_s = format!("{cpu_before:.0}"), "label part written");
        // The part holds these labels now; a checkpoint left behind (removal failed, or a kill
        // right here) starts before the set's end and is dropped by the next run.
        let _ = std::fs::remove_file(&work);
        let _ = std::fs::remove_file(&cpu_file);
        report.searched += done.len() - copied;
        report.copied += copied;
        report.parts_written += 1;
        covered += done.len();
        report.covered = covered;
        next_part += 1;
        if exhausted {
            break;
        }
    }
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dataset::LabelKind;
    use crate::positions::random_continuations;
    use crate::solve::solve_exact;
    use bookfarm_engine::endgame::EndgameContext;
    use bookfarm_engine::eval::default_eval;
    use std::cell::Cell;
    use std::collections::HashSet;

    fn params(root: &Path, work: &Path, set: &str, draw: &str) -> RunParams {
        RunParams {
            root: root.to_path_buf(),
            set: set.to_string(),
            draw: draw.to_string(),
            spec: LabelSpec::EXACT,
            level: None,
            results: None,
            results_cpu_per_label: 0.0,
            eval: "-".into(),
            engine: "test".into(),
            command: "test".into(),
            work: work.to_path_buf(),
            chunk: 2,
            part_max: 4,
            part_secs: 3600,
            run_secs: 0,
        }
    }

    /// The committed store itself: every set reads (contiguous parts, checksums), every part has
    /// its sidecar with the same range, size and hash, boards are canonical and distinct within a
    /// set, and the sizes stay within the budget.
    #[test]
    fn the_committed_store_is_consistent() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("labels");
        assert!(
            root.join("README.md").is_file(),
            "labels/README.md documents the store"
        );
        let mut total = 0u64;
        for dir in set_dirs(&root).expect("store readable") {
            let set = read_set(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
            assert_eq!(
                set.info.get("set").map(String::as_str),
                dir.file_name().and_then(|n| n.to_str()),
                "{}: SET.txt names its directory",
                dir.display()
            );
            for key in ["draw", "depth", "selectivity", "eval"] {
                assert!(
                    set.info.contains_key(key),
                    "{}: SET.txt lacks {key}",
                    dir.display()
                );
            }
            let mut seen = std::collections::HashSet::new();
            for (k, part) in set.parts.iter().enumerate() {
                let path = part_path(&dir, k);
                let bytes = std::fs::metadata(&path).expect("part").len();
                assert!(bytes <= MAX_PART_BYTES, "{}: {bytes} bytes", path.display());
                total += bytes;
                let side = path.with_extension("").with_extension("txt");
                let side = parse_meta(&std::fs::read_to_string(&side).expect("sidecar"))
                    .expect("sidecar lines");
                for key in [
                    "set",
                    "first",
                    "count",
                    "depth",
                    "selectivity",
                    "eval",
                    "draw",
                ] {
                    assert_eq!(
                        side.get(key),
                        part.meta.get(key),
                        "{}: {key}",
                        path.display()
                    );
                }
                assert_eq!(
                    side.get("bytes"),
                    Some(&bytes.to_string()),
                    "{}",
                    path.display()
                );
                let hash = fnv1a64(&std::fs::read(&path).expect("part"));
                assert_eq!(side.get("fnv1a64"), Some(&format!("{hash:016x}")));
                assert!(
                    side.contains_key("cpu_s"),
                    "{}: CPU time recorded",
                    path.display()
                );
                for l in &part.labels {
                    assert_eq!(bookfarm_engine::symmetry::canonical(&l.board).0, l.board);
                    assert!(
                        seen.insert((l.board.player, l.board.opponent)),
                        "{}: a position twice",
                        path.display()
                    );
                }
            }
        }
        assert!(total <= MAX_STORE_BYTES, "store holds {total} bytes");
    }

    /// A level set labelled locally equals the same set built from a search program's results
    /// (what `book search --level L` returns), and an import stops at the first missing result.
    #[test]
    fn level_sets_take_their_labels_from_search_results() {
        let boards = random_continuations(&[Board::start()], 24..=30, 9, 8, &HashSet::new());
        let eval = default_eval();
        // Two stores: in one store the second set would copy the first one's labels.
        let root = tempfile::tempdir().expect("temp dir");
        let farm_root = tempfile::tempdir().expect("temp dir");
        let work = tempfile::tempdir().expect("temp dir");
        let mut local = params(root.path(), work.path(), "local", "random level test");
        local.level = Some(3);
        local.eval = "default".into();
        let r = run_set(&local, &boards, &eval, || false, |_, _| {}).expect("local run");
        assert_eq!((r.covered, r.searched), (9, 9));
        let local_set = read_set(&root.path().join("local")).expect("set");
        assert_eq!(local_set.info.get("level").map(String::as_str), Some("3"));
        // The "farm": the engine's leaf search at level 3 on the exported positions.
        let mut farm = local.clone();
        farm.set = "farm".into();
        farm.root = farm_root.path().to_path_buf();
        let todo = missing(&farm, &boards).expect("export");
        assert_eq!(todo.len(), 9);
        // In the local store the same spec is known: nothing to export.
        let mut twin = local.clone();
        twin.set = "twin".into();
        assert!(missing(&twin, &boards).expect("export").is_empty());
        let mut s = Searcher::new(Arc::clone(&eval));
        let never = std::sync::atomic::AtomicBool::new(false);
        let mut results: HashMap<(u64, u64), i8> = todo
            .iter()
            .map(|&(_, b)| {
                let req = bookfarm_engine::search::LeafRequest {
                    board: b,
                    level: 3,
                    excluded: 0,
                };
                (
                    (b.player, b.opponent),
                    s.leaf_search(&req, &never).score as i8,
                )
            })
            .collect();
        // The program has not finished: position 6 has no result yet.
        let gap = todo[6].1;
        let late = results
            .remove(&(gap.player, gap.opponent))
            .expect("present");
        farm.results = Some(results.clone());
        farm.results_cpu_per_label = 0.5;
        let r = run_set(&farm, &boards, &eval, || false, |_, _| {}).expect("import");
        assert_eq!((r.covered, r.searched, r.copied), (6, 0, 6));
        assert_eq!(missing(&farm, &boards).expect("export").len(), 3);
        results.insert((gap.player, gap.opponent), late);
        farm.results = Some(results);
        run_set(&farm, &boards, &eval, || false, |_, _| {}).expect("rest");
        let farm_set = read_set(&farm_root.path().join("farm")).expect("set");
        assert_eq!(farm_set.samples(), local_set.samples());
        let cpu: f64 = farm_set
            .parts
            .iter()
            .map(|p| {
                p.meta
                    .get("cpu_s")
                    .and_then(|c| c.parse::<f64>().ok())
                    .unwrap_or(0.0)
            })
            .sum();
        assert!((cpu - 4.5).abs() < 0.2, "imported CPU pro rata: {cpu}");
    }

    #[test]
    fn parts_round_trip_and_reject_corruption() {
        let boards = random_continuations(&[Board::start()], 20..=30, 50, 3, &HashSet::new());
        let labels: Vec<Label> = boards
            .iter()
            .enumerate()
            .map(|(i, b)| Label {
                board: *b,
                score: ((i % 129) as i32 - 64) as i8,
            })
            .collect();
        let mut meta = Meta::new();
        meta.insert("set".into(), "t".into());
        meta.insert("count".into(), labels.len().to_string());
        let bytes = encode_part(&meta, &labels);
        let p = Path::new("t.bfl.gz");
        let part = decode_part(&bytes, p).expect("decodes");
        assert_eq!(part.labels, labels);
        assert_eq!(part.meta, meta);
        // Any flipped byte of the payload is caught (gzip CRC or our checksum).
        let mut raw = Vec::new();
        GzDecoder::new(&bytes[..])
            .read_to_end(&mut raw)
            .expect("gzip");
        for at in [0, 20, raw.len() / 2, raw.len() - 3] {
            let mut bad = raw.clone();
            bad[at] ^= 0x10;
            let mut gz = GzEncoder::new(Vec::new(), Compression::fast());
            gz.write_all(&bad).expect("vec");
            assert!(
                decode_part(&gz.finish().expect("vec"), p).is_err(),
                "byte {at}"
            );
        }
        assert!(decode_part(&bytes[..bytes.len() / 2], p).is_err());
        assert!(decode_part(b"not gzip", p).is_err());
        // A count that disagrees with the records is refused.
        meta.insert("count".into(), "7".into());
        assert!(decode_part(&encode_part(&meta, &labels), p).is_err());
    }

    #[test]
    fn a_run_resumes_after_a_kill_and_never_labels_twice() {
        let boards = random_continuations(&[Board::start()], 10..=12, 11, 5, &HashSet::new());
        let eval = default_eval();
        let root = tempfile::tempdir().expect("temp dir");
        let work = tempfile::tempdir().expect("temp dir");
        let p = params(root.path(), work.path(), "x", "random test seed=5");
        // "Killed" after 3 chunks: the first part (4 labels) is written, 2 labels sit in the
        // work checkpoint.
        let chunks = Cell::new(0);
        let r = run_set(
            &p,
            &boards,
            &eval,
            || chunks.get() >= 3,
            |_, _| chunks.set(chunks.get() + 1),
        )
        .expect("first run");
        assert_eq!(r.parts_written, 1);
        assert_eq!(r.covered, 4);
        assert!(work.path().join("x.from-4.bin").exists());
        // The resumed run writes the remaining parts (4 + 3) after the committed one.
        let chunks = Cell::new(0);
        let r = run_set(
            &p,
            &boards,
            &eval,
            || false,
            |_, _| chunks.set(chunks.get() + 1),
        )
        .expect("resumed run");
        assert_eq!((r.had, r.covered, r.parts_written), (4, 11, 2));
        assert_eq!(
            chunks.get(),
            3,
            "1 chunk for part 1 (2 labels resumed), 2 for part 2"
        );
        let set = read_set(&root.path().join("x")).expect("set");
        assert_eq!(set.parts.len(), 3);
        assert_eq!(set.covered(), 11);
        let mut ctx = EndgameContext::with_tt_bits(12);
        for (s, b) in set.samples().iter().zip(&boards) {
            assert_eq!(s.board, *b);
            assert_eq!(s.kind, LabelKind::Exact);
            assert_eq!(s.label as i32, solve_exact(b, &mut ctx).0);
        }
        assert!(
            std::fs::read_dir(work.path())
                .expect("work")
                .next()
                .is_none(),
            "no work file left"
        );
        for k in 0..3 {
            let side = root.path().join(format!("x/part-{k:05}.txt"));
            let m = parse_meta(&std::fs::read_to_string(side).expect("sidecar")).expect("meta");
            assert!(
                m.contains_key("cpu_s") && m.contains_key("fnv1a64"),
                "{m:?}"
            );
        }
        // Nothing left to do: no new part, no search.
        let again = run_set(&p, &boards, &eval, || false, |_, _| {}).expect("idle run");
        assert_eq!((again.parts_written, again.searched), (0, 0));
        // Another exact set over overlapping positions copies the known labels.
        let q = params(root.path(), work.path(), "y", "sample of x");
        let r = run_set(&q, &boards[3..9], &eval, || false, |_, _| {}).expect("copy run");
        assert_eq!((r.copied, r.searched), (6, 0));
        // A run with another spec for an existing set is refused, and so is another draw.
        let mut other = p.clone();
        other.spec = LabelSpec {
            depth: 4,
            selectivity: 5,
        };
        assert!(matches!(
            run_set(&other, &boards, &eval, || false, |_, _| {}),
            Err(LabelStoreError::Mismatch { .. })
        ));
        let shuffled: Vec<Board> = boards.iter().rev().copied().collect();
        assert!(run_set(&p, &shuffled, &eval, || false, |_, _| {}).is_err());
    }
}
