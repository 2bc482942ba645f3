//! The corpus the page builds: files and items added whole or refused naming the file and
//! line, listed in pages of any size, removed and cleared; the demo; named corpora; and any
//! sequence of a page's corpus messages answered, never a trap.

use serde_json::json;
use verity_messages::{FromWorker, Item, Outcome, ToWorker};

mod common;

use common::{check, file, finished, last_corpus, request, started, take, with_demo};

#[test]
fn ready_is_posted_with_an_empty_corpus() {
    let (_engine, _pool, recorded) = started();
    let posted = take(&recorded);
    assert!(matches!(&posted[..], [FromWorker::Ready { corpus, results, resumed, queued }]
        if corpus.items == 0 && corpus.id.is_none() && results.is_empty() && resumed.is_empty()
            && queued.is_empty()));
}

#[test]
fn files_are_added_whole_or_refused_naming_file_and_line() {
    let (engine, _pool, recorded) = started();
    take(&recorded);
    engine.handle(ToWorker::AddFiles {
        files: vec![
            file("notes.txt", "First paragraph.\n\nSecond paragraph."),
            file("bad.jsonl", "{\"id\": \"a\", \"text\": \"fine\"}\n{\"id\": \"b\"}\n"),
            file("more.jsonl", "{\"id\": \"x1\", \"text\": \"An item.\"}\n"),
        ],
    });
    let posted = take(&recorded);
    let rejected: Vec<_> = posted
        .iter()
        .filter_map(|m| match m {
            FromWorker::FileRejected { file, line, message } => Some((file, line, message)),
            _ => None,
        })
        .collect();
    assert_eq!(rejected.len(), 1, "{posted:?}");
    assert_eq!(rejected[0].0, "bad.jsonl");
    assert_eq!(*rejected[0].1, Some(2));
    let summary = last_corpus(&posted);
    assert_eq!(summary.items, 3);
    assert!(summary.indexed && summary.index_ms.is_some(), "indexed right away: {summary:?}");
    assert!(summary.id.as_deref().is_some_and(|id| id.starts_with("sha256:")));
    assert_eq!(recorded.corpus.borrow().len(), 3, "saved");

    // An id another file already gave: the whole file is refused, the corpus unchanged.
    engine.handle(ToWorker::AddFiles {
        files: vec![file(
            "again.json",
            r#"[{"id": "new", "text": "n"}, {"id": "x1", "text": "dup"}]"#,
        )],
    });
    let posted = take(&recorded);
    assert!(
        matches!(&posted[..], [FromWorker::FileRejected { file, message, .. }]
        if file == "again.json" && message.contains("\"x1\"") && message.contains("already")),
        "{posted:?}"
    );
    assert_eq!(engine.corpus().corpus().len(), 3);
    // Items as data, the same rule.
    engine.handle(ToWorker::AddItems { items: vec![Item { id: "x1".into(), text: "t".into() }] });
    assert!(matches!(&take(&recorded)[..], [FromWorker::FileRejected { .. }]));
}

#[test]
fn items_are_removed_cleared_and_listed_in_pages() {
    let (engine, _pool, recorded) = started();
    let items = (0..25)
        .map(|i| Item {
            id: format!("item-{i:02}"),
            text: if i % 5 == 0 { format!("The Zebra number {i}") } else { format!("plain {i}") },
        })
        .collect();
    engine.handle(ToWorker::AddItems { items });
    take(&recorded);
    engine.handle(ToWorker::ListItems { query: String::new(), offset: 20, limit: 10 });
    engine.handle(ToWorker::ListItems { query: "zEBRA".into(), offset: 1, limit: 2 });
    engine.handle(ToWorker::ListItems { query: "ITEM-07".into(), offset: 0, limit: 10 });
    let posted = take(&recorded);
    let pages: Vec<(usize, Vec<String>)> = posted
        .iter()
        .filter_map(|m| match m {
            FromWorker::Items { total, items, .. } => {
                Some((*total, items.iter().map(|i| i.id.clone()).collect()))
            }
            _ => None,
        })
        .collect();
    assert_eq!(pages[0].0, 25);
    assert_eq!(pages[0].1, ["item-20", "item-21", "item-22", "item-23", "item-24"]);
    assert_eq!(pages[1], (5, vec!["item-05".to_owned(), "item-10".to_owned()]));
    assert_eq!(pages[2], (1, vec!["item-07".to_owned()]));

    engine.handle(ToWorker::RemoveItems { ids: vec!["item-00".into(), "nope".into()] });
    assert_eq!(last_corpus(&take(&recorded)).items, 24);
    engine.handle(ToWorker::ClearCorpus);
    let summary = last_corpus(&take(&recorded));
    assert_eq!((summary.items, summary.bytes, summary.id), (0, 0, None));
    assert!(recorded.corpus.borrow().is_empty());
}

/// A page message with the largest numbers a page can send (`u32::MAX`, which is `usize::MAX`
/// on wasm32) is answered, never a trap: one such `listItems` once stopped the engine of every
/// tab (an overflow in the index's one-word page).
#[test]
fn a_page_of_any_size_from_any_offset_is_answered() {
    let (engine, _pool, recorded) = started();
    let items = (0..30)
        .map(|i| Item { id: format!("item-{i:02}"), text: format!("zebra number {i}") })
        .collect();
    engine.handle(ToWorker::AddItems { items });
    take(&recorded);
    for (query, offset) in
        [("zebra", 1), ("zebra number", 1), ("item", 5), ("", 7), ("zebra", usize::MAX)]
    {
        engine.handle(ToWorker::ListItems { query: query.into(), offset, limit: usize::MAX });
        let posted = take(&recorded);
        let Some(FromWorker::Items { total, items, .. }) = posted.last() else {
            panic!("{query:?} from {offset}: no page in {posted:?}")
        };
        assert_eq!(*total, 30, "{query:?}");
        assert_eq!(items.len(), 30usize.saturating_sub(offset), "{query:?} from {offset}");
    }
}

/// One page message of the corpus kind, with any text and any numbers.
fn page_message() -> impl proptest::strategy::Strategy<Value = ToWorker> {
    use proptest::prelude::*;
    // Words from a small vocabulary (so that searches find items), or any short text.
    let words = proptest::collection::vec(
        proptest::sample::select(vec!["zebra", "Zebras", "tower", "the", "a", "1", "-", ","]),
        0..5,
    )
    .prop_map(|words| words.join(" "));
    let text = prop_oneof![words, "[a-zA-Z0-9 ,.;:'\\-]{0,24}"].boxed();
    let number = prop_oneof![0usize..40, Just(usize::MAX), Just(usize::MAX - 1), any::<usize>()];
    let item = (text.clone(), text.clone()).prop_map(|(id, text)| Item { id, text });
    prop_oneof![
        proptest::collection::vec(item.clone(), 0..12)
            .prop_map(|items| ToWorker::AddItems { items }),
        proptest::collection::vec(text.clone(), 0..4).prop_map(|ids| ToWorker::RemoveItems { ids }),
        Just(ToWorker::ClearCorpus),
        (text.clone(), number.clone(), number)
            .prop_map(|(query, offset, limit)| ToWorker::ListItems { query, offset, limit }),
        (text.clone(), proptest::collection::vec(item, 0..6))
            .prop_map(|(name, items)| { ToWorker::AddToCorpus { name, items, files: Vec::new() } }),
        text.clone().prop_map(|name| ToWorker::DropCorpus { name }),
        text.clone().prop_map(|id| ToWorker::Cancel { id }),
        text.prop_map(|id| ToWorker::ForgetResult { id }),
    ]
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(200))]
    /// Any sequence of corpus messages from a page leaves the engine answering: every
    /// `listItems` gets its page (no more items than asked for or than match), and the engine
    /// still lists after them.
    #[test]
    fn page_messages_never_trap_the_engine(messages in proptest::collection::vec(page_message(), 1..24)) {
        let (engine, mut pool, recorded) = started();
        for message in messages {
            let limit = match &message {
                ToWorker::ListItems { limit, .. } => Some(*limit),
                _ => None,
            };
            engine.handle(message);
            pool.run_until_stalled();
            let posted = take(&recorded);
            if let Some(limit) = limit {
                let page = posted.iter().rev().find_map(|m| match m {
                    FromWorker::Items { total, items, .. } => Some((*total, items.len())),
                    _ => None,
                });
                let (total, shown) = page.expect("every listItems is answered");
                proptest::prop_assert!(shown <= limit && shown <= total);
            }
        }
        engine.handle(ToWorker::ListItems { query: String::new(), offset: 0, limit: 1 });
        let answered = take(&recorded).iter().any(|m| matches!(m, FromWorker::Items { .. }));
        proptest::prop_assert!(answered, "the engine still lists");
    }
}

#[test]
fn the_demo_loads_with_claims_to_try() {
    let (engine, _pool, recorded) = with_demo();
    let posted = take(&recorded);
    assert!((6..=10).contains(&last_corpus(&posted).items));
    assert!(posted.iter().any(|m| matches!(m, FromWorker::Demo { claims } if claims.len() == 3)));
    // Loading it again adds nothing twice.
    engine.handle(ToWorker::LoadDemo);
    assert!(!take(&recorded).iter().any(|m| matches!(m, FromWorker::FileRejected { .. })));
}

/// The 26,259-passage VitaminC corpus loads and indexes through the engine (when present).
#[test]
fn the_vitaminc_corpus_loads_and_indexes() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../../shared/data/vitaminc/corpus.jsonl");
    let Ok(text) = std::fs::read_to_string(path) else { return };
    let (engine, _pool, recorded) = started();
    take(&recorded);
    engine.handle(ToWorker::AddFiles { files: vec![file("corpus.jsonl", &text)] });
    let posted = take(&recorded);
    assert!(!posted.iter().any(|m| matches!(m, FromWorker::FileRejected { .. })), "{posted:?}");
    let summary = last_corpus(&posted);
    assert_eq!(summary.items, 26_259);
    assert!(summary.indexed);
    engine.handle(ToWorker::ListItems { query: " THE ".into(), offset: 0, limit: 20 });
    assert!(matches!(&take(&recorded)[..], [FromWorker::Items { items, .. }] if !items.is_empty()));
}

fn named(posted: &[FromWorker], wanted: &str) -> verity_messages::CorpusSummary {
    posted
        .iter()
        .find_map(|m| match m {
            FromWorker::NamedCorpus { name, corpus } if name == wanted => Some(corpus.clone()),
            _ => None,
        })
        .unwrap_or_else(|| panic!("no NamedCorpus {wanted:?} in {posted:?}"))
}

/// The embedding's corpora: named, in memory, all or nothing, never the main corpus.
#[test]
fn named_corpora_are_separate_and_checked_against() {
    let (engine, mut pool, recorded) = started();
    take(&recorded);
    engine.handle_json(
        &json!({"type": "addToCorpus", "name": "element-1",
                "items": [{"id": "t1", "text": "The Eiffel Tower is 330 metres tall and stands in Paris."}]})
        .to_string(),
    );
    let summary = named(&take(&recorded), "element-1");
    assert_eq!((summary.items, summary.indexed), (1, true));
    // A bad file is refused naming its line; the corpus keeps what it had.
    engine.handle(ToWorker::AddToCorpus {
        name: "element-1".into(),
        items: vec![Item { id: "t2".into(), text: "More text.".into() }],
        files: vec![file("more.jsonl", "{\"id\": \"t3\", \"text\": \"ok\"}\nnot json\n")],
    });
    let posted = take(&recorded);
    let [FromWorker::NamedCorpusRejected { name, file: bad, line, .. }] = &posted[..] else {
        panic!("{posted:?}")
    };
    assert_eq!((name.as_str(), bad.as_str(), *line), ("element-1", "more.jsonl", Some(2)));
    engine.handle(ToWorker::AddToCorpus {
        name: "element-1".into(),
        items: Vec::new(),
        files: vec![file("more.txt", "Paris is the capital of France.\n\nIt has many bridges.")],
    });
    assert_eq!(named(&take(&recorded), "element-1").items, 3, "t2 and t3 were not kept");
    assert!(recorded.corpus.borrow().is_empty(), "the main corpus is neither changed nor saved");

    engine.handle(
        check([request("e1", "The Eiffel Tower stands in Paris.")]).corpus("element-1").into(),
    );
    pool.run_until_stalled();
    let done = finished(&take(&recorded));
    let Outcome::Report { report } = &done[0].outcome else { panic!("{done:?}") };
    assert_eq!(report["assessment"]["verdict"], "supported", "{report}");
    assert_eq!(done[0].cited[0].id, "t1");

    engine.handle(ToWorker::DropCorpus { name: "element-1".into() });
    engine.handle(
        check([request("e2", "The Eiffel Tower stands in Paris.")]).corpus("element-1").into(),
    );
    pool.run_until_stalled();
    let done = finished(&take(&recorded));
    let Outcome::Failed { failure } = &done[0].outcome else { panic!("{done:?}") };
    assert_eq!(failure["kind"], "config");
    assert!(failure["message"].as_str().unwrap().contains("element-1"), "{failure}");
}
