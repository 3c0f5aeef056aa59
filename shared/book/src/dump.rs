//! The canonical text dump of a book, exactly as `../shared/tools/edax_book_dump.py --header`
//! prints it: a header comment (the Python dict of the header fields), a summary comment, then
//! one line per position sorted by (player, opponent).

use crate::mem::{MemBook, NodeId};
use crate::model::BookHeader;
use bookfarm_engine::Move;
use std::fmt::Write;

/// The dump tool's move text: `a1`..`h8`, `pass`, `--`.
fn move_text(mv: Move) -> String {
    match mv {
        Move::Square(s) => s.to_string(),
        Move::Pass => "pass".to_string(),
        Move::None => "--".to_string(),
    }
}

/// The `--header` line (a Python dict repr of the header, with the record count).
pub fn header_line(h: &BookHeader, n_nodes: usize) -> String {
    let d = &h.date;
    format!(
        "# {{'version': {}, 'release': {}, 'date': ({}, {}, {}, {}, {}, {}, {}), 'level': {}, \
         'n_empties': {}, 'midgame_error': {}, 'endcut_error': {}, 'verbosity': {}, 'n_nodes': {}}}",
        h.version,
        h.release,
        d.year,
        d.month,
        d.day,
        d.hour,
        d.minute,
        d.second,
        d.pad,
        h.level,
        h.n_empties,
        h.midgame_error,
        h.endcut_error,
        h.verbosity,
        n_nodes
    )
}

/// One position line of the dump.
pub fn position_line(book: &MemBook, id: NodeId) -> String {
    let b = book.board(id);
    let s = book.score(id);
    let c = book.counts(id);
    let mut links: Vec<_> = book.links(id).collect();
    links.sort_by_key(|l| l.mv.code()); // stable, as Python's sorted
    let ls: Vec<String> = links
        .iter()
        .map(|l| format!("{}:{:+}", move_text(l.mv), l.score))
        .collect();
    let leaf = book.leaf(id);
    format!(
        "{:016x} {:016x} {} {} {} {:+} {:+} {:+} {} {} {} {} | {} | {}:{:+}",
        b.player,
        b.opponent,
        b,
        b.empties(),
        book.level(id),
        s.value,
        s.lower,
        s.upper,
        c.n_wins,
        c.n_draws,
        c.n_losses,
        c.n_lines,
        ls.join(" "),
        move_text(leaf.mv),
        leaf.score
    )
}

/// The whole dump; `with_header` adds the first `# {...}` line (the tool's `--header`).
pub fn dump(book: &MemBook, with_header: bool) -> String {
    let h = book.header();
    let mut out = String::with_capacity(160 * (book.len() + 2));
    if with_header {
        out.push_str(&header_line(h, book.len()));
        out.push('\n');
    }
    // Writing to a String cannot fail.
    let _ = writeln!(
        out,
        "# {} positions; level {}; n_empties {} (book depth {})",
        book.len(),
        h.level,
        h.n_empties,
        61 - i64::from(h.n_empties)
    );
    let mut ids: Vec<NodeId> = book.ids().collect();
    ids.sort_unstable_by_key(|&id| book.board(id));
    for id in ids {
        out.push_str(&position_line(book, id));
        out.push('\n');
    }
    out
}
