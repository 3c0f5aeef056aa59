//! Strings a worker supplies (names, failure reasons), made safe for logs and replies.

/// Longest worker name kept (characters after escaping).
pub const MAX_NAME_CHARS: usize = 64;
/// Longest failure reason kept (characters after escaping).
pub const MAX_REASON_CHARS: usize = 256;

/// `s` with control and other non-printable characters escaped as Rust does (`\n`, `\u{1b}`,
/// `\u{202e}`) and cut to `max` characters (an ellipsis marks the cut), so that a worker can
/// neither forge log lines nor fill the logs.
pub fn clean(s: &str, max: usize) -> String {
    let mut out = String::new();
    let mut n = 0;
    for c in s.chars() {
        let esc: Vec<char> = match c {
            // Quotes and backslashes are printable: keep them as they are.
            '"' | '\'' | '\\' => vec![c],
            _ => c.escape_debug().collect(),
        };
        if n + esc.len() > max {
            out.push('…');
            break;
        }
        n += esc.len();
        out.extend(esc);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_characters_are_escaped() {
        assert_eq!(
            clean("a\nb\r\u{1b}[31m\u{202e}", 64),
            "a\\nb\\r\\u{1b}[31m\\u{202e}"
        );
        assert_eq!(clean("it's \"x\"", 64), "it's \"x\"");
        assert_eq!(clean("wörker-1", 64), "wörker-1");
    }

    #[test]
    fn long_strings_are_cut() {
        let s = clean(&"x".repeat(3_000_000), MAX_NAME_CHARS);
        assert_eq!(s.chars().count(), MAX_NAME_CHARS + 1);
        assert!(s.ends_with('…'));
        // An escape is never cut in half.
        assert_eq!(clean("ab\n", 3), "ab…");
    }
}
