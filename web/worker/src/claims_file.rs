//! Claims read from a file the person picked (`ToWorker::ReadClaims`): `.txt` a claim per
//! line, `.csv` a `claim` column, `.jsonl` a `claim` field. What cannot be read is named by
//! line, never a panic; what is read is bounded.

use serde_json::Value;
use verity_messages::text::{count, thousands};
use verity_messages::{BadLine, FromWorker};

/// The most claims read from one file: the rest is named, not read (a claims box of a
/// million lines helps nobody, and each claim is a check).
pub const MAX_CLAIMS: usize = 1_000;
/// The longest claim read, in characters.
pub const MAX_CLAIM_CHARS: usize = 5_000;
/// How many bad lines are named; the others are counted.
pub const NAMED_BAD_LINES: usize = 10;

/// What reading a file gave so far.
#[derive(Default)]
struct Read {
    claims: Vec<String>,
    bad: Vec<BadLine>,
    more_bad: usize,
    /// The line where reading stopped at [`MAX_CLAIMS`].
    stopped_at: Option<usize>,
}

impl Read {
    /// Takes one line's claim (or why it has none); `false` once the cap is reached.
    fn take(&mut self, line: usize, claim: Result<String, String>) -> bool {
        if self.claims.len() == MAX_CLAIMS {
            self.stopped_at = Some(line);
            return false;
        }
        let claim = claim.and_then(|claim| {
            let claim = claim.trim();
            match claim.chars().count() {
                0 => Err("the claim is empty".to_owned()),
                n if n > MAX_CLAIM_CHARS => Err(format!(
                    "the claim is longer than {} characters",
                    thousands(MAX_CLAIM_CHARS)
                )),
                _ => verity_core::corpus::check_claim_text(claim).map(|()| claim.to_owned()),
            }
        });
        match claim {
            Ok(claim) => self.claims.push(claim),
            Err(message) if self.bad.len() < NAMED_BAD_LINES => {
                self.bad.push(BadLine { line, message });
            }
            Err(_) => self.more_bad += 1,
        }
        true
    }
}

/// The claims of the file `name` whose text is `text`, as the answer to the page.
pub fn read_claims(name: &str, text: &str) -> FromWorker {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let lower = name.to_lowercase();
    let mut read = Read::default();
    let known = if lower.ends_with(".txt") {
        for (i, line) in text.lines().enumerate() {
            if !line.trim().is_empty() && !read.take(i + 1, Ok(line.to_owned())) {
                break;
            }
        }
        true
    } else if lower.ends_with(".jsonl") {
        for (i, line) in text.lines().enumerate() {
            if !line.trim().is_empty() && !read.take(i + 1, jsonl_claim(line)) {
                break;
            }
        }
        true
    } else if lower.ends_with(".csv") {
        read_csv(text, &mut read);
        true
    } else {
        false
    };
    let message = if known {
        words(name, &read)
    } else {
        format!(
            "{name} was not read: a claims file is .txt, .csv or .jsonl (a claim per line, a \
             \"claim\" column, a \"claim\" field)."
        )
    };
    FromWorker::Claims { file: name.to_owned(), claims: read.claims, bad: read.bad, message }
}

fn jsonl_claim(line: &str) -> Result<String, String> {
    let value: Value = serde_json::from_str(line).map_err(|error| format!("not JSON ({error})"))?;
    match value.get("claim") {
        Some(Value::String(claim)) => Ok(claim.clone()),
        Some(_) => Err("\"claim\" is not text".to_owned()),
        None => Err("no \"claim\" field".to_owned()),
    }
}

fn read_csv(text: &str, read: &mut Read) {
    let mut reader =
        csv::ReaderBuilder::new().flexible(true).has_headers(true).from_reader(text.as_bytes());
    let column = match reader.headers() {
        Ok(headers) => {
            let column = headers.iter().position(|name| name.trim().eq_ignore_ascii_case("claim"));
            if column.is_none() {
                let names: Vec<&str> = headers.iter().map(str::trim).collect();
                let message =
                    format!("no column named \"claim\" (the columns: {})", names.join(", "));
                read.bad.push(BadLine { line: 1, message });
                return;
            }
            column
        }
        Err(error) => {
            read.bad.push(BadLine { line: 1, message: format!("not CSV ({error})") });
            return;
        }
    };
    let column = column.unwrap_or_default();
    let mut record = csv::StringRecord::new();
    loop {
        let line = reader.position().line() as usize;
        let claim = match reader.read_record(&mut record) {
            Ok(false) => break,
            Ok(true) => {
                let line = record.position().map_or(line, |at| at.line() as usize);
                let claim = record
                    .get(column)
                    .map(str::to_owned)
                    .ok_or_else(|| "no claim column in this row".to_owned());
                (line, claim)
            }
            Err(error) => (line, Err(format!("not CSV ({error})"))),
        };
        if !read.take(claim.0, claim.1) {
            break;
        }
    }
}

/// "N claims read from NAME; line 3: why; …; and k more bad lines; only the first …".
fn words(name: &str, read: &Read) -> String {
    let n = u32::try_from(read.claims.len()).unwrap_or(u32::MAX);
    let mut text = format!("{} read from {name}", count(n, "claim"));
    for bad in &read.bad {
        text.push_str(&format!("; line {}: {}", bad.line, bad.message));
    }
    if read.more_bad > 0 {
        let plural = if read.more_bad == 1 { "" } else { "s" };
        text.push_str(&format!("; and {} more bad line{plural}", read.more_bad));
    }
    if let Some(line) = read.stopped_at {
        text.push_str(&format!(
            "; only the first {} claims are read: the rest of the file, from line {}, was not",
            thousands(MAX_CLAIMS),
            thousands(line)
        ));
    }
    text + "."
}
