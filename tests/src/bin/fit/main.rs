//! `fit CLAIMS.jsonl --provider CONFIG.json [--scores FILE.jsonl] [--out WEIGHTS.json]
//! [--supported-features s|all] [--contradicted-features lexical|all] [--l2 X]`: fits the
//! verifier route's scoring model
//! (`core/src/claim/verifier-weights.json`, format in `verity_core::claim::verifier`) on
//! labelled claims, and prints what it fitted with its cross-validated figures.
//!
//! 1. **Scores.** Each claim is checked as the route checks it (the same job, the same
//!    retrieval, the same questions and requests, through the provider), and stopped once its
//!    first round of questions is answered: the research and summary requests are never sent
//!    (answered here as aborted). Each question's reading ([`verity_core::claim::verifier::read_answer`]) is recorded, and
//!    the features are computed by the route's own [`verity_core::claim::verifier::features`]. The scores are kept in
//!    `--scores` (one JSON line per claim) and read from there when the file exists, so a
//!    refit does not ask the model again.
//! 2. **The model.** A multinomial logistic regression (softmax over three linear scores,
//!    `insufficient` the reference class, L2 penalty `--l2`, full-batch gradient descent on
//!    standardised features, written back in the raw features' units). With
//!    `--supported-features all` (the default) the `supported` class uses every feature: the
//!    lexical ones raise `supported` and `contradicted` alike (a passage about the claim), so
//!    between the two the calibrated `logit(S) - logit(S0)` decides, and against
//!    `insufficient` the overlap helps (with calibration this gained 4 points of binary
//!    balanced accuracy for Qwen-0.5B and none was lost for the 1.5B, cross-validated on dev;
//!    docs/BENCHMARKS.md). `--supported-features s` keeps `supported` on the two calibrated
//!    scores alone. With `--contradicted-features lexical` (the default) the `contradicted`
//!    class uses only the lexical features: a claim is contradicted by a passage about it that
//!    does not support it (a low `S` already lowers `supported`), never by an unrelated one,
//!    which VitaminC (whose passages are all about their claims) cannot teach. The defaults
//!    are what the repository's weights were fitted with (L2 0.1).
//! 3. **Thresholds.** `supported` and `contradicted` thresholds on a grid (0.20 to 0.80 by
//!    0.05) and the topic passage's overlap `contradicted` needs (0 to 0.5 by 0.1), chosen
//!    for the mean of 3-way accuracy and binary balanced accuracy.
//! 4. **Honest figures.** 5-fold cross-validation of steps 2–3 (fitted on four folds, scored
//!    on the fifth): the figures to quote for dev data. The in-sample figures are printed too,
//!    labelled as such.
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
