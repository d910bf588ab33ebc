//! Embeds LoCoMo turns with the two turns before them (what `cairn import` embeds for an
//! `episode`: the two turns before it in its session) with the local e5 model, and prints texts/s, tokens/s and CPU time per text.
//! A small, fast-building program to run under `perf record` (the full measurement with the
//! GEMM reference and the import's RSS is `cairn-bench semantic`).
//!
//! ```text
//! cargo build -p cairn-embed --profile profiling --example e5_locomo
//! perf record -e cpu-clock -g -- $CARGO_TARGET_DIR/profiling/examples/e5_locomo \
//!     ../shared/eval/locomo/locomo-dev.json [TEXTS] [THREADS]
//! ```

use std::time::{Duration, Instant};

use cairn_embed::{E5_SMALL, E5Embedder, E5Options, Embedder, locate_model_dir_for};

/// User + system CPU time of this process, from /proc/self/stat (Linux; None elsewhere).
fn cpu_time() -> Option<Duration> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    let ticks: u64 = fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
    Some(Duration::from_millis(ticks * 10))
}

fn main() {
    let mut args = std::env::args().skip(1);
    let path = args
        .next()
        .expect("usage: e5_locomo LOCOMO.json [TEXTS] [THREADS]");
    let count: usize = args.next().map_or(256, |a| a.parse().expect("TEXTS"));
    let threads: usize = args.next().map_or(1, |a| a.parse().expect("THREADS"));
    let data: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).expect("read LoCoMo")).unwrap();
    let mut texts = Vec::new();
    for sample in data.as_array().expect("a list of conversations") {
        let conversation = &sample["conversation"];
        for session in 1.. {
            let Some(turns) = conversation[format!("session_{session}")].as_array() else {
                break;
            };
            // Context comes from the same session (sessions are days apart).
            let mut bodies: Vec<String> = Vec::new();
            for turn in turns {
                let mut body = format!(
                    "{}: {}",
                    turn["speaker"].as_str().unwrap_or(""),
                    turn["text"].as_str().unwrap_or("")
                );
                if let Some(caption) = turn["blip_caption"].as_str() {
                    body.push_str(&format!(" [image: {caption}]"));
                }
                let mut text = String::new();
                for previous in &bodies[bodies.len().saturating_sub(2)..] {
                    text.push_str(previous);
                    text.push('\n');
                }
                text.push_str(&body);
                texts.push(text);
                bodies.push(body);
            }
        }
    }
    texts.truncate(count);
    let dir = locate_model_dir_for(None, &E5_SMALL).expect("e5 is installed");
    // `CAIRN_E5_KERNEL=f32` runs the large passes on the f32 GEMM, as the CLI does.
    let options = E5Options {
        threads,
        large_pass_int8: std::env::var("CAIRN_E5_KERNEL").map_or(true, |k| k != "f32"),
        ..E5Options::default()
    };
    let model = E5Embedder::load(&dir, &options).expect("e5 loads");
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    let tokens: usize = refs.iter().map(|t| model.passage_tokens(t)).sum();
    let (cpu, wall) = (cpu_time(), Instant::now());
    let vectors = model.embed_batch(&refs).expect("embeds");
    let wall = wall.elapsed().as_secs_f64();
    let cpu = cpu
        .zip(cpu_time())
        .map(|(a, b)| (b - a).as_secs_f64())
        .unwrap_or(f64::NAN);
    assert_eq!(vectors.len(), refs.len());
    println!(
        "{} texts, {tokens} tokens ({:.1}/text), {threads} thread(s), {} large passes: {:.1} texts/s, {:.0} tokens/s wall; {:.1} ms CPU/text",
        refs.len(),
        tokens as f64 / refs.len() as f64,
        model.large_pass_kernel(),
        refs.len() as f64 / wall,
        tokens as f64 / wall,
        cpu * 1000.0 / refs.len() as f64
    );
}
