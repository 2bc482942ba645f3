//! Native benchmark of a suite's cases (`step` or `claim`): one JSON object per case,
//! `{"case","target","iterations","ops_per_sec","cpu_us_per_op","ts_cpu_us_per_op",
//! "times_less_than_ts","goal","goal_met"}`.
//!
//! usage: bench-cases SUITE [SECONDS]

use std::time::{Duration, Instant};

use cpu_time::ProcessTime;

fn main() {
    let mut args = std::env::args().skip(1);
    let name = args.next().unwrap_or_default();
    let Some(cases) = verity_bench::suite(&name) else {
        eprintln!("usage: bench-cases step|claim [SECONDS]");
        std::process::exit(2);
    };
    let seconds: f64 = args.next().and_then(|s| s.parse().ok()).unwrap_or(2.0);
    for case in cases {
        let name = case.name;
        // Warm up (caches, the typed schema compiled once) and calibrate.
        verity_bench::run(name, 200);
        let probe = Instant::now();
        verity_bench::run(name, 1000);
        let per_op = probe.elapsed().as_secs_f64() / 1000.0;
        #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
        let iterations = ((seconds / per_op) as u32).max(1000);

        let wall = Instant::now();
        let cpu = ProcessTime::now();
        verity_bench::run(name, iterations);
        let cpu: Duration = cpu.elapsed();
        let wall = wall.elapsed();
        let cpu_us = cpu.as_secs_f64() * 1e6 / f64::from(iterations);
        let ratio = case.ts_cpu_us_per_op / cpu_us;
        println!(
            "{{\"case\":\"{name}\",\"target\":\"native\",\"iterations\":{iterations},\"ops_per_sec\":{:.0},\"cpu_us_per_op\":{cpu_us:.3},\"ts_cpu_us_per_op\":{},\"times_less_than_ts\":{ratio:.1},\"goal\":{},\"goal_met\":{}}}",
            f64::from(iterations) / wall.as_secs_f64(),
            case.ts_cpu_us_per_op,
            verity_bench::NATIVE_GOAL,
            ratio >= verity_bench::NATIVE_GOAL,
        );
    }
}
