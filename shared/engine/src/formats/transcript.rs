//! Edax-style move transcripts: `f5d6c3d3c4…`.
//!
//! Moves are two characters, a file `a`..`h` and a rank `1`..`8`, case-insensitive, optionally
//! separated by whitespace. A pass may be written `pa` or `ps` (also `PA`); a pass that is not
//! written is inserted where the side to move has no legal move. The game starts from the
//! standard position with Black to move.

use super::{Game, GameError, Replayer};
use crate::board::Board;
use crate::square::{Move, Square};

/// A transcript that cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TranscriptError {
    /// Characters at byte `offset` that are no move.
    #[error("bad move text {text:?} at byte {offset}")]
    Syntax {
        /// Byte offset of the bad token.
        offset: usize,
        /// The offending characters (at most two).
        text: String,
    },
    /// A move that is not legal.
    #[error(transparent)]
    Game(#[from] GameError),
}

/// Parse the two bytes of one move token.
fn token(a: u8, b: u8) -> Option<Move> {
    let f = a.to_ascii_lowercase();
    match (f, b.to_ascii_lowercase()) {
        (b'p', b'a') | (b'p', b's') => Some(Move::Pass),
        (b'a'..=b'h', b'1'..=b'8') => Square::new((b - b'1') * 8 + (f - b'a')).map(Move::Square),
        _ => None,
    }
}

/// Split a transcript into moves without checking legality.
pub fn parse_moves(text: &str) -> Result<Vec<Move>, TranscriptError> {
    let bytes = text.as_bytes();
    let mut moves = Vec::with_capacity(bytes.len() / 2);
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i].is_ascii_whitespace() {
            i += 1;
            continue;
        }
        let mv = bytes
            .get(i + 1)
            .and_then(|&b| token(bytes[i], b))
            .ok_or_else(|| TranscriptError::Syntax {
                offset: i,
                text: String::from_utf8_lossy(&bytes[i..(i + 2).min(bytes.len())]).into_owned(),
            })?;
        moves.push(mv);
        i += 2;
    }
    Ok(moves)
}

/// Parse and replay a transcript from the start position (see the module docs).
pub fn parse_transcript(text: &str) -> Result<Game, TranscriptError> {
    let mut r = Replayer::new();
    for mv in parse_moves(text)? {
        r.play(mv, None)?;
    }
    Ok(r.finish())
}

/// The board a transcript reaches from the start position, from the side to move's view: the
/// one move-list-to-board function of the workspace. Passes are handled as by
/// [`parse_transcript`]: a pass is inserted before a move where the side to move has none, a
/// written pass is accepted only where forced, and nothing is played after the last move (a
/// side left without a move is still to move).
pub fn board_after(text: &str) -> Result<Board, TranscriptError> {
    let mut r = Replayer::new();
    for mv in parse_moves(text)? {
        r.play(mv, None)?;
    }
    Ok(r.board())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forms() {
        let g = parse_transcript("f5d6c3").expect("legal");
        assert_eq!(g.moves.len(), 3);
        assert_eq!(parse_transcript("F5 D6 c3\n"), Ok(g.clone()));
        assert_eq!(g.to_transcript(), "f5d6c3");
        assert_eq!(parse_transcript(""), Ok(Game::default()));
        assert!(matches!(
            parse_transcript("f5d6c"),
            Err(TranscriptError::Syntax { offset: 4, .. })
        ));
        assert!(matches!(
            parse_transcript("f5z9"),
            Err(TranscriptError::Syntax { offset: 2, .. })
        ));
        assert!(matches!(
            parse_transcript("f5d6a1"),
            Err(TranscriptError::Game(GameError::Illegal { ply: 2, .. }))
        ));
        // Non-ASCII input must not panic.
        assert!(parse_transcript("f5é").is_err());
    }

    /// The earliest pass (after 8 plies) and the earliest game end (after 9 plies) from the
    /// start, found by exhaustive search.
    #[test]
    fn passes_inferred_and_explicit() {
        let prefix = "d3c3b3b2f5a3a1c1";
        let g = parse_transcript(prefix).expect("legal");
        let (board, black_to_move) = g.final_position().expect("legal");
        assert!(black_to_move && board.must_pass());
        let reply = board
            .pass()
            .legal_squares()
            .next()
            .expect("white has a move");
        let inferred = parse_transcript(&format!("{prefix}{reply}")).expect("legal");
        let explicit = parse_transcript(&format!("{prefix} PA {reply}")).expect("legal");
        assert_eq!(inferred, explicit);
        assert_eq!(inferred.moves.len(), 10);
        assert_eq!(inferred.moves[8], Move::Pass);
        assert_eq!(inferred.replay().expect("legal").len(), 11);
        // The transcript writer drops the pass; reading it back restores it.
        assert_eq!(parse_transcript(&inferred.to_transcript()), Ok(inferred));
        // A pass where none is forced is illegal.
        assert!(matches!(
            parse_transcript("f5pa"),
            Err(TranscriptError::Game(GameError::Illegal {
                ply: 1,
                mv: Move::Pass,
                ..
            }))
        ));

        let ended = parse_transcript("d3c3b3d2e1d6d7e3f4").expect("legal");
        assert!(ended.is_finished().expect("legal"));
        // Nothing can follow the end of the game.
        assert!(parse_transcript("d3c3b3d2e1d6d7e3f4a1").is_err());
        assert!(parse_transcript("d3c3b3d2e1d6d7e3f4pa").is_err());
    }

    /// `board_after` is the final position of `parse_transcript`, passes included.
    #[test]
    fn board_after_is_the_transcripts_final_position() {
        let prefix = "d3c3b3b2f5a3a1c1";
        for text in [
            "",
            "f5",
            "F5 D6 c3\n",
            prefix,
            "d3c3b3b2f5a3a1c1e3",
            "d3c3b3b2f5a3a1c1 PA e3",
            "d3c3b3d2e1d6d7e3f4",
        ] {
            let game = parse_transcript(text).expect("legal");
            let (board, _) = game.final_position().expect("legal");
            assert_eq!(board_after(text), Ok(board), "{text:?}");
        }
        assert_eq!(board_after(""), Ok(Board::start()));
        // The side left without a move after the last one is still to move.
        assert!(board_after(prefix).expect("legal").must_pass());
        for bad in [
            "f5d6c",
            "f5z9",
            "f5f5",
            "f5pa",
            "f5é",
            "d3c3b3d2e1d6d7e3f4a1",
        ] {
            assert_eq!(
                board_after(bad).err(),
                parse_transcript(bad).err(),
                "{bad:?}"
            );
        }
    }
}
