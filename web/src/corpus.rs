//! The Corpus section: drop zone and file picker, refused files, the items table with search
//! and paging, remove and clear, the demo corpus.

use leptos::prelude::*;
use leptos::task::spawn_local;
use verity_messages::{CorpusStorage, NamedText, ToWorker};
use wasm_bindgen_futures::JsFuture;
use web_sys::{DragEvent, FileList, HtmlInputElement};

use crate::engine_view::{Engine, PAGE_SIZE, size_text, thousands};
use crate::js::describe;

/// The file types the picker offers (the worker decides by extension).
pub const ACCEPT: &str = ".txt,.md,.jsonl,.json,.csv";

/// Reads the files' text and sends them to the engine in one message: to the corpus, or (not
/// `corpus`) as a claims file.
pub fn read_files(engine: Engine, list: FileList, corpus: bool) {
    let files: Vec<web_sys::File> = (0..list.length()).filter_map(|i| list.get(i)).collect();
    if files.is_empty() {
        return;
    }
    // The Corpus section says how many of its files are being read.
    let count = if corpus { files.len() } else { 0 };
    engine.reading.update(|n| *n += count);
    spawn_local(async move {
        let mut read = Vec::new();
        for file in files {
            let name = file.name();
            match JsFuture::from(file.text()).await {
                Ok(text) => {
                    read.push(NamedText { name, text: text.as_string().unwrap_or_default() })
                }
                Err(error) => engine.notify(
                    Some(name),
                    None,
                    format!("the browser could not read it: {}", describe(&error)),
                ),
            }
        }
        engine.reading.update(|n| *n = n.saturating_sub(count));
        if corpus {
            engine.add_files(read);
        } else if let Some(file) = read.pop() {
            engine.send(ToWorker::ReadClaims { file });
        }
    });
}

/// The Corpus section: the drop zone, the notices, the corpus's figures, the searchable table
/// of items, and clearing it.
#[component]
pub fn CorpusSection(engine: Engine) -> impl IntoView {
    // Where the corpus stands with the browser's storage: an edit is lost if the last tab of
    // the app closes while it is being written, so it is shown, and leaving is warned of then.
    let warn = window_event_listener(leptos::ev::beforeunload, move |ev| {
        if engine.corpus.with(|c| c.stored) == Some(CorpusStorage::Saving) {
            // The browser shows its own words; setting the return value is what asks it to.
            ev.prevent_default();
            ev.set_return_value("The corpus is still being saved.");
        }
    });
    on_cleanup(move || warn.remove());
    view! {
        <section class="panel" aria-labelledby="corpus-title">
            <h2 id="corpus-title">"Corpus"</h2>
            <DropZone engine />
            <Notices engine />
            <CorpusStats engine />
            <div class="field">
                <label for="corpus-search">"Search the corpus"</label>
                <input
                    id="corpus-search"
                    data-testid="corpus-search"
                    type="search"
                    placeholder="id or text"
                    prop:value=move || engine.query.get()
                    on:input=move |ev| engine.search(event_target_value(&ev))
                />
            </div>
            <ItemsTable engine />
            <Pager engine />
            <ClearCorpus engine />
        </section>
    }
}

/// Where files come in: dropped, picked, or the demo corpus; and what is being read.
#[component]
fn DropZone(engine: Engine) -> impl IntoView {
    let dragging = RwSignal::new(false);
    let on_drop = move |ev: DragEvent| {
        ev.prevent_default();
        dragging.set(false);
        if let Some(files) = ev.data_transfer().and_then(|transfer| transfer.files()) {
            read_files(engine, files, true);
        }
    };
    let on_pick = move |ev: leptos::ev::Event| {
        let input = event_target::<HtmlInputElement>(&ev);
        if let Some(files) = input.files() {
            read_files(engine, files, true);
        }
        // The same file can be chosen again after a fix.
        input.set_value("");
    };
    view! {
        <div
            class="drop"
            class:dragging=move || dragging.get()
            data-testid="corpus-drop"
            on:dragover=move |ev: DragEvent| {
                ev.prevent_default();
                dragging.set(true);
            }
            on:dragleave=move |_| dragging.set(false)
            on:drop=on_drop
        >
            <p class="drop-title">"Drop files here"</p>
            <p class="hint">".txt and .md (one item per paragraph), .jsonl and .json ({id, text}), .csv (id and text columns)"</p>
            <div class="row">
                <input
                    id="corpus-file-input"
                    class="visually-hidden"
                    data-testid="corpus-file-input"
                    type="file"
                    multiple=true
                    accept=ACCEPT
                    on:change=on_pick
                />
                <label for="corpus-file-input" class="button primary">"Choose files…"</label>
                <button
                    type="button"
                    class="button"
                    data-testid="corpus-demo"
                    disabled=move || !engine.is_ready()
                    on:click=move |_| engine.load_demo()
                >
                    "Load demo corpus"
                </button>
            </div>
            <ReadingStatus engine />
        </div>
    }
}

/// Files being read: by the page, by the engine, or waiting for the engine to load.
#[component]
fn ReadingStatus(engine: Engine) -> impl IntoView {
    view! {
        <Show when=move || engine.reading.get() != 0>
            <p class="hint" role="status">
                {move || format!("Reading {} file(s)…", engine.reading.get())}
            </p>
        </Show>
        <Show when=move || engine.parsing.get() != 0 && engine.waiting.get() == 0>
            <p class="hint" role="status" data-testid="corpus-parsing">
                {move || format!("Reading {} in the engine (parsing, hashing, indexing)…", size_text(engine.parsing.get()))}
            </p>
        </Show>
        <Show when=move || engine.waiting.get() != 0>
            <p class="hint" role="status" data-testid="corpus-waiting">
                {move || format!("{} file(s) read, waiting for the engine to load…", engine.waiting.get())}
            </p>
        </Show>
    }
}

/// Refused files and other messages, each until dismissed.
#[component]
fn Notices(engine: Engine) -> impl IntoView {
    view! {
        <div class="notices">
            <For
                each=move || engine.notices.get()
                key=|notice| notice.key
                children=move |notice| {
                    let key = notice.key;
                    view! {
                        // A refused file, or another message (storage, the engine).
                        <div class="notice" role="alert" data-testid=if notice.file.is_some() { "corpus-error" } else { "notice" }>
                            <span>{notice.text()}</span>
                            <button
                                type="button"
                                class="button small"
                                aria-label="Dismiss this message"
                                data-testid="notice-dismiss"
                                on:click=move |_| {
                                    engine.notices.update(|notices| notices.retain(|n| n.key != key))
                                }
                            >
                                "Dismiss"
                            </button>
                        </div>
                    }
                }
            />
        </div>
    }
}

/// The corpus's figures: its items, its size, its index, and its storage.
#[component]
fn CorpusStats(engine: Engine) -> impl IntoView {
    let count = move || engine.corpus.with(|c| c.items);
    let index_state = move || {
        engine.corpus.with(|c| match (c.items, c.indexed, c.index_ms) {
            (0, ..) => String::new(),
            (_, true, Some(ms)) => {
                format!("indexed in {}", crate::engine_view::wait_text(ms.round() as u64))
            }
            (_, true, None) => "indexed".to_owned(),
            (_, false, _) => "indexing…".to_owned(),
        })
    };
    let stored_text = move || match (engine.corpus.with(|c| c.stored), count()) {
        (Some(CorpusStorage::Saving), _) => "saving…",
        (Some(CorpusStorage::NotSaved), _) => "not saved (kept in memory)",
        (Some(CorpusStorage::Saved), 1..) => "saved",
        _ => "",
    };
    view! {
        <div class="corpus-stats">
            <span data-testid="corpus-count">
                {move || match count() {
                    1 => "1 item".to_owned(),
                    n => format!("{} items", thousands(n)),
                }}
            </span>
            <span aria-hidden="true">"·"</span>
            <span data-testid="corpus-size">{move || size_text(engine.corpus.with(|c| c.bytes))}</span>
            <span class="hint" data-testid="corpus-index">{index_state}</span>
            <span class="hint" role="status" data-testid="corpus-stored">{stored_text}</span>
        </div>
    }
}

/// "Clear corpus…", asked again before the corpus is cleared.
#[component]
fn ClearCorpus(engine: Engine) -> impl IntoView {
    let confirming = RwSignal::new(false);
    let count = move || engine.corpus.with(|c| c.items);
    view! {
        <div class="row">
            <Show
                when=move || confirming.get()
                fallback=move || {
                    view! {
                        <button
                            type="button"
                            class="button danger"
                            data-testid="corpus-clear"
                            disabled=move || !engine.is_ready() || count() == 0
                            on:click=move |_| confirming.set(true)
                        >
                            "Clear corpus…"
                        </button>
                    }
                }
            >
                <span class="confirm" role="group" aria-label="Confirm clearing the corpus">
                    {move || format!("Remove all {} items?", count())}
                    <button
                        type="button"
                        class="button danger"
                        data-testid="corpus-clear-confirm"
                        on:click=move |_| {
                            confirming.set(false);
                            engine.clear_corpus();
                        }
                    >
                        "Yes, clear"
                    </button>
                    <button type="button" class="button" data-testid="corpus-clear-keep" on:click=move |_| confirming.set(false)>
                        "Keep"
                    </button>
                </span>
            </Show>
        </div>
    }
}

/// The table of the current page of items.
#[component]
fn ItemsTable(engine: Engine) -> impl IntoView {
    view! {
        <div class="table-wrap">
            <table data-testid="corpus-table" class="items">
                <caption class="visually-hidden">"Corpus items"</caption>
                <thead>
                    <tr>
                        <th scope="col">"Id"</th>
                        <th scope="col">"Text"</th>
                        <th scope="col"><span class="visually-hidden">"Remove"</span></th>
                    </tr>
                </thead>
                <tbody>
                    <For
                        each=move || engine.items.get().items
                        key=|item| (item.id.clone(), item.text.len())
                        children=move |item| {
                            let id = item.id.clone();
                            let label = format!("Remove {}", item.id);
                            view! {
                                <tr>
                                    <td class="item-id">{item.id.clone()}</td>
                                    <td class="item-text"><div class="clamp">{item.text}</div></td>
                                    <td>
                                        <button
                                            type="button"
                                            class="button small"
                                            aria-label=label
                                            data-testid="corpus-remove"
                                            on:click=move |_| engine.remove_item(id.clone())
                                        >
                                            "Remove"
                                        </button>
                                    </td>
                                </tr>
                            }
                        }
                    />
                </tbody>
            </table>
        </div>
    }
}

/// Which items the table shows, and the previous and next pages.
#[component]
fn Pager(engine: Engine) -> impl IntoView {
    let range = move || {
        let page = engine.items.get();
        if page.total == 0 {
            if page.query.is_empty() {
                "No items yet.".to_owned()
            } else {
                "No item matches.".to_owned()
            }
        } else {
            let last = (page.offset + page.items.len()).min(page.total);
            format!(
                "{}–{} of {}",
                thousands(page.offset + 1),
                thousands(last),
                thousands(page.total)
            )
        }
    };
    view! {
        <div class="pager">
            <span class="hint" aria-live="polite">{range}</span>
            <button
                type="button"
                class="button small"
                data-testid="corpus-previous"
                disabled=move || engine.items.with(|p| p.offset == 0)
                on:click=move |_| engine.page(engine.offset.get_untracked().saturating_sub(PAGE_SIZE))
            >
                "Previous"
            </button>
            <button
                type="button"
                class="button small"
                data-testid="corpus-next"
                disabled=move || engine.items.with(|p| p.offset + p.items.len() >= p.total)
                on:click=move |_| engine.page(engine.offset.get_untracked() + PAGE_SIZE)
            >
                "Next"
            </button>
        </div>
    }
}
