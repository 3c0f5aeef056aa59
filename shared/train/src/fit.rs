//! Least-squares fit of the packed Edax weights, one phase bucket at a time.
//!
//! Model: `pred(pos) = Σ_{k<47} w[bucket][offset_k(pos)]` in discs, where the offsets come from
//! [`Layout::packed_offsets`] (symmetric weight sharing through Edax's packing). Loss per bucket:
//! `(1/N) Σ (pred − label)² + (l2/N) Σ w²`, i.e. `l2` acts as that many pseudo-observations of a
//! zero weight, which shrinks rarely seen patterns. Optimiser: full-batch Adam (deterministic:
//! gradients are reduced in a fixed chunk order), with a cosine learning-rate decay.
//! Buckets are independent, so the fit checkpoints after each finished bucket and can resume.
//! The weights of a bucket are copied to every ply it covers; the result is rounded to Edax's
//! 1/128-disc `i16` units.

use crate::dataset::Sample;
use crate::features::{BLOCK2, Layout, N_PLIES, PACKED_PER_PLY, ply_of};
use crate::weights::from_packed;
use bookfarm_engine::eval::{Eval, EvalHeader};
use indicatif::{ProgressBar, ProgressStyle};
use rayon::prelude::*;
use std::path::Path;

/// Fit parameters.
#[derive(Debug, Clone)]
pub struct FitParams {
    /// Plies per phase bucket (bucket b covers plies `b·width .. (b+1)·width`).
    pub bucket_width: usize,
    /// Extra plies on each side whose samples also train a bucket (smooths neighbouring phases).
    pub overlap: usize,
    /// Weight of an overlap sample `d` plies outside its bucket: `overlap_decay^d` (1 = the
    /// neighbours count as much as the bucket's own plies). Below 1 a bucket still pools sparse
    /// patterns from its neighbours but fits its own phase first.
    pub overlap_decay: f32,
    /// Huber threshold in discs (0 = plain least squares): residuals beyond it pull with a
    /// constant force, so a few badly labelled or untypical positions move the fit less.
    pub huber: f32,
    /// Adam iterations (full-batch epochs) per bucket.
    pub epochs: usize,
    /// Initial learning rate, in discs.
    pub lr: f32,
    /// L2 strength as a number of zero pseudo-observations per weight.
    pub l2: f32,
    /// Header version written in the output.
    pub version: EvalHeader,
    /// Fit only these buckets (empty = all): parameter experiments, or a fine-tune of selected
    /// phases (the other buckets keep the prior when there is one).
    pub only_buckets: Vec<usize>,
    /// Fit the `bookfarm-eval2` model (Edax's patterns plus the engine's extra terms) instead
    /// of Edax's patterns alone; the checkpoint must have the matching block size.
    pub extra: bool,
}

impl Default for FitParams {
    fn default() -> FitParams {
        FitParams {
            bucket_width: 2,
            overlap: 1,
            overlap_decay: 1.0,
            huber: 0.0,
            epochs: 300,
            lr: 0.5,
            l2: 2.0,
            version: EvalHeader {
                version: 1,
                release: 0,
                build: 0,
                date: 0.0,
            },
            only_buckets: Vec::new(),
            extra: false,
        }
    }
}

/// Fitted weights in discs (f32), one block per bucket, with the set of finished buckets.
#[derive(Debug, Clone, PartialEq)]
pub struct Checkpoint {
    /// Bucket width the checkpoint was made with.
    pub bucket_width: usize,
    /// Weights per bucket: [`PACKED_PER_PLY`] (Edax) or [`BLOCK2`] (`bookfarm-eval2`).
    pub block: usize,
    /// `buckets[b]` is `Some(weights)` once bucket b is fitted.
    pub buckets: Vec<Option<Vec<f32>>>,
}

/// Errors of the fitter.
#[derive(Debug, thiserror::Error)]
pub enum FitError {
    /// Checkpoint IO.
    #[error("checkpoint io error: {0}")]
    Io(#[from] std::io::Error),
    /// Checkpoint content does not match the parameters.
    #[error("bad checkpoint: {0}")]
    Checkpoint(String),
}

const CKPT_MAGIC: &[u8; 8] = b"BFCKPT01";
/// Checkpoints of `bookfarm-eval2` fits (the block size follows the bucket count).
const CKPT2_MAGIC: &[u8; 8] = b"BFCKPT02";

impl Checkpoint {
    /// An empty checkpoint for `bucket_width` (Edax's pattern block).
    pub fn new(bucket_width: usize) -> Checkpoint {
        Checkpoint::with_block(bucket_width, PACKED_PER_PLY)
    }

    /// An empty checkpoint for `bucket_width` and `block` weights per bucket.
    pub fn with_block(bucket_width: usize, block: usize) -> Checkpoint {
        Checkpoint {
            bucket_width,
            block,
            buckets: vec![None; n_buckets(bucket_width)],
        }
    }

    /// Serialise: magic, width u32, bucket count u32 (`BFCKPT02`: then the block size u32),
    /// then per bucket a flag byte and f32 weights.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::new();
        let edax = self.block == PACKED_PER_PLY;
        out.extend_from_slice(if edax { CKPT_MAGIC } else { CKPT2_MAGIC });
        out.extend_from_slice(&(self.bucket_width as u32).to_le_bytes());
        out.extend_from_slice(&(self.buckets.len() as u32).to_le_bytes());
        if !edax {
            out.extend_from_slice(&(self.block as u32).to_le_bytes());
        }
        for b in &self.buckets {
            match b {
                Some(w) => {
                    out.push(1);
                    for x in w {
                        out.extend_from_slice(&x.to_le_bytes());
                    }
                }
                None => out.push(0),
            }
        }
        out
    }

    /// Parse [`Checkpoint::to_bytes`] output.
    pub fn from_bytes(bytes: &[u8]) -> Result<Checkpoint, FitError> {
        let bad = |m: &str| FitError::Checkpoint(m.to_string());
        if bytes.len() < 16 || (&bytes[0..8] != CKPT_MAGIC && &bytes[0..8] != CKPT2_MAGIC) {
            return Err(bad("bad magic"));
        }
        let width = u32::from_le_bytes(bytes[8..12].try_into().expect("4 bytes")) as usize;
        let n = u32::from_le_bytes(bytes[12..16].try_into().expect("4 bytes")) as usize;
        if width == 0 || width > N_PLIES || n != n_buckets(width) {
            return Err(bad("inconsistent bucket layout"));
        }
        let mut pos = 16;
        let block = if &bytes[0..8] == CKPT2_MAGIC {
            let b = bytes.get(16..20).ok_or_else(|| bad("truncated"))?;
            pos = 20;
            u32::from_le_bytes(b.try_into().expect("4 bytes")) as usize
        } else {
            PACKED_PER_PLY
        };
        if block != PACKED_PER_PLY && block != BLOCK2 {
            return Err(bad("unknown block size"));
        }
        let mut buckets = Vec::with_capacity(n);
        for _ in 0..n {
            let flag = *bytes.get(pos).ok_or_else(|| bad("truncated"))?;
            pos += 1;
            if flag == 1 {
                let end = pos + block * 4;
                let chunk = bytes.get(pos..end).ok_or_else(|| bad("truncated"))?;
                buckets.push(Some(
                    chunk
                        .chunks_exact(4)
                        .map(|c| f32::from_le_bytes(c.try_into().expect("4 bytes")))
                        .collect(),
                ));
                pos = end;
            } else {
                buckets.push(None);
            }
        }
        Ok(Checkpoint {
            bucket_width: width,
            block,
            buckets,
        })
    }

    /// The checkpoint of an existing evaluation (e.g. a shipped release, as a fine-tune prior): each
    /// bucket takes the weights of its first ply, in discs. Exact for evaluations fitted with the
    /// same bucket width (their plies repeat within a bucket); for any other file the bucket's
    /// later plies are approximated by its first one.
    ///
    /// With `block` = [`BLOCK2`] the extra terms follow the patterns: the evaluation's own when
    /// it is a `bookfarm-eval2`, zeros otherwise.
    pub fn from_eval(eval: &Eval, bucket_width: usize, block: usize) -> Checkpoint {
        let map = &Layout::get().packed_of_unpacked;
        let buckets = (0..n_buckets(bucket_width))
            .map(|b| {
                let ply = b * bucket_width;
                let mut w = vec![0f32; block];
                for (i, &x) in eval.ply_weights(ply).iter().enumerate() {
                    w[map[i] as usize] = f32::from(x) / 128.0;
                }
                if block == BLOCK2
                    && let Some(x) = eval.extra_weights(ply)
                {
                    for (dst, &v) in w[PACKED_PER_PLY..].iter_mut().zip(x) {
                        *dst = f32::from(v) / 128.0;
                    }
                }
                Some(w)
            })
            .collect();
        Checkpoint {
            bucket_width,
            block,
            buckets,
        }
    }

    /// Write atomically (temp file + rename).
    pub fn save(&self, path: &Path) -> Result<(), FitError> {
        let tmp = path.with_extension("tmp");
        std::fs::write(&tmp, self.to_bytes())?;
        std::fs::rename(&tmp, path)?;
        Ok(())
    }

    /// Expand to packed Edax weights (ply-major, `ply * PACKED_PER_PLY + offset`): each ply takes
    /// its bucket's weights, ×128, rounded, clamped to i16. Unfitted buckets give zero weights.
    pub fn to_packed(&self) -> Vec<i16> {
        let mut out = vec![0i16; N_PLIES * PACKED_PER_PLY];
        for ply in 0..N_PLIES {
            if let Some(w) = &self.buckets[ply / self.bucket_width] {
                let block = &mut out[ply * PACKED_PER_PLY..(ply + 1) * PACKED_PER_PLY];
                for (dst, &x) in block.iter_mut().zip(w) {
                    *dst = (x * 128.0).round().clamp(-32767.0, 32767.0) as i16;
                }
            }
        }
        out
    }

    /// The engine evaluation of [`Checkpoint::to_packed`] with header `version`; with the
    /// `bookfarm-eval2` block, the extra terms too (×128, rounded like the patterns).
    pub fn to_eval(&self, version: EvalHeader) -> Eval {
        let e = from_packed(version, &self.to_packed())
            .expect("to_packed always yields N_PLIES * PACKED_PER_PLY weights");
        if self.block != BLOCK2 {
            return e;
        }
        e.with_extra(|ply, i| match &self.buckets[ply / self.bucket_width] {
            Some(w) => (w[PACKED_PER_PLY + i] * 128.0)
                .round()
                .clamp(-32767.0, 32767.0) as i16,
            None => 0,
        })
    }
}

/// Number of buckets for a width.
pub fn n_buckets(width: usize) -> usize {
    N_PLIES.div_ceil(width)
}

/// Per-bucket fit report.
#[derive(Debug, Clone)]
pub struct BucketReport {
    /// Bucket index.
    pub bucket: usize,
    /// Samples used.
    pub samples: usize,
    /// Training RMSE (discs) after the fit.
    pub rmse: f32,
}

/// Fit the buckets still missing in `ckpt`, saving it after each bucket when `ckpt_path` is given.
///
/// With a `prior` (weights of a previous fit with the same bucket width), each bucket starts from
/// the prior's weights and the L2 term pulls towards them instead of towards zero: a fine-tune of
/// the previous version on new (e.g. exact) labels. Buckets without samples keep the prior.
pub fn fit(
    samples: &[Sample],
    params: &FitParams,
    ckpt: &mut Checkpoint,
    ckpt_path: Option<&Path>,
    prior: Option<&Checkpoint>,
    progress: bool,
) -> Result<Vec<BucketReport>, FitError> {
    if let Some(p) = prior
        && p.bucket_width != params.bucket_width
    {
        return Err(FitError::Checkpoint(format!(
            "prior bucket width {} differs from requested {}",
            p.bucket_width, params.bucket_width
        )));
    }
    if ckpt.bucket_width != params.bucket_width {
        return Err(FitError::Checkpoint(format!(
            "checkpoint bucket width {} differs from requested {}",
            ckpt.bucket_width, params.bucket_width
        )));
    }
    let block = if params.extra { BLOCK2 } else { PACKED_PER_PLY };
    if ckpt.block != block || prior.is_some_and(|p| p.block != block) {
        return Err(FitError::Checkpoint(format!(
            "checkpoint or prior block size differs from the model's {block}"
        )));
    }
    let layout = Layout::get();
    let nb = n_buckets(params.bucket_width);
    let todo: Vec<usize> = (0..nb)
        .filter(|&b| ckpt.buckets[b].is_none())
        .filter(|b| params.only_buckets.is_empty() || params.only_buckets.contains(b))
        .collect();
    let pb = if progress {
        ProgressBar::new((todo.len() * params.epochs) as u64)
    } else {
        ProgressBar::hidden()
    };
    pb.set_style(
        ProgressStyle::with_template("{elapsed_precise} [{bar:40}] {pos}/{len} epochs  {msg}")
            .expect("static template")
            .progress_chars("=> "),
    );
    let mut reports = Vec::new();
    for b in todo {
        let lo = (b * params.bucket_width).saturating_sub(params.overlap);
        let hi = ((b + 1) * params.bucket_width + params.overlap).min(N_PLIES);
        let chosen: Vec<&Sample> = samples
            .iter()
            .filter(|s| {
                let p = ply_of(&s.board);
                p >= lo && p < hi
            })
            .collect();
        let labels: Vec<f32> = chosen.iter().map(|s| s.label).collect();
        let own = b * params.bucket_width..((b + 1) * params.bucket_width).min(N_PLIES);
        let sample_weights: Vec<f32> = if params.overlap_decay == 1.0 {
            Vec::new()
        } else {
            chosen
                .iter()
                .map(|s| overlap_weight(ply_of(&s.board), &own, params.overlap_decay))
                .collect()
        };
        let prior_b = prior.and_then(|p| p.buckets[b].as_deref());
        let on_epoch = |e: usize| {
            pb.inc(1);
            if e.is_multiple_of(25) {
                pb.set_message(format!("bucket {b}/{nb}"));
            }
        };
        let (w, rmse) = if params.extra {
            let offsets: Vec<_> = chosen
                .par_iter()
                .map(|s| layout.offsets2(&s.board))
                .collect();
            fit_bucket(
                &offsets,
                &labels,
                &sample_weights,
                params,
                prior_b,
                on_epoch,
            )
        } else {
            let offsets: Vec<_> = chosen
                .par_iter()
                .map(|s| layout.packed_offsets(&s.board))
                .collect();
            fit_bucket(
                &offsets,
                &labels,
                &sample_weights,
                params,
                prior_b,
                on_epoch,
            )
        };
        reports.push(BucketReport {
            bucket: b,
            samples: labels.len(),
            rmse,
        });
        pb.set_message(format!(
            "bucket {b}: {} samples, train rmse {rmse:.2}",
            labels.len()
        ));
        ckpt.buckets[b] = Some(w);
        if let Some(p) = ckpt_path {
            ckpt.save(p)?;
        }
    }
    pb.finish();
    // Buckets left out by `only_buckets` keep the prior (a fine-tune of selected phases only);
    // without a prior they stay unfitted (zero weights).
    if let Some(p) = prior {
        for (b, w) in ckpt.buckets.iter_mut().enumerate() {
            if w.is_none() {
                w.clone_from(&p.buckets[b]);
            }
        }
    }
    Ok(reports)
}

/// Loss weight of a sample at `ply` for the bucket of plies `own`: `decay^d`, `d` = plies
/// outside `own` (1 inside it).
pub fn overlap_weight(ply: usize, own: &std::ops::Range<usize>, decay: f32) -> f32 {
    let d = own.start.saturating_sub(ply) + (ply + 1).saturating_sub(own.end);
    decay.powi(d as i32)
}

/// The training samples of `tagged` (sample, index of its cache) with each sample repeated
/// `weight[cache]` times, in order: least squares on the result is weighted least squares with
/// those weights (deterministic, and the fitter needs no weights of its own).
pub fn repeat_weighted(tagged: &[(Sample, usize)], weight: &[u32]) -> Vec<Sample> {
    tagged
        .iter()
        .flat_map(|&(s, k)| std::iter::repeat_n(s, weight.get(k).copied().unwrap_or(1) as usize))
        .collect()
}

/// Add `offsets` (empties count, discs) to the search labels of the samples with that many
/// empties: a calibration of the labelling search against exact solves (`labels quality`
/// measures its mean signed error per empties count). Exact and game labels are left as they
/// are.
pub fn offset_search_labels(samples: &mut [(Sample, usize)], offsets: &[(u32, f32)]) {
    if offsets.is_empty() {
        return;
    }
    for (s, _) in samples.iter_mut() {
        if s.kind != crate::dataset::LabelKind::Search {
            continue;
        }
        let e = s.board.empties();
        s.label += offsets
            .iter()
            .filter(|(oe, _)| *oe == e)
            .map(|(_, d)| d)
            .sum::<f32>();
    }
}

/// Whether a (canonical) position belongs to the validation split of `per_mille` / 1000 of the
/// training samples: a fixed hash of the board, so the split is the same across runs, caches
/// and label sources (a position relabelled by a later cache stays on the same side).
pub fn in_validation(board: &bookfarm_engine::Board, per_mille: u32) -> bool {
    // SplitMix64 finaliser of both bitboards: well mixed, platform independent.
    let mut x = board.player ^ board.opponent.rotate_left(29) ^ 0x9e37_79b9_7f4a_7c15;
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^= x >> 31;
    x % 1000 < u64::from(per_mille)
}

/// Chunk size of the deterministic parallel reduction.
const CHUNK: usize = 16_384;

/// Full-batch Adam on one bucket, from zero (or from `prior`, which the L2 term then pulls
/// towards). `sample_weights` (empty = all 1) weigh each sample's term of the loss, which is
/// normalised by their sum. Returns the weights (discs) and the final (weighted) training RMSE.
pub fn fit_bucket<const N: usize>(
    offsets: &[[u32; N]],
    labels: &[f32],
    sample_weights: &[f32],
    params: &FitParams,
    prior: Option<&[f32]>,
    mut on_epoch: impl FnMut(usize),
) -> (Vec<f32>, f32) {
    let n = labels.len();
    // The block: Edax's packed weights, followed by the extra terms' tables for the eval2 model.
    let block = if params.extra { BLOCK2 } else { PACKED_PER_PLY };
    let center: Vec<f32> = prior.map_or_else(|| vec![0f32; block], <[f32]>::to_vec);
    let mut w = center.clone();
    if n == 0 {
        return (w, 0.0);
    }
    if prior.is_none() {
        // Start the constant at the label mean so early steps fit patterns, not the offset.
        let mean = labels.iter().map(|&x| f64::from(x)).sum::<f64>() / n as f64;
        w[PACKED_PER_PLY - 1] = mean as f32;
    }
    let mut m = vec![0f32; block];
    let mut v = vec![0f32; block];
    let (beta1, beta2, eps) = (0.9f32, 0.999f32, 1e-8f32);
    let ones;
    let sw: &[f32] = if sample_weights.is_empty() {
        ones = vec![1f32; n];
        &ones
    } else {
        assert_eq!(sample_weights.len(), n, "one weight per sample");
        sample_weights
    };
    let total_weight: f64 = sw.iter().map(|&x| f64::from(x)).sum();
    let inv_n = (1.0 / total_weight) as f32;
    let l2 = params.l2 * inv_n;
    let huber = if params.huber > 0.0 {
        params.huber
    } else {
        f32::INFINITY
    };
    let mut rmse = 0.0;
    for epoch in 0..params.epochs {
        // Gradient of the weighted mean squared (or Huber) error, reduced in fixed chunk order
        // for determinism.
        let partial: Vec<(Vec<f32>, f64)> = offsets
            .par_chunks(CHUNK)
            .zip(labels.par_chunks(CHUNK))
            .zip(sw.par_chunks(CHUNK))
            .map(|((offs, labs), ws)| {
                let mut g = vec![0f32; block];
                let mut sq = 0f64;
                for ((o, &y), &sw) in offs.iter().zip(labs).zip(ws) {
                    let pred: f32 = o.iter().map(|&i| w[i as usize]).sum();
                    let r = pred - y;
                    sq += f64::from(sw * r * r);
                    let gr = sw * r.clamp(-huber, huber);
                    for &i in o {
                        g[i as usize] += gr;
                    }
                }
                (g, sq)
            })
            .collect();
        let mut grad = vec![0f32; block];
        let mut sq = 0f64;
        for (g, s) in &partial {
            for (a, b) in grad.iter_mut().zip(g) {
                *a += b;
            }
            sq += s;
        }
        rmse = (sq / total_weight).sqrt() as f32;
        let t = (epoch + 1) as i32;
        let lr = params.lr
            * 0.5
            * (1.0 + (std::f32::consts::PI * epoch as f32 / params.epochs as f32).cos());
        let bc1 = 1.0 - beta1.powi(t);
        let bc2 = 1.0 - beta2.powi(t);
        for i in 0..block {
            let gi = 2.0 * (grad[i] * inv_n + l2 * (w[i] - center[i]));
            if gi == 0.0 && m[i] == 0.0 {
                continue;
            }
            m[i] = beta1 * m[i] + (1.0 - beta1) * gi;
            v[i] = beta2 * v[i] + (1.0 - beta2) * gi * gi;
            w[i] -= lr * (m[i] / bc1) / ((v[i] / bc2).sqrt() + eps);
        }
        on_epoch(epoch);
    }
    (w, rmse)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::dataset::LabelKind;
    use crate::features::N_TERMS;
    use bookfarm_engine::Board;

    #[test]
    fn label_offsets_move_only_search_labels_at_their_empties() {
        let boards = positions(120, 7);
        let mut tagged: Vec<(Sample, usize)> = boards
            .iter()
            .enumerate()
            .map(|(i, &board)| {
                // Alternate kinds by walk (30 plies each), so both kinds share empties counts.
                let kind = if i / 30 % 2 == 0 {
                    LabelKind::Search
                } else {
                    LabelKind::Exact
                };
                let s = Sample {
                    board,
                    label: 1.0,
                    count: 1,
                    kind,
                };
                (s, 0)
            })
            .collect();
        let e = boards[0].empties();
        offset_search_labels(&mut tagged, &[(e, 2.5)]);
        let mut moved = 0;
        for (s, _) in &tagged {
            let want = if s.kind == LabelKind::Search && s.board.empties() == e {
                moved += 1;
                3.5
            } else {
                1.0
            };
            assert_eq!(
                s.label,
                want,
                "{:?} at {} empties",
                s.kind,
                s.board.empties()
            );
        }
        assert!(moved > 0);
        assert!(
            tagged
                .iter()
                .any(|(s, _)| s.kind == LabelKind::Exact && s.board.empties() == e)
        );
    }

    /// Random legal positions from a seeded walk (also used by other modules' tests).
    pub(crate) fn positions(n: usize, seed: u64) -> Vec<Board> {
        let mut s = seed;
        let mut out = Vec::new();
        while out.len() < n {
            let mut b = Board::start();
            for _ in 0..30 {
                let m = b.moves();
                if m == 0 {
                    break;
                }
                s = s
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                let k = (s >> 33) as usize % m.count_ones() as usize;
                let sq = bookfarm_engine::board::BitIter(m)
                    .nth(k)
                    .expect("k < count");
                b = b.play(sq).expect("legal");
                out.push(b);
            }
        }
        out.truncate(n);
        out
    }

    #[test]
    fn fit_recovers_a_disc_count_target_and_is_deterministic() {
        // Target: the disc difference, which is exactly representable by the line patterns.
        let boards = positions(4000, 7);
        let samples: Vec<Sample> = boards
            .iter()
            .map(|b| Sample {
                board: *b,
                label: b.player.count_ones() as f32 - b.opponent.count_ones() as f32,
                count: 1,
                kind: LabelKind::Exact,
            })
            .collect();
        let params = FitParams {
            bucket_width: 61,
            overlap: 0,
            epochs: 150,
            lr: 0.3,
            l2: 0.01,
            ..FitParams::default()
        };
        let mut ck = Checkpoint::new(61);
        let rep = fit(&samples, &params, &mut ck, None, None, false).expect("fit");
        assert_eq!(rep.len(), 1);
        let base_rmse = {
            let mean = samples.iter().map(|s| s.label).sum::<f32>() / samples.len() as f32;
            (samples
                .iter()
                .map(|s| (s.label - mean).powi(2))
                .sum::<f32>()
                / samples.len() as f32)
                .sqrt()
        };
        assert!(
            rep[0].rmse < 0.25 * base_rmse,
            "rmse {} vs baseline {}",
            rep[0].rmse,
            base_rmse
        );
        let mut ck2 = Checkpoint::new(61);
        fit(&samples, &params, &mut ck2, None, None, false).expect("fit");
        assert_eq!(
            ck, ck2,
            "same data and parameters must give identical weights"
        );
        let w = ck.to_eval(EvalHeader {
            version: 1,
            release: 0,
            build: 0,
            date: 0.0,
        });
        let b = boards[100];
        let want = b.player.count_ones() as i32 - b.opponent.count_ones() as i32;
        assert!(
            (w.eval0(&b) - want).abs() <= 3,
            "eval {} vs {}",
            w.eval0(&b),
            want
        );
        // The engine evaluates the written weights exactly as the fitted model predicts (rounded
        // to 1/128 disc, then Edax's rounding).
        let packed = ck.to_packed();
        let layout = Layout::get();
        for b in &boards {
            let raw: i32 = layout
                .packed_offsets(b)
                .iter()
                .map(|&o| i32::from(packed[ply_of(b) * PACKED_PER_PLY + o as usize]))
                .sum();
            assert_eq!(w.raw_board(b), raw, "{b}");
        }
    }

    #[test]
    fn weighted_caches_repeat_their_samples_and_pull_the_fit() {
        let b = positions(2, 9);
        let tag = |board: Board, label: f32, cache: usize| {
            (
                Sample {
                    board,
                    label,
                    count: 1,
                    kind: LabelKind::Exact,
                },
                cache,
            )
        };
        let tagged = [tag(b[0], 4.0, 0), tag(b[1], -2.0, 1)];
        let out = repeat_weighted(&tagged, &[1, 3]);
        let labels: Vec<f32> = out.iter().map(|s| s.label).collect();
        assert_eq!(labels, [4.0, -2.0, -2.0, -2.0]);
        assert_eq!(
            repeat_weighted(&tagged, &[1]).len(),
            2,
            "unknown caches weigh 1"
        );
        // One constant fitted to labels 0 (weight 1) and 8 (weight 3) lands near their
        // weighted mean 6, not the plain mean 4: the same board twice isolates the offset.
        let same = [tag(b[0], 0.0, 0), tag(b[0], 8.0, 1)];
        let s = repeat_weighted(&same, &[1, 3]);
        let layout = Layout::get();
        let offsets: Vec<[u32; N_TERMS]> =
            s.iter().map(|x| layout.packed_offsets(&x.board)).collect();
        let labels: Vec<f32> = s.iter().map(|x| x.label).collect();
        let params = FitParams {
            epochs: 400,
            lr: 0.05,
            l2: 0.0,
            ..FitParams::default()
        };
        let (w, _) = fit_bucket(&offsets, &labels, &[], &params, None, |_| {});
        let pred: f32 = offsets[0].iter().map(|&i| w[i as usize]).sum();
        assert!((pred - 6.0).abs() < 0.1, "weighted mean 6, got {pred}");
    }

    #[test]
    fn sample_weights_and_huber_shape_the_fit() {
        // One board, so only the sum of its 47 weights (the prediction) matters.
        let b = positions(1, 5)[0];
        let offsets = vec![Layout::get().packed_offsets(&b); 4];
        let params = FitParams {
            epochs: 600,
            lr: 0.05,
            l2: 0.0,
            ..FitParams::default()
        };
        let pred = |w: &[f32]| -> f32 { offsets[0].iter().map(|&i| w[i as usize]).sum() };
        // Weighted least squares: labels 0 and 8 weighing 1 and 3 -> 6.
        let (w, _) = fit_bucket(
            &offsets[..2],
            &[0.0, 8.0],
            &[1.0, 3.0],
            &params,
            None,
            |_| {},
        );
        assert!(
            (pred(&w) - 6.0).abs() < 0.1,
            "weighted mean 6, got {}",
            pred(&w)
        );
        // Least squares is pulled to the mean 25 of 0, 0, 0, 100; Huber with a 1-disc threshold
        // stays near the median: 3·p = 1 at the optimum, p = 1/3.
        let labels = [0.0, 0.0, 0.0, 100.0];
        let (w, _) = fit_bucket(&offsets, &labels, &[], &params, None, |_| {});
        assert!((pred(&w) - 25.0).abs() < 0.5, "mean 25, got {}", pred(&w));
        let huber = FitParams {
            huber: 1.0,
            ..params
        };
        let (w, _) = fit_bucket(&offsets, &labels, &[], &huber, None, |_| {});
        assert!(
            (pred(&w) - 1.0 / 3.0).abs() < 0.1,
            "Huber 1/3, got {}",
            pred(&w)
        );
        // Overlap weights: 1 inside the bucket, decay^d outside.
        let own = 38..40;
        let ws: Vec<f32> = (35..43).map(|p| overlap_weight(p, &own, 0.5)).collect();
        assert_eq!(ws, [0.125, 0.25, 0.5, 1.0, 1.0, 0.5, 0.25, 0.125]);
        assert_eq!(overlap_weight(30, &own, 1.0), 1.0);
    }

    #[test]
    fn the_validation_split_is_stable_and_has_the_requested_size() {
        let boards = positions(20_000, 11);
        let picked: Vec<bool> = boards.iter().map(|b| in_validation(b, 50)).collect();
        let n = picked.iter().filter(|&&p| p).count();
        // 5 % of 20,000 = 1,000; a binomial standard deviation is ≈ 31.
        assert!((850..1150).contains(&n), "{n} of 20000 in a 5 % split");
        assert_eq!(
            picked,
            boards
                .iter()
                .map(|b| in_validation(b, 50))
                .collect::<Vec<_>>()
        );
        assert!(boards.iter().all(|b| !in_validation(b, 0)));
        assert!(boards.iter().all(|b| in_validation(b, 1000)));
    }

    #[test]
    fn fine_tune_starts_from_the_prior_and_keeps_it_without_samples() {
        let mut prior = Checkpoint::new(61);
        prior.buckets[0] = Some(vec![0.25; PACKED_PER_PLY]);
        let params = FitParams {
            bucket_width: 61,
            overlap: 0,
            epochs: 3,
            ..FitParams::default()
        };
        let mut ck = Checkpoint::new(61);
        fit(&[], &params, &mut ck, None, Some(&prior), false).expect("fit");
        assert_eq!(ck, prior);
        // Buckets outside --only-buckets keep the prior too, fitted ones move.
        let mut prior2 = Checkpoint::new(2);
        for w in &mut prior2.buckets {
            *w = Some(vec![0.25; PACKED_PER_PLY]);
        }
        let boards = positions(200, 3);
        let samples: Vec<Sample> = boards
            .iter()
            .filter(|b| ply_of(b) / 2 == 10)
            .map(|b| Sample {
                board: *b,
                label: 30.0,
                count: 1,
                kind: LabelKind::Exact,
            })
            .collect();
        assert!(!samples.is_empty());
        let only = FitParams {
            bucket_width: 2,
            overlap: 0,
            epochs: 3,
            only_buckets: vec![10],
            ..FitParams::default()
        };
        let mut ck2 = Checkpoint::new(2);
        fit(&samples, &only, &mut ck2, None, Some(&prior2), false).expect("fit");
        for (b, w) in ck2.buckets.iter().enumerate() {
            if b == 10 {
                assert_ne!(w, &prior2.buckets[b], "bucket 10 was fitted");
            } else {
                assert_eq!(w, &prior2.buckets[b], "bucket {b} keeps the prior");
            }
        }
        let mut wrong = Checkpoint::new(61);
        let bad = FitParams {
            bucket_width: 20,
            ..params
        };
        assert!(fit(&[], &bad, &mut wrong, None, Some(&prior), false).is_err());
    }

    #[test]
    fn checkpoint_of_an_eval_rebuilds_the_same_eval() {
        let mut ck = Checkpoint::new(2);
        for (b, w) in ck.buckets.iter_mut().enumerate() {
            *w = Some(
                (0..PACKED_PER_PLY)
                    .map(|i| ((i * 7 + b * 13) % 301) as f32 / 128.0 - 1.0)
                    .collect(),
            );
        }
        let h = FitParams::default().version;
        let eval = ck.to_eval(h);
        let back = Checkpoint::from_eval(&eval, 2, PACKED_PER_PLY);
        assert_eq!(back.to_packed(), ck.to_packed());
        assert_eq!(back.to_eval(h).to_bytes(), eval.to_bytes());
    }

    #[test]
    fn checkpoint_roundtrip_and_resume_skips_done_buckets() {
        let mut ck = Checkpoint::new(20);
        ck.buckets[1] = Some(vec![0.5; PACKED_PER_PLY]);
        let back = Checkpoint::from_bytes(&ck.to_bytes()).expect("roundtrip");
        assert_eq!(back, ck);
        assert!(Checkpoint::from_bytes(&ck.to_bytes()[..100]).is_err());
        // Resuming with no samples fills the missing buckets only.
        let params = FitParams {
            bucket_width: 20,
            epochs: 2,
            ..FitParams::default()
        };
        let rep = fit(&[], &params, &mut ck, None, None, false).expect("fit");
        assert_eq!(rep.len(), n_buckets(20) - 1);
        assert_eq!(ck.buckets[1].as_ref().expect("kept")[0], 0.5);
    }
}
