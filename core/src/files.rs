//! Reading the files a user uploads into passages: one function every host uses (the browser
//! app, the embedding element's `corpus` attribute, a component, a batch job).
//!
//! | extension | format | ids |
//! |---|---|---|
//! | `.txt`, `.md`, `.markdown` | one passage per paragraph (blank lines separate them) | `name#1`, `name#2`, ... |
//! | `.jsonl`, `.ndjson` | one `{"id": ..., "text": ...}` object per line | given |
//! | `.json` | an array of `{"id", "text"}` objects, or an object mapping ids to texts | given |
//! | `.csv` | a header row with an `id` and a `text` column (any case, any order) | given |
//!
//! An id may be a string or an integer. A bad file is an error naming the file, the line and
//! what is wrong; nothing is partly read.

use std::collections::{BTreeMap, HashSet};
use std::fmt;

use serde::Deserialize;
use serde_json::value::RawValue;

use crate::corpus::Passage;

/// A file that cannot be read into passages: which file, which line (1-based, when one is to
/// blame) and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileError {
    /// The file's name.
    pub file: String,
    /// The line at fault, if one is.
    pub line: Option<usize>,
    /// What is wrong.
    pub message: String,
}

impl fmt::Display for FileError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.line {
            Some(line) => write!(f, "{}, line {line}: {}", self.file, self.message),
            None => write!(f, "{}: {}", self.file, self.message),
        }
    }
}

impl std::error::Error for FileError {}

/// The passages in `text`, the contents of a file called `name` (its extension picks the
/// format, see the module docs).
///
/// # Errors
/// A [`FileError`]: an unknown extension, a malformed line, a missing field, an empty id or
/// text, or an id given twice in the file.
pub fn passages_from_file(name: &str, text: &str) -> Result<Vec<Passage>, FileError> {
    let error =
        |line: Option<usize>, message: String| FileError { file: name.to_owned(), line, message };
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let extension = name.rsplit_once('.').map(|(_, ext)| ext.to_ascii_lowercase());
    let passages = match extension.as_deref() {
        Some("txt" | "md" | "markdown") => paragraphs(name, text),
        Some("jsonl" | "ndjson") => json_lines(text).map_err(|(line, m)| error(Some(line), m))?,
        Some("json") => json_document(text).map_err(|(line, m)| error(line, m))?,
        Some("csv") => csv_rows(text).map_err(|(line, m)| error(line, m))?,
        _ => {
            return Err(error(
                None,
                "unsupported file type: use .txt, .md, .jsonl, .json or .csv".to_owned(),
            ));
        }
    };
    let mut seen = HashSet::with_capacity(passages.len());
    for (line, passage) in &passages {
        if !seen.insert(passage.id.as_str()) {
            return Err(error(*line, format!("the id {:?} is given twice", passage.id)));
        }
    }
    if passages.is_empty() {
        return Err(error(None, "no passage in the file".to_owned()));
    }
    Ok(passages.into_iter().map(|(_, passage)| passage).collect())
}

/// A passage with the line it started on.
type Located = (Option<usize>, Passage);

fn paragraphs(name: &str, text: &str) -> Vec<Located> {
    let stem = name.rsplit(['/', '\\']).next().unwrap_or(name);
    let mut passages = Vec::new();
    let mut current: Vec<&str> = Vec::new();
    let mut start = 0;
    for (index, line) in text.lines().chain(std::iter::once("")).enumerate() {
        if line.trim().is_empty() {
            if !current.is_empty() {
                let n = passages.len() + 1;
                let text = current.join("\n").trim().to_owned();
                passages.push((Some(start), Passage { id: format!("{stem}#{n}"), text }));
                current.clear();
            }
        } else {
            if current.is_empty() {
                start = index + 1;
            }
            current.push(line);
        }
    }
    passages
}

/// A passage object as the JSON formats give it.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Item {
    id: Id,
    text: String,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum Id {
    Text(String),
    Number(i64),
}

impl Item {
    fn into_passage(self) -> Result<Passage, String> {
        let id = match self.id {
            Id::Text(id) => id,
            Id::Number(id) => id.to_string(),
        };
        checked(id, self.text)
    }
}

fn checked(id: String, text: String) -> Result<Passage, String> {
    if id.trim().is_empty() {
        return Err("the id is empty".to_owned());
    }
    crate::corpus::check_id(&id)?;
    if text.trim().is_empty() {
        return Err(format!("the text of {id:?} is empty"));
    }
    Ok(Passage { id, text })
}

fn json_lines(text: &str) -> Result<Vec<Located>, (usize, String)> {
    let mut passages = Vec::new();
    for (index, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let line_number = index + 1;
        let item: Item = serde_json::from_str(line).map_err(|e| (line_number, item_error(&e)))?;
        passages.push((Some(line_number), item.into_passage().map_err(|m| (line_number, m))?));
    }
    Ok(passages)
}

/// A serde error without its position (the caller names the line).
fn item_error(error: &serde_json::Error) -> String {
    let text = error.to_string();
    let message = text.split(" at line ").next().unwrap_or(&text).to_owned();
    if error.is_data() {
        format!("not an {{\"id\", \"text\"}} object: {message}")
    } else {
        format!("not JSON: {message}")
    }
}

fn json_document(text: &str) -> Result<Vec<Located>, (Option<usize>, String)> {
    // Each item is read as its raw text inside `text`, so an error names the item's line.
    let shape = "expected an array of {\"id\", \"text\"} objects or an object of id: text";
    let parse_error = |e: serde_json::Error| (Some(e.line()), item_error(&e));
    let document = match text.trim_start().as_bytes().first() {
        Some(b'[') => Document::Items(serde_json::from_str(text).map_err(parse_error)?),
        Some(b'{') => Document::Map(serde_json::from_str(text).map_err(parse_error)?),
        _ => return Err((Some(1), shape.to_owned())),
    };
    let line = |raw: &RawValue| Some(line_at(text, raw.get()));
    match document {
        Document::Items(items) => items
            .into_iter()
            .enumerate()
            .map(|(index, raw)| {
                let at = |m: String| (line(raw), format!("item {index}: {m}"));
                let item: Item = serde_json::from_str(raw.get()).map_err(|e| at(item_error(&e)))?;
                Ok((line(raw), item.into_passage().map_err(at)?))
            })
            .collect(),
        Document::Map(map) => map
            .into_iter()
            .map(|(id, raw)| match serde_json::from_str::<String>(raw.get()) {
                Ok(text) => checked(id, text).map(|p| (line(raw), p)).map_err(|m| (line(raw), m)),
                Err(_) => {
                    Err((line(raw), format!("the value of {id:?} is not a string: {}", raw.get())))
                }
            })
            .collect(),
    }
}

/// A `.json` corpus: an array of items, or an object of id: text (in id order).
enum Document<'a> {
    Items(Vec<&'a RawValue>),
    Map(BTreeMap<String, &'a RawValue>),
}

/// The line (from 1) where `part`, a slice of `text`, begins.
fn line_at(text: &str, part: &str) -> usize {
    let offset = (part.as_ptr() as usize).saturating_sub(text.as_ptr() as usize).min(text.len());
    text.as_bytes()[..offset].iter().filter(|byte| **byte == b'\n').count() + 1
}

fn csv_rows(text: &str) -> Result<Vec<Located>, (Option<usize>, String)> {
    let mut reader = csv::ReaderBuilder::new().flexible(false).from_reader(text.as_bytes());
    let headers = reader.headers().map_err(|e| (Some(1), e.to_string()))?.clone();
    let column = |name: &str| headers.iter().position(|h| h.trim().eq_ignore_ascii_case(name));
    let (Some(id_column), Some(text_column)) = (column("id"), column("text")) else {
        return Err((Some(1), "the header row needs an \"id\" and a \"text\" column".to_owned()));
    };
    let mut passages = Vec::new();
    for record in reader.records() {
        let record = record.map_err(|e| {
            let line = e.position().map(|p| usize::try_from(p.line()).unwrap_or(usize::MAX));
            let message = match e.kind() {
                csv::ErrorKind::UnequalLengths { expected_len, len, .. } => {
                    format!("{len} fields where the header has {expected_len}")
                }
                _ => e.to_string(),
            };
            (line, message)
        })?;
        let line = record.position().map(|p| usize::try_from(p.line()).unwrap_or(usize::MAX));
        let field = |i: usize| record.get(i).unwrap_or_default().to_owned();
        passages
            .push((line, checked(field(id_column), field(text_column)).map_err(|m| (line, m))?));
    }
    Ok(passages)
}

#[cfg(test)]
mod tests {
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    use super::*;

    fn ids(passages: &[Passage]) -> Vec<&str> {
        passages.iter().map(|p| p.id.as_str()).collect()
    }

    #[test]
    fn text_and_markdown_give_one_passage_per_paragraph() {
        let text = "\u{feff}First paragraph,\ntwo lines.\n\n\n  \nSecond.\r\n\r\n# Third\n";
        let passages = passages_from_file("docs/notes.md", text).unwrap();
        assert_eq!(ids(&passages), ["notes.md#1", "notes.md#2", "notes.md#3"]);
        assert_eq!(passages[0].text, "First paragraph,\ntwo lines.");
        assert_eq!(passages[2].text, "# Third");
        assert!(
            passages_from_file("empty.txt", "\n \n").unwrap_err().message.contains("no passage")
        );
    }

    #[test]
    fn json_lines_name_the_bad_line() {
        let good = "{\"id\": \"a\", \"text\": \"one\"}\n\n{\"id\": 7, \"text\": \"two\"}\n";
        assert_eq!(ids(&passages_from_file("c.jsonl", good).unwrap()), ["a", "7"]);
        let cases = [
            ("{\"id\": \"a\", \"text\": \"one\"}\n{\"id\": \"b\"", 2, "not JSON"),
            ("{\"id\": \"a\", \"text\": \"one\"}\n\n{\"id\": \"b\"}", 3, "missing field `text`"),
            ("{\"id\": \"a\", \"body\": \"x\", \"text\": \"t\"}", 1, "unknown field `body`"),
            ("{\"id\": \"\", \"text\": \"t\"}", 1, "the id is empty"),
            ("{\"id\": \"a\", \"text\": \" \"}", 1, "the text of \"a\" is empty"),
            (
                "{\"id\": \"a\", \"text\": \"t\"}\n{\"id\": \"a\", \"text\": \"u\"}",
                2,
                "given twice",
            ),
        ];
        for (text, line, message) in cases {
            let error = passages_from_file("c.jsonl", text).unwrap_err();
            assert_eq!(error.line, Some(line), "{error}");
            assert!(error.message.contains(message), "{error}");
            assert!(error.to_string().starts_with(&format!("c.jsonl, line {line}: ")));
        }
    }

    #[test]
    fn a_json_document_is_an_array_of_items_or_a_map() {
        let array = r#"[{"id": "a", "text": "one"}, {"id": "b", "text": "two"}]"#;
        assert_eq!(ids(&passages_from_file("c.json", array).unwrap()), ["a", "b"]);
        let map = r#"{"e1": "one", "e2": "two"}"#;
        assert_eq!(ids(&passages_from_file("c.JSON", map).unwrap()), ["e1", "e2"]);
        let broken = passages_from_file("c.json", "[\n{\"id\": \"a\",\n").unwrap_err();
        assert_eq!(broken.line, Some(3));
        let item = passages_from_file("c.json", r#"[{"id": "a"}]"#).unwrap_err();
        assert!(item.message.starts_with("item 0: "), "{item}");
        assert_eq!(item.line, Some(1));
        // An item, a duplicate id and a map value are each named by their line.
        let items =
            "[\n  {\"id\": \"a\", \"text\": \"one\"},\n  {\"id\": \"b\",\n   \"txt\": 2}\n]";
        let error = passages_from_file("c.json", items).unwrap_err();
        assert_eq!((error.line, error.message.starts_with("item 1: ")), (Some(3), true), "{error}");
        let twice = "[{\"id\": \"a\", \"text\": \"one\"},\n{\"id\": \"a\", \"text\": \"two\"}]";
        assert_eq!(passages_from_file("c.json", twice).unwrap_err().line, Some(2));
        let map = "{\n\"e1\": \"one\",\n\"e2\": 7\n}";
        let error = passages_from_file("c.json", map).unwrap_err();
        assert_eq!(error.line, Some(3), "{error}");
        assert!(error.message.contains("\"e2\" is not a string"), "{error}");
        let error = passages_from_file("c.json", "3").unwrap_err();
        assert!(error.message.contains("expected an array"), "{error}");
    }

    #[test]
    fn csv_needs_id_and_text_columns_and_names_the_bad_row() {
        let text = "Text,ID,source\n\"Quoted, with comma\",a,x\n\"Two\nlines\",b,y\n";
        let passages = passages_from_file("c.csv", text).unwrap();
        assert_eq!(ids(&passages), ["a", "b"]);
        assert_eq!(passages[0].text, "Quoted, with comma");
        assert_eq!(passages[1].text, "Two\nlines");
        let header = passages_from_file("c.csv", "name,body\na,b\n").unwrap_err();
        assert_eq!((header.line, header.message.contains("\"id\"")), (Some(1), true));
        let short = passages_from_file("c.csv", "id,text\na,one\nb\n").unwrap_err();
        assert_eq!(short.line, Some(3), "{short}");
        assert!(short.message.contains("1 fields where the header has 2"), "{short}");
        let twice = passages_from_file("c.csv", "id,text\na,one\na,two\n").unwrap_err();
        assert_eq!(twice.line, Some(3), "{twice}");
    }

    #[test]
    fn an_unknown_extension_is_refused() {
        let error = passages_from_file("corpus.pdf", "%PDF").unwrap_err();
        assert_eq!(
            error.to_string(),
            "corpus.pdf: unsupported file type: use .txt, .md, .jsonl, .json or .csv"
        );
    }
}
