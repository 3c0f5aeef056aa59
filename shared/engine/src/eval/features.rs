//! Edax's 47 pattern features (edax-spec §9.2) and their incremental update.
//!
//! A feature index is the base-3 number read over the feature's squares in the listed order,
//! first square most significant, with digit 0 = a disc of the side the index is encoded for,
//! 1 = a disc of the other side, 2 = empty. [`Features`] keeps the 47 indices of both sides' views
//! as 48-lane `u16` vectors: a move updates them with one vector operation per changed square
//! (the power-of-3 vector of that square), which the compiler vectorises.

use crate::board::Board;

/// Number of features, including the constant one.
pub const N_FEATURES: usize = 47;

/// Squares of each feature (Edax square indices, A1 = 0), in listed order; the constant feature
/// has none.
pub const FEATURE_SQUARES: [&[u8]; N_FEATURES] = {
    const A1: u8 = 0;
    const B1: u8 = 1;
    const C1: u8 = 2;
    const D1: u8 = 3;
    const E1: u8 = 4;
    const F1: u8 = 5;
    const G1: u8 = 6;
    const H1: u8 = 7;
    const A2: u8 = 8;
    const B2: u8 = 9;
    const C2: u8 = 10;
    const D2: u8 = 11;
    const E2: u8 = 12;
    const F2: u8 = 13;
    const G2: u8 = 14;
    const H2: u8 = 15;
    const A3: u8 = 16;
    const B3: u8 = 17;
    const C3: u8 = 18;
    const D3: u8 = 19;
    const E3: u8 = 20;
    const F3: u8 = 21;
    const G3: u8 = 22;
    const H3: u8 = 23;
    const A4: u8 = 24;
    const B4: u8 = 25;
    const C4: u8 = 26;
    const D4: u8 = 27;
    const E4: u8 = 28;
    const F4: u8 = 29;
    const G4: u8 = 30;
    const H4: u8 = 31;
    const A5: u8 = 32;
    const B5: u8 = 33;
    const C5: u8 = 34;
    const D5: u8 = 35;
    const E5: u8 = 36;
    const F5: u8 = 37;
    const G5: u8 = 38;
    const H5: u8 = 39;
    const A6: u8 = 40;
    const B6: u8 = 41;
    const C6: u8 = 42;
    const D6: u8 = 43;
    const E6: u8 = 44;
    const F6: u8 = 45;
    const G6: u8 = 46;
    const H6: u8 = 47;
    const A7: u8 = 48;
    const B7: u8 = 49;
    const C7: u8 = 50;
    const D7: u8 = 51;
    const E7: u8 = 52;
    const F7: u8 = 53;
    const G7: u8 = 54;
    const H7: u8 = 55;
    const A8: u8 = 56;
    const B8: u8 = 57;
    const C8: u8 = 58;
    const D8: u8 = 59;
    const E8: u8 = 60;
    const F8: u8 = 61;
    const G8: u8 = 62;
    const H8: u8 = 63;
    [
        &[A1, B1, A2, B2, C1, A3, C2, B3, C3],
        &[H1, G1, H2, G2, F1, H3, F2, G3, F3],
        &[A8, A7, B8, B7, A6, C8, B6, C7, C6],
        &[H8, H7, G8, G7, H6, F8, G6, F7, F6],
        &[A5, A4, A3, A2, A1, B2, B1, C1, D1, E1],
        &[H5, H4, H3, H2, H1, G2, G1, F1, E1, D1],
        &[A4, A5, A6, A7, A8, B7, B8, C8, D8, E8],
        &[H4, H5, H6, H7, H8, G7, G8, F8, E8, D8],
        &[B2, A1, B1, C1, D1, E1, F1, G1, H1, G2],
        &[B7, A8, B8, C8, D8, E8, F8, G8, H8, G7],
        &[B2, A1, A2, A3, A4, A5, A6, A7, A8, B7],
        &[G2, H1, H2, H3, H4, H5, H6, H7, H8, G7],
        &[A1, C1, D1, C2, D2, E2, F2, E1, F1, H1],
        &[A8, C8, D8, C7, D7, E7, F7, E8, F8, H8],
        &[A1, A3, A4, B3, B4, B5, B6, A5, A6, A8],
        &[H1, H3, H4, G3, G4, G5, G6, H5, H6, H8],
        &[A2, B2, C2, D2, E2, F2, G2, H2],
        &[A7, B7, C7, D7, E7, F7, G7, H7],
        &[B1, B2, B3, B4, B5, B6, B7, B8],
        &[G1, G2, G3, G4, G5, G6, G7, G8],
        &[A3, B3, C3, D3, E3, F3, G3, H3],
        &[A6, B6, C6, D6, E6, F6, G6, H6],
        &[C1, C2, C3, C4, C5, C6, C7, C8],
        &[F1, F2, F3, F4, F5, F6, F7, F8],
        &[A4, B4, C4, D4, E4, F4, G4, H4],
        &[A5, B5, C5, D5, E5, F5, G5, H5],
        &[D1, D2, D3, D4, D5, D6, D7, D8],
        &[E1, E2, E3, E4, E5, E6, E7, E8],
        &[A1, B2, C3, D4, E5, F6, G7, H8],
        &[A8, B7, C6, D5, E4, F3, G2, H1],
        &[B1, C2, D3, E4, F5, G6, H7],
        &[H2, G3, F4, E5, D6, C7, B8],
        &[A2, B3, C4, D5, E6, F7, G8],
        &[G1, F2, E3, D4, C5, B6, A7],
        &[C1, D2, E3, F4, G5, H6],
        &[A3, B4, C5, D6, E7, F8],
        &[F1, E2, D3, C4, B5, A6],
        &[H3, G4, F5, E6, D7, C8],
        &[D1, E2, F3, G4, H5],
        &[A4, B5, C6, D7, E8],
        &[E1, D2, C3, B4, A5],
        &[H4, G5, F6, E7, D8],
        &[D1, C2, B3, A4],
        &[A5, B6, C7, D8],
        &[E1, F2, G3, H4],
        &[H5, G6, F7, E8],
        &[],
    ]
};

/// A weight family: its pattern length, unpacked offset, and the symmetry used for packing.
#[derive(Debug, Clone, Copy)]
pub struct Family {
    /// Name as in edax-spec §9.2.
    pub name: &'static str,
    /// Number of squares (the family has `3^len` unpacked weights).
    pub len: u32,
    /// Offset of the family in the unpacked per-ply table.
    pub offset: usize,
    /// Digit permutation of the symmetry folded by the packing (`sym[k]` = source digit of digit k;
    /// digit 0 = last listed square).
    pub sym: &'static [u32],
    /// Number of packed weights in the file.
    pub packed: usize,
}

const REV10: &[u32] = &[9, 8, 7, 6, 5, 4, 3, 2, 1, 0];
const REV8: &[u32] = &[7, 6, 5, 4, 3, 2, 1, 0];
const REV7: &[u32] = &[6, 5, 4, 3, 2, 1, 0];
const REV6: &[u32] = &[5, 4, 3, 2, 1, 0];
const REV5: &[u32] = &[4, 3, 2, 1, 0];
const REV4: &[u32] = &[3, 2, 1, 0];

/// The 13 weight families in file order.
pub const FAMILIES: [Family; 13] = [
    Family {
        name: "C9",
        len: 9,
        offset: 0,
        sym: &[0, 2, 1, 4, 3, 5, 7, 6, 8],
        packed: 10206,
    },
    Family {
        name: "C10",
        len: 10,
        offset: 19683,
        sym: &[9, 8, 7, 6, 4, 5, 3, 2, 1, 0],
        packed: 29889,
    },
    Family {
        name: "S10a",
        len: 10,
        offset: 78732,
        sym: REV10,
        packed: 29646,
    },
    Family {
        name: "S10b",
        len: 10,
        offset: 137781,
        sym: REV10,
        packed: 29646,
    },
    Family {
        name: "S8 line 2",
        len: 8,
        offset: 196830,
        sym: REV8,
        packed: 3321,
    },
    Family {
        name: "S8 line 3",
        len: 8,
        offset: 203391,
        sym: REV8,
        packed: 3321,
    },
    Family {
        name: "S8 line 4",
        len: 8,
        offset: 209952,
        sym: REV8,
        packed: 3321,
    },
    Family {
        name: "S8 diagonal",
        len: 8,
        offset: 216513,
        sym: REV8,
        packed: 3321,
    },
    Family {
        name: "S7",
        len: 7,
        offset: 223074,
        sym: REV7,
        packed: 1134,
    },
    Family {
        name: "S6",
        len: 6,
        offset: 225261,
        sym: REV6,
        packed: 378,
    },
    Family {
        name: "S5",
        len: 5,
        offset: 225990,
        sym: REV5,
        packed: 135,
    },
    Family {
        name: "S4",
        len: 4,
        offset: 226233,
        sym: REV4,
        packed: 45,
    },
    Family {
        name: "const",
        len: 0,
        offset: 226314,
        sym: &[],
        packed: 1,
    },
];

/// Family index of each feature.
pub const FEATURE_FAMILY: [u8; N_FEATURES] = [
    0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3, 4, 4, 4, 4, 5, 5, 5, 5, 6, 6, 6, 6, 7, 7, 8, 8,
    8, 8, 9, 9, 9, 9, 10, 10, 10, 10, 11, 11, 11, 11, 12,
];

/// Unpacked weights per ply (Edax's `EVAL_N_WEIGHT`).
pub const N_WEIGHTS: usize = 226315;

/// Packed weights per ply in the file.
pub const N_PACKED: usize = 114364;

/// Number of lanes of a feature vector (47 features and one always-zero pad lane, so that the
/// vectors are 96 bytes and the update loops vectorise).
pub const LANES: usize = 48;

/// A vector of 48 base-3 indices (lane 47 is padding and always 0).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
#[repr(C, align(32))]
pub struct Lanes(pub [u16; LANES]);

impl Lanes {
    const ZERO: Lanes = Lanes([0; LANES]);

    /// Lane-wise wrapping `self += o`.
    #[inline(always)]
    fn add(&mut self, o: &Lanes) {
        #[cfg(target_arch = "x86_64")]
        sse2::add(self, o);
        #[cfg(not(target_arch = "x86_64"))]
        for i in 0..LANES {
            self.0[i] = self.0[i].wrapping_add(o.0[i]);
        }
    }

    /// Lane-wise wrapping `self -= o`.
    #[inline(always)]
    fn sub(&mut self, o: &Lanes) {
        #[cfg(target_arch = "x86_64")]
        sse2::sub(self, o);
        #[cfg(not(target_arch = "x86_64"))]
        for i in 0..LANES {
            self.0[i] = self.0[i].wrapping_sub(o.0[i]);
        }
    }
}

/// The lane operations in whole 128-bit registers. Written with SSE2 (part of every x86-64 CPU)
/// rather than as a lane loop: the search reads only the 47 real lanes of a child's vector, and
/// LLVM then split the loop into 4-lane (64-bit) pieces, more than twice the instructions.
#[cfg(target_arch = "x86_64")]
mod sse2 {
    use super::{LANES, Lanes};
    use std::arch::x86_64::{
        __m128i, _mm_add_epi16, _mm_load_si128, _mm_store_si128, _mm_sub_epi16,
    };

    /// `a = op(a, b)` on the six 8-lane chunks (`op` is an SSE2 lane operation).
    macro_rules! lanes_op {
        ($name:ident, $op:ident) => {
            #[inline(always)]
            pub(super) fn $name(a: &mut Lanes, b: &Lanes) {
                let pa = a.0.as_mut_ptr().cast::<__m128i>();
                let pb = b.0.as_ptr().cast::<__m128i>();
                for k in 0..LANES / 8 {
                    // SAFETY: `Lanes` is `repr(C, align(32))` around 48 `u16` (96 bytes), so
                    // chunk `k < 6` is in bounds and 16-byte aligned, as `_mm_load_si128` and
                    // `_mm_store_si128` require; SSE2 is part of the x86-64 baseline.
                    unsafe {
                        let v = $op(_mm_load_si128(pa.add(k)), _mm_load_si128(pb.add(k)));
                        _mm_store_si128(pa.add(k), v);
                    }
                }
            }
        };
    }
    lanes_op!(add, _mm_add_epi16);
    lanes_op!(sub, _mm_sub_epi16);
}

/// `POWERS[s]`: for each feature, the power of 3 of square `s`'s digit (0 when `s` is not in the
/// feature). Every digit change of square `s` moves the feature indices by a multiple of it.
const fn build_powers() -> [Lanes; 64] {
    let mut t = [Lanes::ZERO; 64];
    let mut k = 0;
    while k < N_FEATURES {
        let sq = FEATURE_SQUARES[k];
        let len = sq.len();
        let mut j = 0;
        while j < len {
            let s = sq[j] as usize;
            let mut p = 1u16;
            let mut e = 0;
            while e < len - 1 - j {
                p *= 3;
                e += 1;
            }
            t[s].0[k] = p;
            j += 1;
        }
        k += 1;
    }
    t
}

static POWERS: [Lanes; 64] = build_powers();

/// Unpacked offset of each feature's family.
const fn build_feature_offsets() -> [u32; N_FEATURES] {
    let mut o = [0u32; N_FEATURES];
    let mut k = 0;
    while k < N_FEATURES {
        o[k] = FAMILIES[FEATURE_FAMILY[k] as usize].offset as u32;
        k += 1;
    }
    o
}

/// Unpacked offset of each feature's family in the per-ply weight table (a `const`, so that the
/// evaluation's unrolled look-ups use them as address displacements).
pub const FEATURE_OFFSET: [u32; N_FEATURES] = build_feature_offsets();

/// Sum of the power vectors of the flipped squares.
#[inline(always)]
fn flipped_powers(flipped: u64) -> Lanes {
    let mut f = Lanes::ZERO;
    let mut fl = flipped;
    while fl != 0 {
        let s = fl.trailing_zeros() as usize;
        fl &= fl - 1;
        f.add(&POWERS[s]);
    }
    f
}

/// The feature indices of a position from both sides' views, kept up to date move by move.
///
/// `view[side]` is encoded with digit 0 = the discs of the side to move when `side == self.side`.
/// Indices are within their family (add [`FEATURE_OFFSET`] for the unpacked table).
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct Features {
    view: [Lanes; 2],
    side: usize,
}

impl Features {
    /// Encode `board` from scratch.
    pub fn new(board: &Board) -> Features {
        Features {
            view: [
                encode(board.player, board.opponent),
                encode(board.opponent, board.player),
            ],
            side: 0,
        }
    }

    /// The indices from the side to move's view.
    #[inline(always)]
    pub fn indices(&self) -> &Lanes {
        &self.view[self.side]
    }

    /// Update after the side to move plays `x`, flipping `flipped`.
    #[inline(always)]
    pub fn play(&mut self, x: u8, flipped: u64) {
        let f = flipped_powers(flipped);
        let p = &POWERS[usize::from(x)];
        let (me, other) = self.split();
        // Mover: the new disc goes empty (2) -> own (0), flipped discs other (1) -> own (0).
        me.sub(p);
        me.sub(p);
        me.sub(&f);
        // Opponent: the new disc goes empty (2) -> other (1), flipped discs own (0) -> other (1).
        other.sub(p);
        other.add(&f);
        self.side ^= 1;
    }

    /// Undo [`Features::play`] with the same arguments.
    #[inline(always)]
    pub fn undo(&mut self, x: u8, flipped: u64) {
        self.side ^= 1;
        let f = flipped_powers(flipped);
        let p = &POWERS[usize::from(x)];
        let (me, other) = self.split();
        me.add(p);
        me.add(p);
        me.add(&f);
        other.add(p);
        other.sub(&f);
    }

    /// The indices from the view of the side not to move.
    #[inline(always)]
    pub fn opponent_indices(&self) -> &Lanes {
        &self.view[self.side ^ 1]
    }

    /// The indices of the position after the side to move plays `x` flipping `flipped`, from
    /// the new side to move's view (what [`Features::play`] then [`Features::indices`] would
    /// give), without changing `self`. Cheaper than play + undo for leaf evaluations.
    #[inline(always)]
    pub fn child_indices(&self, x: u8, flipped: u64) -> Lanes {
        Features::child_of(self.opponent_indices(), x, flipped)
    }

    /// [`Features::child_indices`] from the view `opponent` of the side not to move alone.
    #[inline(always)]
    pub fn child_of(opponent: &Lanes, x: u8, flipped: u64) -> Lanes {
        let mut out = *opponent;
        // The new disc goes empty (2) -> other (1), the flipped discs own (0) -> other (1).
        out.sub(&POWERS[usize::from(x)]);
        let mut fl = flipped;
        while fl != 0 {
            out.add(&POWERS[fl.trailing_zeros() as usize]);
            fl &= fl - 1;
        }
        out
    }

    /// The mover's view `own` updated for its move `x` flipping `flipped`: after the move, the
    /// view of the side not to move, as [`Features::child_of`] needs for the grandchildren.
    #[inline(always)]
    pub fn mover_after(own: &Lanes, x: u8, flipped: u64) -> Lanes {
        let mut out = *own;
        // The new disc goes empty (2) -> own (0), the flipped discs other (1) -> own (0).
        let p = &POWERS[usize::from(x)];
        out.sub(p);
        out.sub(p);
        let mut fl = flipped;
        while fl != 0 {
            out.sub(&POWERS[fl.trailing_zeros() as usize]);
            fl &= fl - 1;
        }
        out
    }

    /// Update after a pass (also its own undo).
    #[inline(always)]
    pub fn pass(&mut self) {
        self.side ^= 1;
    }

    /// (mover view, opponent view).
    #[inline(always)]
    fn split(&mut self) -> (&mut Lanes, &mut Lanes) {
        let [a, b] = &mut self.view;
        if self.side == 0 { (a, b) } else { (b, a) }
    }
}

/// Feature indices (within their family) of a position with `own` discs as digit 0.
pub fn encode(own: u64, other: u64) -> Lanes {
    let mut out = Lanes::ZERO;
    for (k, sq) in FEATURE_SQUARES.iter().enumerate() {
        let mut idx = 0u16;
        for &s in sq.iter() {
            let bit = 1u64 << s;
            let d = if own & bit != 0 {
                0
            } else if other & bit != 0 {
                1
            } else {
                2
            };
            idx = idx * 3 + d;
        }
        out.0[k] = idx;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn feature_lengths_match_families() {
        for (k, sq) in FEATURE_SQUARES.iter().enumerate() {
            let fam = &FAMILIES[usize::from(FEATURE_FAMILY[k])];
            assert_eq!(sq.len() as u32, fam.len, "feature {k}");
        }
        let total: usize = FAMILIES.iter().map(|f| f.packed).sum();
        assert_eq!(total, N_PACKED);
        let last = FAMILIES[12];
        assert_eq!(last.offset + 1, N_WEIGHTS);
        for w in FAMILIES.windows(2) {
            let (a, b) = (w[0], w[1]);
            let shared = a.offset == b.offset;
            assert!(!shared);
        }
    }

    #[test]
    fn incremental_matches_full_encoding() {
        // Walk a deterministic pseudo-random game and compare at every ply, including passes.
        let mut state = 0x1234_5678_9abc_def0u64;
        for _game in 0..20 {
            let mut b = Board::start();
            let mut f = Features::new(&b);
            let mut history = Vec::new();
            loop {
                let moves = b.moves();
                if moves == 0 {
                    if b.pass().moves() == 0 {
                        break;
                    }
                    f.pass();
                    b = b.pass();
                    history.push(None);
                } else {
                    state = state
                        .wrapping_mul(6364136223846793005)
                        .wrapping_add(1442695040888963407);
                    let n = moves.count_ones();
                    let mut pick = ((state >> 33) % u64::from(n)) as u32;
                    let mut m = moves;
                    while pick > 0 {
                        m &= m - 1;
                        pick -= 1;
                    }
                    let x = m.trailing_zeros() as u8;
                    let flipped = crate::board::flips_portable(b.player, b.opponent, x);
                    let child = f.child_indices(x, flipped);
                    let mover = Features::mover_after(f.indices(), x, flipped);
                    f.play(x, flipped);
                    assert_eq!(&child, f.indices());
                    assert_eq!(&mover, f.opponent_indices());
                    history.push(Some((b, x, flipped)));
                    b = b.play_flips(x, flipped);
                }
                assert_eq!(f.indices(), &encode(b.player, b.opponent));
            }
            // Undo the whole game back to the start.
            while let Some(h) = history.pop() {
                match h {
                    None => {
                        f.pass();
                        b = b.pass();
                    }
                    Some((prev, x, flipped)) => {
                        f.undo(x, flipped);
                        b = prev;
                    }
                }
                assert_eq!(f.indices(), &encode(b.player, b.opponent));
            }
            assert_eq!(f, Features::new(&Board::start()));
        }
    }
}
