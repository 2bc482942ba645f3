//! `fit CLAIMS.jsonl --provider CONFIG.json [--scores FILE.jsonl] [--out WEIGHTS.json]
//! [--base WEIGHTS.json] [--model NAME] [--features NAME,...] [--l2 X]
//! [--thresholds argmax|grid] [--topic-overlap X]`: fits the verifier route's scoring model for
//! one model (a weights file, `core/src/claim/verifier-weights-<model>.json`, format in
//! `verity_core::claim::verifier`) on labelled claims, and prints what it fitted with its
//! cross-validated figures. `cargo xtask fit --model qwen0.5|qwen1.5` runs it on the dev
//! claims with the model's server and its file.
//!
//! 1. **Scores.** Each claim is checked as the route checks it (the same job, the same
//!    retrieval, the same questions and requests, through the provider), and stopped once its
//!    first round of questions is answered: the research and summary requests are never sent
//!    (answered here as aborted). Each question's reading
//!    ([`verity_core::claim::verifier::read_answer`]) is recorded, and the features are
//!    computed by the route's own [`verity_core::claim::verifier::features`]. The scores are
//!    kept in `--scores` (one JSON line per claim) and read from there when the file exists,
//!    so a refit does not ask the model again.
//! 2. **The model.** A multinomial logistic regression (softmax over three linear scores,
//!    `insufficient` the reference class, L2 penalty `--l2`, 0.01 by default, full-batch
//!    gradient descent on standardised features, written back in the raw features' units).
//!    Every class uses the features `--features` names (by default `calibratedMaxS`,
//!    `overlap`, `missingNumbers`, `comparedNumbers`; the others get weight 0). The features
//!    of a claim are the same for every class, so a lexical feature that raises `supported`
//!    and `contradicted` alike leaves the calibrated score to decide between them.
//! 3. **The decision.** The most probable class (`--thresholds argmax`, the default:
//!    thresholds 0), or thresholds for `supported` and `contradicted` on a grid (0.20 to 0.80
//!    by 0.05) chosen for the mean of 3-way accuracy and binary balanced accuracy
//!    (`--thresholds grid`); `contradicted` needs the topic passage to hold `--topic-overlap`
//!    of the claim's content words (0.3 by default). The weights file's score clamp and
//!    citation threshold are kept from `--base` (the file being rewritten).
//! 4. **Honest figures.** 5-fold cross-validation of steps 2–3 (fitted on four folds, scored
//!    on the fifth): the figures to quote for dev data. The in-sample figures are printed too,
//!    labelled as such. The core's own `decide` must agree with the fit on every claim, or
//!    nothing is written.
//!
//! Fit on `claims-dev.jsonl` only; never on held-out data.

#[cfg(not(target_arch = "wasm32"))]
mod native;

#[cfg(not(target_arch = "wasm32"))]
fn main() -> std::process::ExitCode {
    native::main()
}

/// The crate is also built for wasm32 (its suite runs there, and cargo builds a package's
/// binaries with its integration tests); this command is not.
#[cfg(target_arch = "wasm32")]
fn main() {
    unreachable!("fit runs natively")
}
