//! Command-line value parsers with the project's ranges: a bad value is refused by clap with one
//! line naming the flag, the value and the allowed range, before anything runs.

use std::path::PathBuf;

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

/// Edax's deviate relative error in discs, -129..=129.
pub fn relative_error(s: &str) -> Result<i32, String> {
    ranged(s, -129, 129, "a relative error in discs")
}

/// An absolute error in discs (deviate), 0..=65.
pub fn absolute_error(s: &str) -> Result<i32, String> {
    ranged(s, 0, 65, "an absolute error in discs")
}

/// An error margin in discs (enhance, upgrade, randomness), 0..=129.
pub fn error_margin(s: &str) -> Result<i32, String> {
    ranged(s, 0, 129, "an error margin in discs")
}

/// A pair `REL,ABS` of deviate errors (`local --deviate`).
pub fn deviate_pair(s: &str) -> Result<(i32, i32), String> {
    let (a, b) = pair(s)?;
    Ok((relative_error(a)?, absolute_error(b)?))
}

/// A pair `MID,END` of enhance errors (`local --enhance`).
pub fn enhance_pair(s: &str) -> Result<(i32, i32), String> {
    let (a, b) = pair(s)?;
    Ok((error_margin(a)?, error_margin(b)?))
}

fn pair(s: &str) -> Result<(&str, &str), String> {
    s.split_once(',')
        .ok_or_else(|| "expected two numbers separated by a comma, like 2,4".to_string())
}

/// `book fill` depth, 1..=61.
pub fn fill_depth(s: &str) -> Result<u32, String> {
    ranged(s, 1, 61, "a fill depth")
}

/// A number of empty squares, 0..=60.
pub fn empties(s: &str) -> Result<u32, String> {
    ranged(s, 0, 60, "a number of empty squares")
}

/// A program schedule: `serial` or `async`.
pub fn schedule(s: &str) -> Result<bookfarm_book::program::Schedule, String> {
    use bookfarm_book::program::Schedule;
    match s.trim() {
        "serial" => Ok(Schedule::Serial),
        "async" => Ok(Schedule::Async),
        _ => Err("expected `serial` or `async`".into()),
    }
}

/// A program schedule on a farm: `serial`, `async` or `auto` (the coordinator chooses).
pub fn schedule_choice(s: &str) -> Result<bookfarm_book::program::Schedule, String> {
    s.trim().parse()
}

/// Jobs leased ahead of the free threads, 0..=64.
pub fn lookahead(s: &str) -> Result<usize, String> {
    let n: u8 = ranged(s, 0, 64, "a number of jobs leased ahead")?;
    Ok(usize::from(n))
}

/// A duration in seconds, 1..=86400.
pub fn seconds(s: &str) -> Result<u64, String> {
    ranged(s, 1, 86_400, "a number of seconds")
}

/// A file that exists (an input).
pub fn existing_file(s: &str) -> Result<PathBuf, String> {
    let p = PathBuf::from(s);
    if p.is_file() {
        Ok(p)
    } else if p.exists() {
        Err("expected a file, found something else".into())
    } else {
        Err("no such file".into())
    }
}

/// A file to write: its directory must exist, and it must not be a directory.
pub fn output_file(s: &str) -> Result<PathBuf, String> {
    let p = PathBuf::from(s);
    if p.is_dir() {
        return Err("expected a file name, found a directory".into());
    }
    match p.parent() {
        Some(d) if !d.as_os_str().is_empty() && !d.is_dir() => {
            Err(format!("no such directory {}", d.display()))
        }
        _ => Ok(p),
    }
}

/// A book file to read: it exists and its extension names a book format
/// ([`bookfarm_book::BookFormat`]).
pub fn book_input(s: &str) -> Result<PathBuf, String> {
    let p = existing_file(s)?;
    known_book_format(p)
}

/// A book file to write: as [`output_file`], and its extension names a book format.
pub fn book_output(s: &str) -> Result<PathBuf, String> {
    let p = output_file(s)?;
    known_book_format(p)
}

fn known_book_format(p: PathBuf) -> Result<PathBuf, String> {
    match bookfarm_book::BookFormat::from_path(&p) {
        Ok(_) => Ok(p),
        Err(e) => Err(e.to_string()),
    }
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
        assert_eq!(relative_error("-2"), Ok(-2));
        assert!(relative_error("130").is_err() && absolute_error("-1").is_err());
        assert_eq!(deviate_pair("2,4"), Ok((2, 4)));
        assert!(deviate_pair("2,99").is_err() && deviate_pair("2").is_err());
        assert_eq!(enhance_pair("1,3"), Ok((1, 3)));
        assert!(enhance_pair("-1,3").is_err());
        assert!(fill_depth("0").is_err() && fill_depth("61").is_ok());
        assert!(lookahead("65").is_err() && lookahead("0").is_ok());
    }

    #[test]
    fn paths_are_checked() {
        let dir = tempfile::tempdir().expect("tempdir");
        let f = dir.path().join("f.txt");
        std::fs::write(&f, "x").expect("write");
        let s = |p: &std::path::Path| p.display().to_string();
        assert_eq!(existing_file(&s(&f)), Ok(f.clone()));
        assert_eq!(
            existing_file(&s(&dir.path().join("none"))),
            Err("no such file".into())
        );
        assert!(existing_file(&s(dir.path())).is_err());
        assert!(output_file(&s(&dir.path().join("out.dat"))).is_ok());
        assert!(output_file("out.dat").is_ok());
        assert!(output_file(&s(dir.path())).is_err());
        assert!(output_file(&s(&dir.path().join("no/out.dat"))).is_err());
        for name in ["out.dat", "out.csv", "out.egbk3"] {
            assert!(book_output(&s(&dir.path().join(name))).is_ok(), "{name}");
        }
        let unknown = "unknown book format (expected a .dat, .csv or .egbk3 extension)";
        assert_eq!(
            book_output(&s(&dir.path().join("out.txt"))),
            Err(unknown.into())
        );
        assert_eq!(book_input(&s(&f)), Err(unknown.into()));
        let dat = dir.path().join("b.dat");
        std::fs::write(&dat, "x").expect("write");
        assert_eq!(book_input(&s(&dat)), Ok(dat.clone()));
        assert_eq!(
            book_input(&s(&dir.path().join("none.dat"))),
            Err("no such file".into())
        );
    }
}
