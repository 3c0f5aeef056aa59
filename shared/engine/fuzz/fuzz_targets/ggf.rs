//! GGF reader: never panics; every game it returns replays legally.
#![no_main]

use bookfarm_engine::formats::ggf::parse_ggf;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(games) = parse_ggf(text) {
        for g in &games {
            assert!(g.game.replay().is_ok());
        }
    }
});
