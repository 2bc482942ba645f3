//! `conformance [--kind step|claim] FILE...`: replays scenario files through the real machines,
//! prints `PASS name` or `FAIL name: ...` per scenario and `N passed, M failed`, and exits
//! non-zero on any failure or any scenario it cannot run. Then the same with constrained output
//! (`"output": "json-schema"`, the OpenAI codec's JSON Schema mode) for every scenario it can
//! express: `PASS constrained name` ... and `constrained output: N of T apply, ...`.

use std::process::ExitCode;

use verity_tests::Suite;

fn main() -> ExitCode {
    let mut kind = None;
    let mut files = Vec::new();
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--kind" => kind = args.next(),
            "-h" | "--help" => {
                println!("usage: conformance [--kind step|claim] FILE...");
                return ExitCode::SUCCESS;
            }
            _ => files.push(arg),
        }
    }
    if files.is_empty() {
        eprintln!("usage: conformance [--kind step|claim] FILE...");
        return ExitCode::from(2);
    }
    let (mut passed, mut failed) = (0usize, 0usize);
    for file in &files {
        let suite = match std::fs::read_to_string(file)
            .map_err(|e| e.to_string())
            .and_then(|text| Suite::parse(&text))
        {
            Ok(suite) => suite,
            Err(why) => {
                println!("FAIL {file}: cannot read: {why}");
                failed += 1;
                continue;
            }
        };
        for verdict in suite.verdicts(kind.as_deref()) {
            match verdict.result {
                Ok(()) => {
                    passed += 1;
                    println!("PASS {}", verdict.name);
                }
                Err(why) => {
                    failed += 1;
                    println!("FAIL {}: {why}", verdict.name);
                }
            }
        }
        let total = suite.scenarios.len();
        let constrained = suite.constrained_verdicts();
        let applied = constrained.len();
        let mut constrained_failed = 0usize;
        for verdict in constrained {
            match verdict.result {
                Ok(()) => println!("PASS constrained {}", verdict.name),
                Err(why) => {
                    constrained_failed += 1;
                    println!("FAIL constrained {}: {why}", verdict.name);
                }
            }
        }
        println!(
            "constrained output: {applied} of {total} apply ({} passed, {constrained_failed} \
             failed); the rest script several calls or text beside a call in one answer",
            applied - constrained_failed
        );
        failed += constrained_failed;
    }
    println!("{passed} passed, {failed} failed");
    if failed == 0 && passed > 0 { ExitCode::SUCCESS } else { ExitCode::FAILURE }
}
