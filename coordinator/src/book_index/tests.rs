use super::*;
use bookfarm_book::model::BAD_LINK;
use bookfarm_engine::board::BitIter;
use bookfarm_engine::symmetry::canonical;

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// A random book: random games from the start (with passes), every position linked to the next
/// one, random leaves among the remaining moves, random levels (so all three leaf-bound cases
/// and the parity bias occur).
fn random_book(rng: &mut Rng, games: usize, plies: usize) -> BookIndex {
    let mut idx = BookIndex::new(BookHeader::new(4, 60));
    for _ in 0..games {
        let mut b = Board::start();
        let mut path = vec![canonical(&b).0];
        for _ in 0..plies {
            if b.is_game_over() {
                break;
            }
            b = if b.moves() == 0 {
                b.pass()
            } else {
                let ms: Vec<_> = BitIter(b.moves()).collect();
                b.play(ms[rng.below(ms.len() as u64) as usize]).unwrap()
            };
            path.push(canonical(&b).0);
        }
        for &c in &path {
            if !idx.contains(&c) {
                let level = [0u8, 1, 4, 11, 21, 60][rng.below(6) as usize];
                idx.insert(Entry::new(Position::new(c, level)));
            }
        }
    }
    // Link every position to every child in the book, then give random leaves.
    let boards: Vec<Board> = idx.entries().map(|e| e.pos.board).collect();
    for b in &boards {
        idx.link_children(b);
    }
    for b in &boards {
        random_leaf(rng, &mut idx, b);
    }
    idx
}

fn random_leaf(rng: &mut Rng, idx: &mut BookIndex, b: &Board) {
    let open = b.moves() & !idx.excluded(b).unwrap();
    let leaf = if b.is_game_over() {
        Link::new(to_i8(b.final_score()), Move::None)
    } else if open != 0 && rng.below(5) != 0 {
        let ms: Vec<_> = BitIter(open).collect();
        let s = ms[rng.below(ms.len() as u64) as usize];
        Link::new((rng.below(129) as i32 - 64) as i8, Move::Square(s))
    } else {
        BAD_LINK
    };
    idx.set_leaf(b, leaf);
}

#[test]
fn incremental_equals_full_recompute_on_random_books() {
    for seed in 1..=12u64 {
        let mut rng = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
        let mut idx = random_book(&mut rng, 25, 30);
        idx.full_negamax();
        let boards: Vec<Board> = idx.entries().map(|e| e.pos.board).collect();
        for round in 0..30 {
            let k = 1 + rng.below(3) as usize;
            let mut changed = Vec::new();
            for _ in 0..k {
                let b = boards[rng.below(boards.len() as u64) as usize];
                random_leaf(&mut rng, &mut idx, &b);
                changed.push(b);
            }
            // Occasionally the error margins change too (enhance), which needs a full pass.
            idx.propagate(changed);
            let mut full = idx.clone();
            full.full_negamax();
            for e in full.entries() {
                assert_eq!(
                    idx.get(&e.pos.board).map(|x| x.pos),
                    Some(e.pos),
                    "seed {seed} round {round}"
                );
            }
        }
    }
}

#[test]
fn full_negamax_matches_the_book_crate() {
    for seed in 1..=6u64 {
        let mut rng = Rng(seed * 7919 + 1);
        let mut idx = random_book(&mut rng, 30, 24);
        idx.full_negamax();
        let positions: Vec<Position> = idx.positions().collect();
        let mut book = crate::export::to_mem_book(*idx.header(), &positions);
        bookfarm_book::negamax::negamax(&mut book);
        for p in &positions {
            let q = book.get(&p.board).unwrap();
            assert_eq!(p, &q, "seed {seed}");
        }
    }
}

#[test]
fn add_link_follows_edax() {
    let mut idx = BookIndex::new(BookHeader::new(2, 10));
    let b = Board::start();
    let mut p = Position::new(b, 2);
    let f5 = Move::parse("f5").unwrap();
    p.leaf = Link::new(-3, f5);
    idx.insert(Entry::new(p));
    assert!(idx.add_link(&b, Link::new(-3, f5)));
    let e = idx.get(&b).unwrap();
    assert_eq!(e.pos.leaf, BAD_LINK, "the leaf became a link");
    assert_eq!(e.version, 1);
    assert_eq!(e.excluded(), 1 << Move::parse("f5").unwrap().code());
    assert!(
        !idx.add_link(&b, Link::new(5, f5)),
        "same move: score overwritten"
    );
    assert_eq!(idx.get(&b).unwrap().pos.links, vec![Link::new(5, f5)]);
    // The child is not in the book yet: the link dangles until it is inserted.
    let c = child_board(&b, f5);
    assert!(idx.parents(&c).is_empty());
    idx.insert(Entry::new(Position::new(c, 2)));
    assert_eq!(idx.parents(&c), vec![b]);
    // Edax's position_link links every move to a book child: d3, c4 and e6 reach the same
    // canonical child as f5. The version moves only when a link is added.
    let v = idx.sched(&b).unwrap().version;
    assert_eq!(idx.link_children(&b), 3);
    assert_eq!(idx.sched(&b).unwrap().version, v + 1);
    assert_eq!(idx.parents(&c), vec![b; 4]);
    assert_eq!(idx.link_children(&b), 0, "everything is linked");
    assert_eq!(idx.sched(&b).unwrap().version, v + 1);
}
