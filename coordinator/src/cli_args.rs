//! Command-line value parsers with the project's ranges: a bad value is refused by clap with one
//! line naming the flag, the value and the allowed range, before anything runs.

/// An Edax level, 0..=60.
pub fn level(s: &str) -> Result<u8, String> {
    ranged(s, 0, 60, "a level")
}

/// A level that searches, 1..=60.
pub fn search_level(s: &str) -> Result<u8, String> {
    ranged(s, 1, 60, "a search level")
}

/// A book depth in plies, 1..=60.
pub fn depth(s: &str) -> Result<u8, String> {
    ranged(s, 1, 60, "a book depth in plies")
}

/// A number of workers or threads, 1..=4096.
pub fn count(s: &str) -> Result<usize, String> {
    let n: u16 = ranged(s, 1, 4096, "a number of workers or threads")?;
    Ok(usize::from(n))
}

fn ranged<T>(s: &str, lo: T, hi: T, what: &str) -> Result<T, String>
where
    T: std::str::FromStr + PartialOrd + std::fmt::Display + Copy,
{
    match s.trim().parse::<T>() {
        Ok(v) if v >= lo && v <= hi => Ok(v),
        _ => Err(format!("expected {what} from {lo} to {hi}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_are_enforced_with_a_clear_message() {
        assert_eq!(level("0"), Ok(0));
        assert_eq!(level("60"), Ok(60));
        assert_eq!(level("99"), Err("expected a level from 0 to 60".into()));
        assert!(level("-1").is_err() && level("six").is_err());
        assert_eq!(
            search_level("0"),
            Err("expected a search level from 1 to 60".into())
        );
        assert_eq!(depth("16"), Ok(16));
        assert!(depth("0").is_err() && depth("61").is_err());
        assert_eq!(count("2"), Ok(2));
        assert_eq!(
            count("0"),
            Err("expected a number of workers or threads from 1 to 4096".into())
        );
    }
}
