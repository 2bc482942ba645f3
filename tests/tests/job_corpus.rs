//! A claim job over the real 26,259-passage VitaminC corpus (`shared/data/vitaminc`, CC BY-SA
//! 3.0): saved after every input, the job stays small (the corpus is named by its hash, never
//! copied), and every save restores with the corpus and continues to the same report.

use std::sync::Arc;

use serde_json::json;
use verity_core::corpus::{Corpus, Passage};
use verity_core::indexed::IndexedCorpus;
use verity_core::provider::offline::{self, OfflineModel};
use verity_core::{Input, Job, Machine, NoTools, Output, drive};
use verity_tests::http::workspace_root;

fn vitaminc() -> Arc<IndexedCorpus> {
    let path = workspace_root().join("../shared/data/vitaminc/corpus.jsonl");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!("{}: {e} (the shared data sits beside the checkout)", path.display())
    });
    let passages: Vec<Passage> =
        text.lines().map(|line| serde_json::from_str(line).expect("a passage")).collect();
    assert_eq!(passages.len(), 26_259);
    IndexedCorpus::new(Corpus::new(passages).expect("unique ids"))
}

/// A claim the corpus cannot decide: the offline baseline's first assessment is
/// `insufficient`, so the job goes through research (its transcript grows with the lookups'
/// passages) and ends `no-new-evidence`.
const CLAIM: &str = "The tallest building in Ulaanbaatar opened in 1950.";

#[test]
fn a_claim_job_over_the_vitaminc_corpus_saves_small_after_every_input() {
    let corpus = vitaminc();
    let corpus_bytes: usize =
        corpus.corpus().passages().iter().map(|p| p.id.len() + p.text.len()).sum();
    let config = json!({"kind": "claim", "claim": CLAIM, "corpus": corpus.id()}).to_string();
    let mut job = Job::from_json(&config, &[Arc::clone(&corpus)]).unwrap();
    let mut sizes = Vec::new();
    loop {
        let input = match job.poll_output() {
            Output::CallModel(call) => {
                Input::ModelResponse { call: call.id, response: offline::respond(call.request) }
            }
            Output::RunTools(_) => panic!("the job answers its own lookups"),
            _ => break,
        };
        job.handle_input(input).unwrap();
        // Save, drop, restore with the corpus: what a host that may crash does every input.
        let saved = job.save();
        sizes.push(saved.len());
        job = Job::restore(&saved, &[Arc::clone(&corpus)]).unwrap();
    }
    let outcome = serde_json::to_value(job.finish()).unwrap();
    eprintln!(
        "corpus {} passages, {corpus_bytes} bytes; saved job after each of {} inputs: {:?} bytes",
        corpus.corpus().len(),
        sizes.len(),
        sizes
    );
    assert!(sizes.len() >= 3, "the job went through research");
    let largest = *sizes.iter().max().unwrap();
    // A few KB plus the transcript (the retrieved evidence, the lookups' passages): the corpus
    // (over 5 MB) is never in it.
    assert!(largest < 48 * 1024, "a saved job of {largest} bytes");
    assert!(corpus_bytes > 100 * largest);

    eprintln!("outcome: {outcome}");
    // The same job run without saving ends the same way.
    let job = Job::from_json(&config, &[Arc::clone(&corpus)]).unwrap();
    let whole = pollster::block_on(drive(job, &OfflineModel, &NoTools));
    assert_eq!(outcome, serde_json::to_value(whole).unwrap());
}
