//! The eval of whole answers (`eval ANSWERS.jsonl`, [`verity_tests::answers`]) with the offline
//! model: sentences cut, only the checkable ones checked, an answer hallucinated when one of
//! them is not supported, and bad rows refused by line or id.

use serde_json::{Map, json};
use verity_core::provider::offline::OfflineModel;
use verity_tests::answers::{AnswerRow, evaluate, read};

fn row(value: serde_json::Value) -> AnswerRow {
    serde_json::from_value(value).unwrap()
}

#[test]
fn an_answer_is_hallucinated_when_a_checked_sentence_is_not_supported() {
    let corpus = json!({
        "eiffel": "The Eiffel Tower is a wrought-iron lattice tower in Paris, France.",
        "louvre": "The Louvre is the world's most-visited art museum, in Paris.",
    });
    let rows = [
        // Copied from its passages (and a question, which is not checked): faithful.
        row(json!({"id": "a1", "label": "faithful", "corpus": corpus,
            "answer": "The Eiffel Tower is a wrought-iron lattice tower in Paris, France. Is it tall? \
                       The Louvre is the world's most-visited art museum, in Paris."})),
        // A sentence the corpus says nothing of: hallucinated.
        row(json!({"id": "a2", "label": "hallucinated", "corpus": corpus,
            "answer": "The Eiffel Tower is a wrought-iron lattice tower in Paris, France. \
                       Submarine cables carry most transatlantic internet traffic today."})),
        // The same, from a document split into passages as an uploaded text is.
        row(json!({"id": "a3", "label": "faithful",
            "document": "The Eiffel Tower is a wrought-iron lattice tower in Paris, France.\n\nThe Louvre is an art museum.",
            "answer": "The Eiffel Tower is a wrought-iron lattice tower in Paris, France."})),
    ];
    let summary =
        pollster::block_on(evaluate(&rows, &Map::new(), &OfflineModel, |_, _, _| {})).unwrap();
    assert_eq!(summary["answers"], 3);
    assert_eq!(summary["sentences"], 6);
    assert_eq!(summary["checked"], 5, "the question is not checked: {summary}");
    assert_eq!(summary["confusion"]["faithful"]["faithful"], 2, "{summary}");
    assert_eq!(summary["confusion"]["hallucinated"]["hallucinated"], 1, "{summary}");
    assert_eq!(summary["balanced_accuracy"], 1.0);
    assert_eq!(summary["sentence_verdicts"]["supported"], 4, "{summary}");
}

#[test]
fn bad_answer_rows_are_refused_by_line_or_id() {
    let dir = std::env::temp_dir().join(format!("verity-answers-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = |name: &str, text: &str| {
        let path = dir.join(name);
        std::fs::write(&path, text).unwrap();
        path.to_string_lossy().into_owned()
    };
    let good = r#"{"id": "a", "answer": "A b c.", "corpus": {"e": "A b c."}, "label": "faithful"}"#;
    let label = file("label.jsonl", &format!("{good}\n{}", good.replace("faithful", "true")));
    assert!(read(&label).unwrap_err().contains("line 2: the label is faithful or hallucinated"));
    let both =
        file("both.jsonl", &good.replace("\"label\"", "\"document\": \"A b c.\", \"label\""));
    assert!(read(&both).unwrap_err().contains("line 1: give a corpus or a document"));
    let empty =
        row(json!({"id": "blank", "answer": " \n ", "corpus": {"e": "A."}, "label": "faithful"}));
    let error = pollster::block_on(evaluate(&[empty], &Map::new(), &OfflineModel, |_, _, _| {}));
    assert_eq!(error.unwrap_err(), "blank: the answer is empty");
    std::fs::remove_dir_all(&dir).unwrap();
}
