//! OBF and flippy endgame-list parsers: never panic; whatever parses writes back and re-parses to
//! the same positions.
#![no_main]

use bookfarm_engine::formats::obf::{parse_flippy, parse_obf, write_obf};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(positions) = parse_obf(text) {
        let again = parse_obf(&write_obf(&positions)).expect("written OBF parses");
        assert_eq!(again, positions);
    }
    let _ = parse_flippy(text);
});
