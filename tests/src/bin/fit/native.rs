//! The fit itself (native only: it talks to a model over HTTP).

use std::collections::BTreeMap;
use std::io::Write as _;
use std::process::ExitCode;
use std::sync::Arc;

use serde_json::{Value, json};
use verity_core::claim::verifier::{
    AskedQuestion, AssessMode, Classes, FEATURES, Linear, Reading, Rule, ScoredPassage, Thresholds,
    VerifierOptions, VerifierWeights, best_chunks, decide, decide_by, features, judged_on_chunks,
    plan, prior_score, read_answer,
};
use verity_core::corpus::Corpus;
use verity_core::indexed::IndexedCorpus;
use verity_core::{AssistantMessage, Job, ModelRequest, NoTools, Transport, drive};
use verity_restate::summary::{LABELS, Row};
use verity_tests::cli::{block_on, provider_name, read_provider, transport};

const USAGE: &str = "usage: fit CLAIMS.jsonl --provider CONFIG.json [--scores FILE.jsonl] \
                     [--out WEIGHTS.json] [--base WEIGHTS.json] [--model NAME] [--features NAME,...] [--l2 X] \
                     [--thresholds argmax|grid] [--topic-overlap X] [--chunked-answers]";

/// The features fitted when `--features` does not say: the calibrated score of the best
/// passage and the two lexical features of the topic passage (the others added nothing
/// cross-validated on dev; docs/BENCHMARKS.md).
const DEFAULT_FEATURES: &str = "calibratedMaxS,overlap,missingNumbers";

struct Options {
    claims: String,
    provider: Option<String>,
    scores: Option<String>,
    out: Option<String>,
    /// The weights file whose clamp and citation threshold are kept (the one `--out`
    /// rewrites, when it is a valid one).
    base: Option<String>,
    /// The model whose scores these are (named in the weights' note).
    model: String,
    /// Which of [`FEATURES`] the classes use (the others get weight 0).
    features: [bool; 5],
    l2: f64,
    /// Whether the `supported` and `contradicted` thresholds are chosen on a grid (else 0:
    /// the most probable class).
    grid: bool,
    /// The topic passage's overlap `contradicted` needs.
    topic_overlap: f64,
    /// Fit only `answerSupportedInChunk`, with the base weights as they are
    /// ([`chunked_answers`]).
    chunked_answers: bool,
}

fn feature_mask(list: &str) -> Result<[bool; 5], String> {
    let mut mask = [false; 5];
    for name in list.split(',').map(str::trim) {
        let j = FEATURES
            .iter()
            .position(|f| *f == name)
            .ok_or_else(|| format!("--features: {name} is none of {FEATURES:?}"))?;
        mask[j] = true;
    }
    Ok(mask)
}

fn parse_args() -> Result<Options, String> {
    let mut options = Options {
        claims: String::new(),
        provider: None,
        scores: None,
        out: None,
        base: None,
        model: "an unnamed model".to_owned(),
        features: feature_mask(DEFAULT_FEATURES)?,
        l2: 0.01,
        grid: false,
        topic_overlap: 0.3,
        chunked_answers: false,
    };
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut value = || args.next().ok_or_else(|| format!("{arg} needs a value; {USAGE}"));
        match arg.as_str() {
            "--provider" => options.provider = Some(value()?),
            "--scores" => options.scores = Some(value()?),
            "--chunked-answers" => options.chunked_answers = true,
            "--out" => options.out = Some(value()?),
            "--base" => options.base = Some(value()?),
            "--model" => options.model = value()?,
            "--features" => options.features = feature_mask(&value()?)?,
            "--thresholds" => {
                options.grid = match value()?.as_str() {
                    "argmax" => false,
                    "grid" => true,
                    other => return Err(format!("--thresholds argmax|grid, not {other}")),
                }
            }
            "--topic-overlap" => {
                options.topic_overlap = value()?
                    .parse()
                    .ok()
                    .filter(|x: &f64| (0.0..=1.0).contains(x))
                    .ok_or("--topic-overlap needs a number from 0 to 1")?;
            }
            "--l2" => {
                options.l2 = value()?
                    .parse()
                    .ok()
                    .filter(|x: &f64| x.is_finite() && *x >= 0.0)
                    .ok_or("--l2 needs a number ≥ 0")?;
            }
            other if other.starts_with('-') => {
                return Err(format!("unknown flag {other}; {USAGE}"));
            }
            other => options.claims = other.to_owned(),
        }
    }
    if options.claims.is_empty() {
        return Err(USAGE.to_owned());
    }
    Ok(options)
}

pub fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("fit: {message}");
            ExitCode::FAILURE
        }
    }
}

/// One claim's scores: its label, and each asked passage's text and `S` (in the order the
/// route asked them).
#[derive(serde::Serialize, serde::Deserialize)]
struct Scored {
    id: String,
    claim: String,
    label: String,
    passages: Vec<(String, Option<f64>)>,
    /// `S0`, the calibration question's score as the route reads it ([`prior_score`]).
    prior: Option<f64>,
    /// Whether a passage asked about was a chunk of a longer one (a document); absent in the
    /// scores of earlier fits.
    #[serde(default)]
    chunked: bool,
}

impl Scored {
    /// The asked passages as the core's scoring functions take them.
    fn scored_passages(&self) -> Vec<ScoredPassage<'_>> {
        self.passages.iter().map(|(text, score)| ScoredPassage { text, score: *score }).collect()
    }
}

fn run() -> Result<(), String> {
    let options = parse_args()?;
    let rows = verity_restate::batch::read_claims(std::path::Path::new(&options.claims))?;
    let scored = match options.scores.as_deref().filter(|path| std::path::Path::new(path).exists())
    {
        Some(path) => {
            let text = std::fs::read_to_string(path).map_err(|e| format!("{path}: {e}"))?;
            let scored: Vec<Scored> = text
                .lines()
                .map(serde_json::from_str)
                .collect::<Result<_, _>>()
                .map_err(|e| format!("{path}: {e}"))?;
            eprintln!("fit: {} claims' scores read from {path}", scored.len());
            scored
        }
        None => ask(&options, &rows)?,
    };
    let base = match &options.base {
        Some(path) => VerifierWeights::from_json(
            &std::fs::read_to_string(path).map_err(|e| format!("{path}: {e}"))?,
        )
        .map_err(|e| format!("{path}: {e}"))?,
        None => VerifierWeights::builtin().clone(),
    };
    if options.chunked_answers {
        return chunked_answers(&options, &scored, base);
    }
    let base = &base;
    // Each claim's features, its class (index in LABELS), and whether the model judged any of
    // its passages (a conclusive verdict needs one: `decide` says insufficient otherwise).
    let data: Vec<Datum> = scored
        .iter()
        .map(|row| {
            let passages = row.scored_passages();
            let (features, ..) = features(&row.claim, &passages, row.prior, base);
            let class = LABELS.iter().position(|label| *label == row.label).unwrap_or(2);
            let judged = row.passages.iter().any(|(_, score)| score.is_some_and(f64::is_finite));
            (features.to_array(), class, judged)
        })
        .collect();
    let fitted = fit(&data, &options);
    // Cross-validation: five folds by position (the dev file interleaves labels).
    let mut predicted = vec![0; data.len()];
    // Each claim's P(supported) from the fold that did not see it (0 when no passage was
    // judged: such a claim is never supported).
    let mut held_out_support = vec![0.0; data.len()];
    for fold in 0..5 {
        let train: Vec<Datum> =
            data.iter().enumerate().filter(|(i, _)| i % 5 != fold).map(|(_, d)| *d).collect();
        let model = fit(&train, &options);
        for (i, datum) in data.iter().enumerate().filter(|(i, _)| i % 5 == fold) {
            predicted[i] = model.predict(datum);
            held_out_support[i] = if datum.2 { model.probabilities(&datum.0)[0] } else { 0.0 };
        }
    }
    let truth: Vec<usize> = data.iter().map(|(_, class, _)| *class).collect();
    let in_sample: Vec<usize> = data.iter().map(|datum| fitted.predict(datum)).collect();
    let cv = figures(&truth, &predicted);
    let fit_figures = figures(&truth, &in_sample);
    let answers = answer_threshold(&truth, &predicted, &held_out_support);
    let mut fitted = fitted;
    fitted.answer_supported = answers["answerSupported"].as_f64();
    // The decisions the route makes, through the core's own `decide` (a claim's rule and an
    // answer's sentence's), must be the ones fitted.
    let weights = fitted.weights(base, &options, &cv, &answers, scored.len());
    for ((row, expected), datum) in scored.iter().zip(&in_sample).zip(&data) {
        let passages = row.scored_passages();
        let verdict = decide(&row.claim, &passages, row.prior, &weights).verdict;
        let name = serde_json::to_value(verdict).unwrap_or(Value::Null);
        if name != json!(LABELS[*expected]) {
            return Err(format!(
                "the core decides {name} for {}, the fit {}",
                row.id, LABELS[*expected]
            ));
        }
        let sentence = decide_by(&row.claim, &passages, row.prior, &weights, Rule::AnswerSentence);
        let core = sentence.verdict == verity_core::claim::Verdict::Supported;
        if core != fitted.sentence_supported(datum) {
            return Err(format!(
                "for {} as an answer's sentence, the core says supported: {core}, the fit the \
                 opposite",
                row.id
            ));
        }
    }
    let text = serde_json::to_string_pretty(&weights).map_err(|e| e.to_string())?;
    match &options.out {
        Some(path) => {
            std::fs::write(path, format!("{text}\n")).map_err(|e| format!("{path}: {e}"))?;
            eprintln!("fit: weights written to {path}");
            if base.thresholds.answer_supported_in_chunk.is_some() {
                eprintln!(
                    "fit: answerSupportedInChunk was fitted with the weights replaced: fit it \
                     again with --chunked-answers on claims set inside documents"
                );
            }
        }
        None => println!("{text}"),
    }
    println!(
        "{}",
        json!({
            "claims": scored.len(),
            "cross_validated_5_fold": cv,
            "in_sample": fit_figures,
            "thresholds": {"supported": fitted.thresholds.0, "contradicted": fitted.thresholds.1,
                "topicOverlap": fitted.thresholds.2},
            "answers": answers,
        })
    );
    Ok(())
}

/// Asks the model the route's questions about every row (see the module docs), writing each
/// row's scores to `--scores` as it goes.
fn ask(options: &Options, rows: &[Row]) -> Result<Vec<Scored>, String> {
    let path = options.provider.as_deref().ok_or("--provider is needed to ask the model")?;
    let (provider, assess) = read_provider(path)?;
    let route = match assess {
        AssessMode::Verifier(route) => route,
        _ => VerifierOptions::default(),
    };
    eprintln!("fit: asking {} ({} claims)", provider_name(&provider), rows.len());
    let model = Probes::new(transport(provider)?);
    let mut out = match &options.scores {
        Some(path) => Some(std::fs::File::create(path).map_err(|e| format!("{path}: {e}"))?),
        None => None,
    };
    let mut scored = Vec::new();
    let started = std::time::Instant::now();
    for (n, row) in rows.iter().enumerate() {
        let label = row.label.clone().ok_or_else(|| format!("row {} has no label", n + 1))?;
        let own = row.corpus.as_ref().ok_or_else(|| format!("row {} has no corpus", n + 1))?;
        let corpus = IndexedCorpus::new(
            Corpus::from_pairs(own.iter()).map_err(|e| format!("row {}: {e}", n + 1))?,
        );
        // The job every host sends for the route (the default retrieval).
        let config = json!({"kind": "claim", "claim": row.claim, "corpus": corpus.id(),
            "assess": {"verifier": route}});
        let job = Job::from_json(&config.to_string(), &[Arc::clone(&corpus)])
            .map_err(|failed| format!("row {}: {failed}", n + 1))?;
        let evidence = job.claim_check().map(|check| check.evidence().to_vec()).unwrap_or_default();
        let all: Vec<usize> = (0..evidence.len()).collect();
        let questions = plan(&row.claim, &evidence, &all, &route, true);
        model.readings.borrow_mut().clear();
        // Ends once the questions are answered: the next request is aborted.
        let _ = block_on(drive(job, &model, &NoTools));
        let readings = model.readings.borrow().clone();
        if readings.len() != questions.len() {
            return Err(format!(
                "row {}: the route asked {} questions, the plan has {}",
                n + 1,
                readings.len(),
                questions.len()
            ));
        }
        let asked: Vec<AskedQuestion> = questions
            .iter()
            .zip(&readings)
            .map(|(question, reading)| AskedQuestion { question: *question, reading: *reading })
            .collect();
        let prior = prior_score(&asked);
        // Each asked passage once, by its best chunk (the text the features read), in the
        // order asked: what the route decides on.
        let passages = best_chunks(&evidence, &asked);
        let row = Scored {
            id: row.id.clone().unwrap_or_else(|| format!("row {}", n + 1)),
            claim: row.claim.clone(),
            label,
            passages: passages
                .into_iter()
                .map(|(_, passage)| (passage.text.to_owned(), passage.score))
                .collect(),
            prior,
            chunked: judged_on_chunks(&asked),
        };
        if let Some(file) = &mut out {
            let line = serde_json::to_string(&row).map_err(|e| e.to_string())?;
            writeln!(file, "{line}").map_err(|e| e.to_string())?;
        }
        scored.push(row);
        if (n + 1) % 25 == 0 || n + 1 == rows.len() {
            #[allow(clippy::cast_precision_loss)]
            let each = started.elapsed().as_secs_f64() / (n + 1) as f64;
            eprintln!("fit: {}/{} claims asked ({each:.2} s a claim)", n + 1, rows.len());
        }
    }
    Ok(scored)
}

/// The provider, for the route's questions only: every question's reading is recorded, and
/// any other request (research, summary) is answered as aborted, which ends the check.
struct Probes<T> {
    inner: T,
    readings: std::cell::RefCell<Vec<Reading>>,
}

impl<T> Probes<T> {
    fn new(inner: T) -> Self {
        Self { inner, readings: std::cell::RefCell::default() }
    }
}

impl<T: Transport> Transport for Probes<T> {
    async fn complete(&self, request: ModelRequest<'_>) -> AssistantMessage {
        if request.probe.is_none() {
            return AssistantMessage::aborted("fit: the route's questions are answered");
        }
        let response = self.inner.complete(request).await;
        self.readings.borrow_mut().push(read_answer(&response));
        response
    }

    async fn wait(&self, delay_ms: u64) {
        self.inner.wait(delay_ms).await;
    }
}

/// A fitted model: weights per class over the raw features, and the thresholds.
struct Fitted {
    supported: Linear,
    contradicted: Linear,
    /// `supported`, `contradicted`, `topicOverlap`.
    thresholds: (f64, f64, f64),
    /// `answerSupported` ([`answer_threshold`]).
    answer_supported: Option<f64>,
}

impl Fitted {
    fn probabilities(&self, x: &[f64; 5]) -> [f64; 3] {
        let z = |class: &Linear| {
            class.bias + class.weights.iter().zip(x).map(|(w, v)| w * v).sum::<f64>()
        };
        softmax([z(&self.supported), z(&self.contradicted), 0.0])
    }

    /// The verdict `decide` gives: supported when its probability reaches its threshold and
    /// is at least contradicted's, else contradicted at its threshold, else insufficient; and
    /// insufficient when no passage was judged.
    fn predict(&self, (x, _, judged): &Datum) -> usize {
        if *judged { classify(self.probabilities(x), x[2], self.thresholds) } else { 2 }
    }

    /// Whether `decide` by the answer's rule says `supported` (a passage judged, and
    /// `P(supported)` at the answer's threshold; the claim's rule without one).
    fn sentence_supported(&self, datum: &Datum) -> bool {
        match self.answer_supported {
            Some(at) => datum.2 && self.probabilities(&datum.0)[0] >= at,
            None => self.predict(datum) == 0,
        }
    }

    fn weights(
        &self,
        base: &VerifierWeights,
        options: &Options,
        cv: &Value,
        answers: &Value,
        claims: usize,
    ) -> VerifierWeights {
        let mut weights = base.clone();
        weights.fitted = true;
        weights.classes = Classes {
            supported: round_linear(&self.supported),
            contradicted: round_linear(&self.contradicted),
            insufficient: Linear { bias: 0.0, weights: vec![0.0; FEATURES.len()] },
        };
        weights.thresholds = Thresholds {
            supported: self.thresholds.0,
            contradicted: self.thresholds.1,
            cite_support: weights.thresholds.cite_support,
            topic_overlap: self.thresholds.2,
            answer_supported: self.answer_supported,
            // Fitted with the weights this fit replaces: `--chunked-answers` fits it again.
            answer_supported_in_chunk: None,
        };
        let used: Vec<&str> = FEATURES
            .iter()
            .zip(options.features)
            .filter(|(_, used)| *used)
            .map(|(name, _)| *name)
            .collect();
        weights.note = format!(
            "Fitted by `cargo xtask fit` on {claims} claims of {} with {}'s scores (multinomial \
             logistic regression on {}, L2 {}; {}; contradicted needs a topic overlap of {}). \
             5-fold cross-validated on those dev claims: {cv}. answerSupported: the \
             P(supported) an answer's sentence needs, chosen for answers of three dev claims \
             (faithful: three supported; hallucinated: two supported and one contradicted) on \
             the cross-validated probabilities: {answers}.",
            options.claims.rsplit('/').next().unwrap_or(&options.claims),
            options.model,
            used.join(", "),
            options.l2,
            if options.grid {
                "the supported and contradicted thresholds on a grid for the mean of 3-way \
                 accuracy and binary balanced accuracy"
            } else {
                "the most probable class"
            },
            options.topic_overlap,
        );
        weights
    }
}

fn round_linear(linear: &Linear) -> Linear {
    let round = |x: f64| (x * 10_000.0).round() / 10_000.0;
    Linear { bias: round(linear.bias), weights: linear.weights.iter().map(|w| round(*w)).collect() }
}

fn softmax(z: [f64; 3]) -> [f64; 3] {
    let max = z.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let exp = z.map(|v| (v - max).exp());
    let total: f64 = exp.iter().sum();
    exp.map(|v| v / total)
}

/// `decide`'s rule: `overlap` is the topic passage's share of the claim's content words.
fn classify(p: [f64; 3], overlap: f64, (t_sup, t_con, t_topic): (f64, f64, f64)) -> usize {
    if p[0] >= p[1] && p[0] >= p[2] && p[0] >= t_sup {
        0
    } else if p[1] > p[0] && p[1] >= p[2] && p[1] >= t_con && overlap >= t_topic {
        1
    } else {
        2
    }
}

/// A claim's features, its class (index in [`LABELS`]), and whether any passage was judged.
type Datum = ([f64; 5], usize, bool);

/// Fits the regression and the thresholds on `data`.
fn fit(data: &[Datum], options: &Options) -> Fitted {
    let n = data.len().max(1);
    #[allow(clippy::cast_precision_loss)]
    let count = n as f64;
    // Standardised features: the descent converges alike for every feature's scale.
    let mut mean = [0.0; 5];
    let mut sd = [0.0; 5];
    for (x, ..) in data {
        for j in 0..5 {
            mean[j] += x[j] / count;
        }
    }
    for (x, ..) in data {
        for j in 0..5 {
            sd[j] += (x[j] - mean[j]).powi(2) / count;
        }
    }
    let sd = sd.map(|v| if v.sqrt() > 1e-9 { v.sqrt() } else { 1.0 });
    let allowed = |_class: usize, j: usize| options.features[j];
    let mut w = [[0.0f64; 5]; 2];
    let mut b = [0.0f64; 2];
    let rate = 0.5;
    for _ in 0..3000 {
        let mut gw = [[0.0f64; 5]; 2];
        let mut gb = [0.0f64; 2];
        for (x, class, _) in data {
            let s: [f64; 5] = std::array::from_fn(|j| (x[j] - mean[j]) / sd[j]);
            let z = |c: usize| b[c] + (0..5).map(|j| w[c][j] * s[j]).sum::<f64>();
            let p = softmax([z(0), z(1), 0.0]);
            for c in 0..2 {
                let error = p[c] - f64::from(u8::from(*class == c));
                gb[c] += error / count;
                for j in 0..5 {
                    gw[c][j] += error * s[j] / count;
                }
            }
        }
        for c in 0..2 {
            b[c] -= rate * gb[c];
            for j in 0..5 {
                w[c][j] = if allowed(c, j) {
                    w[c][j] - rate * (gw[c][j] + options.l2 * w[c][j])
                } else {
                    0.0
                };
            }
        }
    }
    // Back to the raw features' units: w·(x − m)/sd + b = (w/sd)·x + (b − Σ w m / sd).
    let raw = |c: usize| Linear {
        bias: b[c] - (0..5).map(|j| w[c][j] * mean[j] / sd[j]).sum::<f64>(),
        weights: (0..5).map(|j| w[c][j] / sd[j]).collect(),
    };
    // Rounded as the weights file keeps them, before anything is predicted with them: the
    // fitted model is exactly the one `decide` reads back (a claim at a threshold would
    // otherwise go either way).
    let mut fitted = Fitted {
        supported: round_linear(&raw(0)),
        contradicted: round_linear(&raw(1)),
        thresholds: (0.0, 0.0, options.topic_overlap),
        answer_supported: None,
    };
    if !options.grid {
        return fitted;
    }
    let truth: Vec<usize> = data.iter().map(|(_, class, _)| *class).collect();
    let probabilities: Vec<[f64; 3]> = data.iter().map(|(x, ..)| fitted.probabilities(x)).collect();
    let mut best = (f64::NEG_INFINITY, fitted.thresholds);
    for i in 0..=12 {
        for j in 0..=12 {
            {
                let round = |x: f64| (x * 100.0).round() / 100.0;
                let t = (
                    round(0.2 + 0.05 * f64::from(i)),
                    round(0.2 + 0.05 * f64::from(j)),
                    options.topic_overlap,
                );
                let predicted: Vec<usize> = probabilities
                    .iter()
                    .zip(data)
                    .map(|(p, (x, _, judged))| if *judged { classify(*p, x[2], t) } else { 2 })
                    .collect();
                let f = figures(&truth, &predicted);
                let goal = (f["accuracy"].as_f64().unwrap_or(0.0)
                    + f["binary_balanced_accuracy"].as_f64().unwrap_or(0.0))
                    / 2.0;
                if goal > best.0 + 1e-12 {
                    best = (goal, t);
                }
            }
        }
    }
    fitted.thresholds = best.1;
    fitted
}

/// `--chunked-answers`: the `P(supported)` an answer's sentence needs when it was judged on
/// chunks of a longer passage (`answerSupportedInChunk`), for the base weights as they are.
/// Each claim judged on chunks (dev claims set inside documents: `compose-documents`) is
/// decided by the core's own `decide` with those weights, and the threshold is chosen from
/// its `P(supported)` as [`answer_threshold`] chooses `answerSupported`. The weights are not
/// refitted, so no fold is held out: one number is chosen on these claims. Only that
/// threshold and the note change in the file written.
fn chunked_answers(
    options: &Options,
    scored: &[Scored],
    base: VerifierWeights,
) -> Result<(), String> {
    let rows: Vec<&Scored> = scored.iter().filter(|row| row.chunked).collect();
    if rows.is_empty() {
        return Err("--chunked-answers: no claim was judged on chunks of a longer passage \
                    (give claims set inside documents, and scores asked since this flag)"
            .to_owned());
    }
    let (mut truth, mut predicted, mut support) = (Vec::new(), Vec::new(), Vec::new());
    for row in &rows {
        let passages = row.scored_passages();
        let decision = decide(&row.claim, &passages, row.prior, &base);
        let verdict = serde_json::to_value(decision.verdict).unwrap_or(Value::Null);
        truth.push(LABELS.iter().position(|label| *label == row.label).unwrap_or(2));
        predicted.push(LABELS.iter().position(|label| json!(label) == verdict).unwrap_or(2));
        // A sentence no judged passage stands behind is never supported.
        support.push(if decision.best.is_some() { decision.probabilities.supported } else { 0.0 });
    }
    let answers = answer_threshold(&truth, &predicted, &support);
    let at = answers["answerSupported"].as_f64();
    let mut weights = base;
    weights.thresholds.answer_supported_in_chunk = at;
    // The core must decide each sentence on chunks as chosen here.
    for (row, p) in rows.iter().zip(&support) {
        let passages = row.scored_passages();
        let sentence =
            decide_by(&row.claim, &passages, row.prior, &weights, Rule::AnswerSentenceInChunk);
        let core = sentence.verdict == verity_core::claim::Verdict::Supported;
        if core != at.is_some_and(|at| *p >= at) {
            return Err(format!("for {} on chunks, the core and the fit disagree", row.id));
        }
    }
    let kept = weights.note.split(" answerSupportedInChunk:").next().unwrap_or_default();
    weights.note = format!(
        "{kept} answerSupportedInChunk: the P(supported) an answer's sentence needs when judged \
         on chunks of a longer passage, chosen the same way on {} claims of {} set inside \
         documents, with these weights: {answers}.",
        rows.len(),
        options.claims.rsplit('/').next().unwrap_or(&options.claims),
    );
    let text = serde_json::to_string_pretty(&weights).map_err(|e| e.to_string())?;
    match &options.out {
        Some(path) => {
            std::fs::write(path, format!("{text}\n")).map_err(|e| format!("{path}: {e}"))?;
            eprintln!("fit: answerSupportedInChunk written to {path}");
        }
        None => println!("{text}"),
    }
    println!(
        "{}",
        json!({"claims": rows.len(), "claim_rule": figures(&truth, &predicted), "answers": answers})
    );
    Ok(())
}

/// The `P(supported)` an answer's sentence needs, from each claim's held-out `P(supported)`
/// (`support`) and class (`truth`): the threshold with the best balanced accuracy over answers
/// of three claims drawn independently, faithful = three supported claims, hallucinated = two
/// supported and one contradicted (the composed answers of the answers issue), judged
/// hallucinated when any sentence is not supported. With `a` the share of supported claims at
/// the threshold and `b` that of contradicted ones, faithful answers are recalled `a³` and
/// hallucinated ones `1 − a²b`. Also says what the claim's rule (`predicted`) gives, and the
/// figure when the wrong claim is an `insufficient` one (an invented detail) instead.
fn answer_threshold(truth: &[usize], predicted: &[usize], support: &[f64]) -> Value {
    let share = |class: usize, holds: &dyn Fn(usize) -> bool| {
        let all: Vec<usize> = (0..truth.len()).filter(|&i| truth[i] == class).collect();
        #[allow(clippy::cast_precision_loss)]
        if all.is_empty() {
            0.0
        } else {
            all.iter().filter(|&&i| holds(i)).count() as f64 / all.len() as f64
        }
    };
    let balanced = |a: f64, b: f64| (a.powi(3) + 1.0 - a * a * b) / 2.0;
    let round = |x: f64| (x * 10_000.0).round() / 10_000.0;
    let describe = |a: f64, b: f64, c: f64| {
        json!({
            "balanced_accuracy": round(balanced(a, b)),
            "recall": {"faithful": round(a.powi(3)), "hallucinated": round(1.0 - a * a * b)},
            "balanced_accuracy_insufficient_detail": round(balanced(a, c)),
        })
    };
    let claim_rule = {
        let supported = |class| share(class, &|i| predicted[i] == 0);
        describe(supported(0), supported(1), supported(2))
    };
    let mut best: Option<(f64, f64)> = None;
    for step in 1..100 {
        let at = f64::from(step) / 100.0;
        let supported = |class| share(class, &|i| support[i] >= at);
        let goal = balanced(supported(0), supported(1));
        if best.is_none_or(|(b, _)| goal > b + 1e-12) {
            best = Some((goal, at));
        }
    }
    let at = best.map_or(0.5, |(_, at)| at);
    let supported = |class| share(class, &|i| support[i] >= at);
    json!({
        "answerSupported": at,
        "sentence_rule": describe(supported(0), supported(1), supported(2)),
        "claim_rule": claim_rule,
    })
}

/// Accuracy, binary balanced accuracy (supported against the rest), per-label recall and the
/// confusion of `predicted` against `truth` (class indices in [`LABELS`]).
fn figures(truth: &[usize], predicted: &[usize]) -> Value {
    let round = |x: f64| (x * 10_000.0).round() / 10_000.0;
    let share = |part: usize, whole: usize| {
        #[allow(clippy::cast_precision_loss)]
        if whole == 0 { 0.0 } else { part as f64 / whole as f64 }
    };
    let pairs = || truth.iter().zip(predicted);
    let correct = pairs().filter(|(t, p)| t == p).count();
    let mut recall = BTreeMap::new();
    let mut confusion = BTreeMap::<&str, BTreeMap<&str, usize>>::new();
    for (class, label) in LABELS.iter().enumerate() {
        let all = truth.iter().filter(|t| **t == class).count();
        let hit = pairs().filter(|(t, p)| **t == class && **p == class).count();
        recall.insert(*label, round(share(hit, all)));
        for (other, name) in LABELS.iter().enumerate() {
            let n = pairs().filter(|(t, p)| **t == class && **p == other).count();
            confusion.entry(*label).or_default().insert(*name, n);
        }
    }
    let positive = truth.iter().filter(|t| **t == 0).count();
    let found = pairs().filter(|(t, p)| **t == 0 && **p == 0).count();
    let negative = truth.len() - positive;
    let rejected = pairs().filter(|(t, p)| **t != 0 && **p != 0).count();
    json!({
        "accuracy": round(share(correct, truth.len())),
        "binary_balanced_accuracy": round((share(found, positive) + share(rejected, negative)) / 2.0),
        "recall": recall,
        "confusion": confusion,
    })
}
