//! WTHOR `.wtb` and name-list readers: never panic; whatever parses replays legally and writes
//! back to the same games.
#![no_main]

use bookfarm_engine::formats::wthor::{PLAYER_NAME_LEN, read_names, read_wtb, write_wtb};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok((header, games)) = read_wtb(data) {
        for g in &games {
            assert!(g.game.replay().is_ok());
        }
        let (_, again) = read_wtb(&write_wtb(&header, &games)).expect("written file reads");
        // Trailing passes cannot be stored; compare the squares.
        for (a, b) in again.iter().zip(&games) {
            assert_eq!(a.game.to_transcript(), b.game.to_transcript());
        }
    }
    let _ = read_names(data, PLAYER_NAME_LEN);
});
