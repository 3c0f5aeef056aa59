//! Transcript and record-line readers: never panic; whatever parses round-trips through the
//! transcript writer.
#![no_main]

use bookfarm_engine::formats::records::{read_egaroucid, read_eothello, read_logistello};
use bookfarm_engine::formats::transcript::parse_transcript;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(game) = parse_transcript(text) {
        let again = parse_transcript(&game.to_transcript()).expect("written transcript parses");
        assert_eq!(again.to_transcript(), game.to_transcript());
        assert!(game.replay().is_ok());
    }
    let _ = read_logistello(text);
    let _ = read_egaroucid(text);
    let _ = read_eothello(text);
});
