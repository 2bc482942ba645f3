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
                     [--out WEIGHTS.json] [--base WEIGHTS.json] [--model NAME] [--features NAME,...] [--answer-features NAME,...|none] [--l2 X] \
                     [--thresholds argmax|grid] [--topic-overlap X] [--chunked-answers] [--dump FILE.jsonl]";

/// The features fitted when `--features` does not say: the calibrated score of the best
/// passage, the two lexical features of the topic passage, and the claim's bounds on numbers
/// checked against it (the others added nothing cross-validated on dev; docs/BENCHMARKS.md).
const DEFAULT_FEATURES: &str = "calibratedMaxS,overlap,missingNumbers,comparedNumbers";

/// How many features there are ([`FEATURES`]).
const N: usize = FEATURES.len();

/// The features of the answer model when `--answer-features` does not say: the calibrated
/// score of the best passage, so `P(holds)` orders sentences as the model's judgement does,
/// and `comparedNumbers`, arithmetic that judgement lacks (0 on a sentence without a bound on
/// a number, so it moves no other). `overlap` tells supported and contradicted claims alike
/// from a claim the corpus is silent about, which is the claim model's task;
/// `missingNumbers` took opposite signs for the two models on the dev claims (VitaminC's
/// supported claims often round the passage's number), a quirk of this data that would
/// reward an invented number elsewhere (docs/BENCHMARKS.md).
const DEFAULT_ANSWER_FEATURES: &str = "calibratedMaxS,comparedNumbers";

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
    features: [bool; N],
    /// Which of them the answer model uses ([`VerifierWeights::answer`]); none: no answer
    /// model (`answerSupported` is then a threshold on `P(supported)`).
    answer_features: [bool; N],
    l2: f64,
    /// Whether the `supported` and `contradicted` thresholds are chosen on a grid (else 0:
    /// the most probable class).
    grid: bool,
    /// The topic passage's overlap `contradicted` needs.
    topic_overlap: f64,
    /// Fit only `answerSupportedInChunk`, with the base weights as they are
    /// ([`chunked_answers`]).
    chunked_answers: bool,
    /// Where each claim's features, class and scores are written, one JSON line a claim
    /// (for looking at the data outside the fit).
    dump: Option<String>,
}

/// The names of the features `mask` uses, joined with ", " (the inverse of [`feature_mask`]).
fn feature_names(mask: [bool; N]) -> String {
    let used: Vec<&str> =
        FEATURES.iter().zip(mask).filter(|(_, used)| *used).map(|(name, _)| *name).collect();
    used.join(", ")
}

fn feature_mask(list: &str) -> Result<[bool; N], String> {
    let mut mask = [false; N];
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
        answer_features: feature_mask(DEFAULT_ANSWER_FEATURES)?,
        l2: 0.01,
        grid: false,
        topic_overlap: 0.3,
        chunked_answers: false,
        dump: None,
    };
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut value = || args.next().ok_or_else(|| format!("{arg} needs a value; {USAGE}"));
        match arg.as_str() {
            "--provider" => options.provider = Some(value()?),
            "--scores" => options.scores = Some(value()?),
            "--chunked-answers" => options.chunked_answers = true,
            "--dump" => options.dump = Some(value()?),
            "--out" => options.out = Some(value()?),
            "--base" => options.base = Some(value()?),
            "--model" => options.model = value()?,
            "--features" => options.features = feature_mask(&value()?)?,
            "--answer-features" => {
                options.answer_features = match value()?.as_str() {
                    "none" => [false; N],
                    list => feature_mask(list)?,
                }
            }
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
    if let Some(path) = &options.dump {
        let lines: Vec<String> = scored
            .iter()
            .zip(&data)
            .map(|(row, (x, class, judged))| {
                json!({"id": row.id, "claim": row.claim, "label": LABELS[*class],
                    "features": x, "judged": judged, "prior": row.prior,
                    "passages": row.passages})
                .to_string()
            })
            .collect();
        std::fs::write(path, lines.join("\n") + "\n").map_err(|e| format!("{path}: {e}"))?;
    }
    let fitted = fit(&data, &options);
    // Cross-validation: five folds by position (the dev file interleaves labels).
    let mut predicted = vec![0; data.len()];
    // Each claim's support as an answer's sentence (P(holds), or P(supported) without an
    // answer model) from the fold that did not see it (0 when no passage was judged: such a
    // claim is never supported).
    let mut held_out_support = vec![0.0; data.len()];
    // Whether it reaches the answer's threshold chosen on the other folds alone: the figure
    // for answers whose claims neither the weights nor the threshold saw.
    let mut held_out_passes = vec![false; data.len()];
    let truth: Vec<usize> = data.iter().map(|(_, class, _)| *class).collect();
    for fold in 0..5 {
        let (train, test): (Vec<usize>, Vec<usize>) = (0..data.len()).partition(|i| i % 5 != fold);
        let model = fit(&train.iter().map(|&i| data[i]).collect::<Vec<_>>(), &options);
        let (train_truth, train_support): (Vec<usize>, Vec<f64>) =
            train.iter().map(|&i| (truth[i], model.sentence_support(&data[i]))).collect();
        let at = best_threshold(&train_truth, &train_support);
        for i in test {
            predicted[i] = model.predict(&data[i]);
            held_out_support[i] = model.sentence_support(&data[i]);
            held_out_passes[i] = held_out_support[i] >= at;
        }
    }
    let in_sample: Vec<usize> = data.iter().map(|datum| fitted.predict(datum)).collect();
    let cv = figures(&truth, &predicted);
    let fit_figures = figures(&truth, &in_sample);
    let mut answers = answer_threshold(&truth, &predicted, &held_out_support);
    answers["held_out_threshold"] = answer_figures(&truth, &|i| held_out_passes[i]);
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
    /// The answer model ([`VerifierWeights::answer`]).
    answer: Option<Linear>,
    /// `supported`, `contradicted`, `topicOverlap`.
    thresholds: (f64, f64, f64),
    /// `answerSupported` ([`answer_threshold`]).
    answer_supported: Option<f64>,
}

impl Fitted {
    fn probabilities(&self, x: &[f64; N]) -> [f64; 3] {
        softmax([self.supported.score(x), self.contradicted.score(x), 0.0])
    }

    /// The verdict `decide` gives: supported when its probability reaches its threshold and
    /// is at least contradicted's, else contradicted at its threshold, else insufficient; and
    /// insufficient when no passage was judged.
    fn predict(&self, (x, _, judged): &Datum) -> usize {
        if *judged { classify(self.probabilities(x), x[2], self.thresholds) } else { 2 }
    }

    /// What an answer's threshold is read on: `P(holds)` with an answer model, else
    /// `P(supported)`; 0 when no passage was judged (such a sentence is never supported).
    fn sentence_support(&self, (x, _, judged): &Datum) -> f64 {
        if !*judged {
            return 0.0;
        }
        match &self.answer {
            Some(answer) => answer.probability(x),
            None => self.probabilities(x)[0],
        }
    }

    /// Whether `decide` by the answer's rule says `supported` (a passage judged, and its
    /// support at the answer's threshold; the claim's rule without one).
    fn sentence_supported(&self, datum: &Datum) -> bool {
        match self.answer_supported {
            Some(at) => self.sentence_support(datum) >= at,
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
        // A base fitted before the last feature named fewer: the weights below name them all.
        weights.features = FEATURES.iter().map(|name| (*name).to_owned()).collect();
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
        weights.answer = self.answer.clone();
        weights.note = format!(
            "Fitted by `cargo xtask fit` on {claims} claims of {} with {}'s scores (multinomial \
             logistic regression on {}, L2 {}; {}; contradicted needs a topic overlap of {}). \
             5-fold cross-validated on those dev claims: {cv}. {}answerSupported: the \
             {} an answer's sentence needs, chosen for answers of three dev claims (faithful: \
             three supported; hallucinated: two supported and one contradicted) on the \
             cross-validated probabilities (held_out_threshold: with the threshold also chosen \
             on the other folds): {answers}.",
            options.claims.rsplit('/').next().unwrap_or(&options.claims),
            options.model,
            feature_names(options.features),
            options.l2,
            if options.grid {
                "the supported and contradicted thresholds on a grid for the mean of 3-way \
                 accuracy and binary balanced accuracy"
            } else {
                "the most probable class"
            },
            options.topic_overlap,
            if self.answer.is_some() {
                format!(
                    "answer: a logistic regression of the supported claims against the \
                     contradicted ones on {}, L2 {}. ",
                    feature_names(options.answer_features),
                    options.l2
                )
            } else {
                String::new()
            },
            support_name(self.answer.as_ref()),
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
type Datum = ([f64; N], usize, bool);

/// Fits the regression and the thresholds on `data`.
fn fit(data: &[Datum], options: &Options) -> Fitted {
    let points: Vec<([f64; N], usize)> = data.iter().map(|(x, class, _)| (*x, *class)).collect();
    let classes = regression(&points, 2, options.features, options.l2);
    // The answer model: supported (0) against contradicted (1, the reference), the claims the
    // corpus is silent about left out.
    let answer = options.answer_features.contains(&true).then(|| {
        let points: Vec<([f64; N], usize)> =
            points.iter().filter(|(_, class)| *class < 2).copied().collect();
        round_linear(&regression(&points, 1, options.answer_features, options.l2)[0])
    });
    // Rounded as the weights file keeps them, before anything is predicted with them: the
    // fitted model is exactly the one `decide` reads back (a claim at a threshold would
    // otherwise go either way).
    let mut fitted = Fitted {
        supported: round_linear(&classes[0]),
        contradicted: round_linear(&classes[1]),
        answer,
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

/// What an answer's thresholds are read on, as the weights' note names it: `P(holds)` with an
/// answer model, else `P(supported)`.
fn support_name(answer: Option<&Linear>) -> &'static str {
    if answer.is_some() { "P(holds)" } else { "P(supported)" }
}

/// A multinomial logistic regression of `points` (features, class) over `classes` classes
/// and a reference class (class index `classes`, its score fixed at 0), on the features
/// `used` with an L2 penalty `l2`, by gradient descent on standardised features: each class's
/// linear score in the raw features' units.
fn regression(
    points: &[([f64; N], usize)],
    classes: usize,
    used: [bool; N],
    l2: f64,
) -> Vec<Linear> {
    let n = points.len().max(1);
    #[allow(clippy::cast_precision_loss)]
    let count = n as f64;
    // Standardised features: the descent converges alike for every feature's scale.
    let mut mean = [0.0; N];
    let mut sd = [0.0; N];
    for (x, _) in points {
        for j in 0..N {
            mean[j] += x[j] / count;
        }
    }
    for (x, _) in points {
        for j in 0..N {
            sd[j] += (x[j] - mean[j]).powi(2) / count;
        }
    }
    let sd = sd.map(|v| if v.sqrt() > 1e-9 { v.sqrt() } else { 1.0 });
    let mut w = vec![[0.0f64; N]; classes];
    let mut b = vec![0.0f64; classes];
    let rate = 0.5;
    for _ in 0..3000 {
        let mut gw = vec![[0.0f64; N]; classes];
        let mut gb = vec![0.0f64; classes];
        for (x, class) in points {
            let s: [f64; N] = std::array::from_fn(|j| (x[j] - mean[j]) / sd[j]);
            let z: Vec<f64> = (0..classes)
                .map(|c| b[c] + (0..N).map(|j| w[c][j] * s[j]).sum::<f64>())
                .chain([0.0])
                .collect();
            let max = z.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            let total: f64 = z.iter().map(|v| (v - max).exp()).sum();
            for c in 0..classes {
                let error = (z[c] - max).exp() / total - f64::from(u8::from(*class == c));
                gb[c] += error / count;
                for j in 0..N {
                    gw[c][j] += error * s[j] / count;
                }
            }
        }
        for c in 0..classes {
            b[c] -= rate * gb[c];
            for j in 0..N {
                w[c][j] = if used[j] { w[c][j] - rate * (gw[c][j] + l2 * w[c][j]) } else { 0.0 };
            }
        }
    }
    // Back to the raw features' units: w·(x − m)/sd + b = (w/sd)·x + (b − Σ w m / sd).
    (0..classes)
        .map(|c| Linear {
            bias: b[c] - (0..N).map(|j| w[c][j] * mean[j] / sd[j]).sum::<f64>(),
            weights: (0..N).map(|j| w[c][j] / sd[j]).collect(),
        })
        .collect()
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
        // A sentence no judged passage stands behind is never supported; the threshold is read
        // on the answer model's P(holds) when the weights have one.
        support.push(if decision.best.is_some() {
            base.holds(&decision.features).unwrap_or(decision.probabilities.supported)
        } else {
            0.0
        });
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
        "{kept} answerSupportedInChunk: the {} an answer's sentence needs when judged \
         on chunks of a longer passage, chosen the same way on {} claims of {} set inside \
         documents, with these weights: {answers}.",
        support_name(weights.answer.as_ref()),
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
    let at = best_threshold(truth, support);
    json!({
        "answerSupported": at,
        "sentence_rule": answer_figures(truth, &|i| support[i] >= at),
        "claim_rule": answer_figures(truth, &|i| predicted[i] == 0),
    })
}

/// The threshold of [`answer_threshold`]: the first of 0.01 to 0.99 with the best expected
/// balanced accuracy over composed answers when a claim whose `support` reaches it is a
/// supported sentence.
fn best_threshold(truth: &[usize], support: &[f64]) -> f64 {
    let mut best: Option<(f64, f64)> = None;
    for step in 1..100 {
        let at = f64::from(step) / 100.0;
        let goal = answer_balanced(truth, &|i| support[i] >= at).0;
        if best.is_none_or(|(b, _)| goal > b + 1e-12) {
            best = Some((goal, at));
        }
    }
    best.map_or(0.5, |(_, at)| at)
}

/// The expected balanced accuracy over composed answers (see [`answer_threshold`]) when the
/// claims for which `holds` is true are the sentences judged supported, with the shares it
/// comes from: (balanced accuracy, `a` supported claims, `b` contradicted, `c` insufficient).
fn answer_balanced(truth: &[usize], holds: &dyn Fn(usize) -> bool) -> (f64, f64, f64, f64) {
    let share = |class: usize| {
        let all: Vec<usize> = (0..truth.len()).filter(|&i| truth[i] == class).collect();
        #[allow(clippy::cast_precision_loss)]
        if all.is_empty() {
            0.0
        } else {
            all.iter().filter(|&&i| holds(i)).count() as f64 / all.len() as f64
        }
    };
    let (a, b, c) = (share(0), share(1), share(2));
    (composed_balanced(a, b), a, b, c)
}

/// The expected balanced accuracy over composed answers when a supported claim is judged
/// supported with probability `a` and the wrong one with `b`: faithful answers are recalled
/// `a³`, hallucinated ones `1 − a²b` ([`answer_threshold`]).
fn composed_balanced(a: f64, b: f64) -> f64 {
    (a.powi(3) + 1.0 - a * a * b) / 2.0
}

/// [`answer_balanced`] as the fit prints it: the balanced accuracy, the recall of each kind
/// of answer, and the balanced accuracy when the wrong claim is an `insufficient` one (an
/// invented detail) instead.
fn answer_figures(truth: &[usize], holds: &dyn Fn(usize) -> bool) -> Value {
    let (balanced, a, b, c) = answer_balanced(truth, holds);
    let round = |x: f64| (x * 10_000.0).round() / 10_000.0;
    json!({
        "balanced_accuracy": round(balanced),
        "recall": {"faithful": round(a.powi(3)), "hallucinated": round(1.0 - a * a * b)},
        "balanced_accuracy_insufficient_detail": round(composed_balanced(a, c)),
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
