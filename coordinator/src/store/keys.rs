//! The key layout of the store, the key encoders, and the one encoding of values (postcard).
//!
//! Every value of every tree ends with a checksum of its key and value (CRC-32C, 4 bytes LE,
//! [`seal`]), checked by every read ([`unseal`], [`decode`]): a record damaged on disk stops the
//! read with an error naming its key instead of being served. The tables below give the values
//! before that checksum.
//!
//! sled's default tree holds two keys:
//!
//! | key | value |
//! |---|---|
//! | `format-version` | u32 (postcard): the store's format version (see `format.rs`) |
//! | `book-tree` | the name of the tree of the current book generation (moving it switches books) |
//!
//! The tree of a book generation, `book-<generation as 16 hex digits>`, holds everything of the
//! book under one-byte prefixes (values postcard):
//!
//! | key | value |
//! |---|---|
//! | `m` + `base` | [`BaseRecord`]: the generation and size of the base book file |
//! | `m` + `header` | [`HeaderRecord`] |
//! | `m` + `replay-base` | [`HeaderRecord`] of the base book (replays start from the base) |
//! | `k` + 8-byte sequence number (BE) + 4-byte chunk index (BE) | [`PositionRecord`]s back to back, at most [`CHUNK_POSITIONS`]: positions one batch wrote |
//! | `m` + `replaced-bytes` | u64: bytes of the chunks the last replacement of the position records wrote |
//! | `g` + 8-byte sequence number (BE) | [`ResultGroupRecord`]: the results one batch stored (one call's applied results, with the contributors vouching), keyed by request |
//! | `x` + request | the sequence number of the batch that removed the request's result: results of that request in earlier groups are dropped |
//! | `d` + 16-byte job id | board of an accepted job whose acceptance stored no result (a stored result names its job; both make resubmission idempotent) |
//! | `u` + request | [`CaseRecord`] (replicas of a request waiting for validation) |
//! | `t` + contributor name | [`TrustRecord`] (standing and credit) |
//! | `m` + `history` | [`HistoryRecord`] (web UI charts and contributors) |
//! | `m` + `growth` | [`GrowthRecord`]: the running program's state |
//! | `q` + 8-byte program id (BE) | [`ProgramRecord`]: a program of the queue (queued, running, or one of the last finished) |
//! | `m` + `program-queue` | `Vec<u64>`: the ids of the programs still to run, in run order, the current one first |
//! | `m` + `growth-todo` | [`TodoRecord`]: the running program's marked boards |
//! | `m` + `growth-log` | [`LogRecord`]: the programs that changed the book since the base book (a replay runs them again) |
//! | `m` + `signature` | String: the search signature the book is pinned to |
//! | `m` + `rollback-requested` | u64: rollbacks requested so far (written with the tombstones of the results a caught worker loses, which still name them and their results) |
//! | `m` + `rollback-replayed` | u64: the last of those requests growth's recovery covered (written by the checkpoint of the replayed book, of a retraction, or after a re-opened asynchronous program finished again); a start with fewer covered than requested recovers first |
//!
//! A request (`x`, `u`) is the 25 bytes of a search request: board (player BE, opponent BE),
//! excluded moves (BE), level.
//!
//! The tree `credentials` holds the worker credentials (see `credentials.rs`); the tree
//! `invitations` the invitations, by name (see `invitations.rs`); the tree `events`
//! the event log: [`EventRecord`] under its 8-byte sequence number (BE), at most the configured
//! bound of them (see `events.rs`).
//!
//! [`BaseRecord`]: super::BaseRecord
//! [`HeaderRecord`]: super::HeaderRecord
//! [`PositionRecord`]: super::PositionRecord
//! [`CHUNK_POSITIONS`]: super::CHUNK_POSITIONS
//! [`ResultGroupRecord`]: super::ResultGroupRecord
//! [`CaseRecord`]: super::CaseRecord
//! [`TrustRecord`]: super::TrustRecord
//! [`HistoryRecord`]: super::HistoryRecord
//! [`GrowthRecord`]: super::GrowthRecord
//! [`ProgramRecord`]: super::ProgramRecord
//! [`LogRecord`]: super::LogRecord
//! [`TodoRecord`]: super::TodoRecord
//! [`EventRecord`]: super::EventRecord

use super::StoreError;
use bookfarm_engine::Board;
use bookfarm_engine::search::LeafRequest;
use uuid::Uuid;

/// Prefix of the accepted-job records.
pub(super) const D: u8 = b'd';
/// Prefix of the meta records.
pub(super) const M: u8 = b'm';
/// Prefix of the open validation cases.
pub(super) const U: u8 = b'u';
/// Prefix of the trust records.
pub(super) const T: u8 = b't';
/// Prefix of the result groups.
pub(super) const G: u8 = b'g';
/// Prefix of the result tombstones.
pub(super) const X: u8 = b'x';
/// Prefix of the position chunks.
pub(super) const K: u8 = b'k';
/// Prefix of the programs of the queue.
pub(super) const Q: u8 = b'q';

/// Key, in sled's default tree, of the store's format version.
pub(super) const FORMAT_KEY: &[u8] = b"format-version";

/// Key, in sled's default tree, of the name of the tree holding the current book generation
/// (absent: no book was ever stored). Moving it is the one write that switches books.
pub(super) const BOOK_TREE_KEY: &[u8] = b"book-tree";

/// The tree of the worker credentials.
pub(super) const CREDENTIALS_TREE: &str = "credentials";

/// The tree of the invitations volunteers enrol with.
pub(super) const INVITATIONS_TREE: &str = "invitations";

/// The tree of the event log.
pub(super) const EVENTS_TREE: &str = "events";

/// The prefix of the book generations' tree names.
const BOOK_TREE_PREFIX: &str = "book-";

/// The tree of the book generation whose base file is `base/<generation>.dat` (generation 0: the
/// empty tree of a store that never held a book).
pub(super) fn book_tree_name(generation: u64) -> String {
    format!("{BOOK_TREE_PREFIX}{generation:016x}")
}

/// Whether a sled tree is a book generation's (not the credentials or sled's own).
pub(super) fn is_book_tree(name: &[u8]) -> bool {
    name.starts_with(BOOK_TREE_PREFIX.as_bytes())
}

/// The key of chunk `index` of the position records the batch `seq` wrote.
pub(super) fn chunk_key(seq: u64, index: u32) -> [u8; 13] {
    let mut k = [0u8; 13];
    k[0] = K;
    k[1..9].copy_from_slice(&seq.to_be_bytes());
    k[9..].copy_from_slice(&index.to_be_bytes());
    k
}

/// The key of program `id`'s record.
pub(super) fn program_key(id: u64) -> [u8; 9] {
    let mut k = [0u8; 9];
    k[0] = Q;
    k[1..].copy_from_slice(&id.to_be_bytes());
    k
}

/// The key of the result group the batch `seq` stored.
pub(super) fn group_key(seq: u64) -> [u8; 9] {
    let mut k = [0u8; 9];
    k[0] = G;
    k[1..].copy_from_slice(&seq.to_be_bytes());
    k
}

/// The key of a request's record under `prefix` (`x` tombstone, `u` case).
pub(super) fn request_key(prefix: u8, r: &LeafRequest) -> [u8; 26] {
    let mut k = [0u8; 26];
    k[0] = prefix;
    k[1..9].copy_from_slice(&r.board.player.to_be_bytes());
    k[9..17].copy_from_slice(&r.board.opponent.to_be_bytes());
    k[17..25].copy_from_slice(&r.excluded.to_be_bytes());
    k[25] = r.level;
    k
}

/// The request of a [`request_key`] (`None`: not such a key).
pub(super) fn request_of(k: &[u8]) -> Option<LeafRequest> {
    let k: &[u8; 26] = k.try_into().ok()?;
    let u = |i: usize| k[i..i + 8].try_into().ok().map(u64::from_be_bytes);
    Some(LeafRequest {
        board: Board {
            player: u(1)?,
            opponent: u(9)?,
        },
        excluded: u(17)?,
        level: k[25],
    })
}

/// A big-endian u64 at `at` of `v`, if there are 8 bytes there.
pub(super) fn be_u64(v: &[u8], at: usize) -> Option<u64> {
    v.get(at..at + 8)
        .and_then(|b| b.try_into().ok())
        .map(u64::from_be_bytes)
}

/// The key of a contributor's trust record.
pub(super) fn trust_key(name: &str) -> Vec<u8> {
    let mut k = vec![T];
    k.extend_from_slice(name.as_bytes());
    k
}

/// The key of an accepted job's record.
pub(super) fn done_key(id: &Uuid) -> [u8; 17] {
    let mut k = [0u8; 17];
    k[0] = D;
    k[1..].copy_from_slice(id.as_bytes());
    k
}

/// The key of the meta record `name`.
pub(super) fn meta_key(name: &str) -> Vec<u8> {
    let mut k = vec![M];
    k.extend_from_slice(name.as_bytes());
    k
}

/// The meta record `name` of `tree`, if stored.
pub(super) fn meta_in<T: serde::de::DeserializeOwned>(
    tree: &sled::Tree,
    name: &str,
) -> Result<Option<T>, StoreError> {
    let key = meta_key(name);
    match tree.get(&key)? {
        Some(v) => Ok(Some(decode::<T>(&key, &v)?)),
        None => Ok(None),
    }
}

/// Lowercase hex of bytes (keys in errors, the text dump).
pub(super) fn hex(k: &[u8]) -> String {
    k.iter().map(|b| format!("{b:02x}")).collect()
}

/// Bytes of the checksum every stored value ends with (format version 5 on).
pub(super) const SEAL_BYTES: usize = 4;

/// The checksum of a record: CRC-32C of the key's length (u32 LE), the key and the value, so
/// that a damaged key or value, or a value found under another key, does not match.
fn record_crc(key: &[u8], value: &[u8]) -> u32 {
    let len = u32::try_from(key.len()).unwrap_or(u32::MAX).to_le_bytes();
    let crc = crc32c::crc32c_append(crc32c::crc32c(&len), key);
    crc32c::crc32c_append(crc, value)
}

/// `value` as stored under `key`: followed by its [`record_crc`] (LE).
pub(super) fn seal(key: &[u8], value: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(value.len() + SEAL_BYTES);
    out.extend_from_slice(value);
    out.extend_from_slice(&record_crc(key, value).to_le_bytes());
    out
}

/// The value of a record stored under `key` ([`seal`]), checked: a record too short for its
/// checksum or whose checksum differs is [`StoreError::CorruptRecord`], naming the key.
pub(super) fn unseal<'a>(key: &[u8], stored: &'a [u8]) -> Result<&'a [u8], StoreError> {
    let Some(at) = stored.len().checked_sub(SEAL_BYTES) else {
        return Err(corrupt_record(
            key,
            format!("{} bytes, shorter than its checksum", stored.len()),
        ));
    };
    let (value, sum) = stored.split_at(at);
    let sum = u32::from_le_bytes([sum[0], sum[1], sum[2], sum[3]]);
    let want = record_crc(key, value);
    if sum != want {
        return Err(corrupt_record(
            key,
            format!("checksum {sum:08x}, the key and value give {want:08x}"),
        ));
    }
    Ok(value)
}

/// The error of a damaged record under `key`.
pub(super) fn corrupt_record(key: &[u8], what: String) -> StoreError {
    StoreError::CorruptRecord {
        key: key_text(key),
        what,
    }
}

/// A key as people read it: its printable ASCII as text, or its hex when it holds other bytes
/// (`x` + hex after a one-byte ASCII prefix).
pub(super) fn key_text(k: &[u8]) -> String {
    let printable = |b: &u8| b.is_ascii_graphic() || *b == b' ';
    if k.iter().all(printable) {
        return format!("\"{}\"", String::from_utf8_lossy(k));
    }
    match k.split_first() {
        Some((p, rest)) if p.is_ascii_alphabetic() => {
            format!("{}+{}", char::from(*p), hex(rest))
        }
        _ => hex(k),
    }
}

/// The stored form of a value under `key`: postcard, sealed ([`seal`]).
pub(super) fn encode<T: serde::Serialize>(key: &[u8], v: &T) -> Result<Vec<u8>, StoreError> {
    Ok(seal(key, &encode_plain(v)?))
}

/// A stored value under `k` ([`encode`]): its checksum checked, then decoded (an error naming
/// the key when it is damaged or not a `T`).
pub(super) fn decode<'a, T: serde::Deserialize<'a>>(
    k: &[u8],
    v: &'a [u8],
) -> Result<T, StoreError> {
    decode_plain(k, unseal(k, v)?)
}

/// The postcard form of a value, without checksum (the values of format versions 1 to 4, which
/// the migration steps up to version 5 read and write; the parts of a position chunk).
pub(super) fn encode_plain<T: serde::Serialize>(v: &T) -> Result<Vec<u8>, StoreError> {
    postcard::to_stdvec(v).map_err(StoreError::Encode)
}

/// A value of [`encode_plain`]'s form (an error naming the key when it is not a `T`).
pub(super) fn decode_plain<'a, T: serde::Deserialize<'a>>(
    k: &[u8],
    v: &'a [u8],
) -> Result<T, StoreError> {
    postcard::from_bytes(v).map_err(|source| StoreError::Decode {
        key: hex(k),
        source,
    })
}
