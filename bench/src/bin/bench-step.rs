//! Native step benchmark: one JSON object per case,
//! `{"case","target","iterations","ops_per_sec","cpu_us_per_op"}`.

use std::time::{Duration, Instant};

use cpu_time::ProcessTime;

fn main() {
    let seconds: f64 = std::env::args().nth(1).and_then(|s| s.parse().ok()).unwrap_or(2.0);
    for case in verity_bench::CASES {
        // Warm up (caches, the typed schema compiled once) and calibrate.
        verity_bench::run(case, 200);
        let probe = Instant::now();
        verity_bench::run(case, 1000);
        let per_op = probe.elapsed().as_secs_f64() / 1000.0;
        #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
        let iterations = ((seconds / per_op) as u32).max(1000);

        let wall = Instant::now();
        let cpu = ProcessTime::now();
        verity_bench::run(case, iterations);
        let cpu: Duration = cpu.elapsed();
        let wall = wall.elapsed();
        println!(
            "{{\"case\":\"{case}\",\"target\":\"native\",\"iterations\":{iterations},\"ops_per_sec\":{:.0},\"cpu_us_per_op\":{:.3}}}",
            f64::from(iterations) / wall.as_secs_f64(),
            cpu.as_secs_f64() * 1e6 / f64::from(iterations),
        );
    }
}
